#!/bin/bash
# bench_output.sh - how fast a worker's output/ takes writes, and how fast
# `mlfs umount` sends it to S3, next to a plain folder and `aws s3 cp`.
#
# One config with a `type = s3` datastore of the bucket outbench on an S3
# server on 127.0.0.1 (scripts/server-s3rver.sh, version 5: the
# signature-checking s3rver the integration tests use), its data, mlfs's
# state_dir and the "direct" folder all on the same disk (under /var/tmp),
# and the source bytes on a tmpfs of its own.  Each of BENCH_RUNS repetitions
# (default 3) does, for a file of BENCH_SIZE_MIB MiB (default 1024):
#   direct write   `dd if=SRC of=DIR/big.bin bs=1M conv=fsync`, SRC random
#                  bytes on the tmpfs, DIR a folder next to state_dir;
#   view write     the same dd into output/ of a view mounted with
#                  `mlfs job -f CONFIG SPEC MNT --worker 1` (spec: output to
#                  s3://outbench/mlfs-rN/, "archive": false);
#   mlfs upload    `mlfs umount MNT` of that view, from its start to its exit
#                  (unmount, multipart upload, journal, removal of the staged
#                  file);
#   aws upload     `aws s3 cp DIR/big.bin s3://outbench/aws-rN/big.bin`:
#                  awscli with its defaults (an empty config: 8 MiB parts
#                  above 8 MiB, 10 concurrent requests);
#   zip random     a view with "archive": true (the default) whose output/
#                  gets the same random file (the same dd, not timed), then
#                  `mlfs umount`, timed whole and split at the moment the
#                  zip appears in the output folder (a poller at 5 ms): the
#                  zip phase (from the umount's first line, once the view is
#                  gone, to the zip) and the upload of the zip;
#   zip zeros      the same with a file of zeros (BENCH_ZEROS=0 leaves it out).
# Every timed step starts with `sync; echo 3 > /proc/sys/vm/drop_caches` and
# a pre-touch of BENCH_PRETOUCH_MIB MiB (default twice the size) written to
# the tmpfs and deleted (see bench_lib.sh and docs/benchmarks.md, "Memory on
# this VM": a write through the view fills two page caches, the FUSE file's
# and the staging file's).  Each object is checked (size, and its ETag, which
# s3rver makes the MD5 of the whole object, against the source's MD5) and
# deleted before the next step; in the first repetition the random zip is
# downloaded and tested with `unzip -tq`.
# The medians are printed, in seconds and MB/s (10^6 bytes/s), with the bars
# from the issue, each PASS or FAIL:
#   view write     view MB/s / direct MB/s           >= 0.8
#   upload         aws s3 cp time / mlfs umount time >= 0.9
# and, for information, what zipping adds.  It is a benchmark, not a test:
# it exits 0 when a bar fails, and says so on its last line; non-zero only
# when it cannot measure (a mount, an upload or a check fails).
#
# Usage (as root, from anywhere): [BENCH_RUNS=N] [BENCH_SIZE_MIB=M]
#   [BENCH_ZEROS=0|1] [BENCH_PRETOUCH_MIB=P] scripts/bench_output.sh [MLFS]
# MLFS is the mlfs binary to measure; without it the script builds one
# (scripts/build.sh plain).  It runs scripts/install-deps.sh (s3rver 5,
# awscli) and removes every mount, process, object and file it made.
set -eu
export LC_ALL=C
MLFS_ARG=${1:-}
[ -z "$MLFS_ARG" ] || MLFS_ARG=$(cd "$(dirname "$MLFS_ARG")" && pwd)/${MLFS_ARG##*/}
cd "$(dirname "$0")/.."
. scripts/bench_lib.sh
. scripts/bench_servers.sh
bench=bench_output

RUNS=${BENCH_RUNS:-3}
SIZE_MIB=${BENCH_SIZE_MIB:-1024}
ZEROS=${BENCH_ZEROS:-1}
for v in "BENCH_RUNS=$RUNS" "BENCH_SIZE_MIB=$SIZE_MIB"; do
	case ${v#*=} in
	'' | *[!0-9]* | 0) echo "$bench: ${v%%=*} must be a positive integer" >&2; exit 2 ;;
	esac
done
PRETOUCH_MIB=${BENCH_PRETOUCH_MIB:-$((2 * SIZE_MIB))}
case $PRETOUCH_MIB in
'' | *[!0-9]*) echo "$bench: BENCH_PRETOUCH_MIB must be a number" >&2; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "$bench: run as root (it mounts and drops the page cache)" >&2; exit 2; }
scripts/install-deps.sh
if [ -n "$MLFS_ARG" ]; then
	MLFS=$MLFS_ARG
else
	scripts/build.sh plain
	MLFS=$PWD/build/plain/mlfs
fi
[ -x "$MLFS" ] || { echo "$bench: $MLFS is not an executable" >&2; exit 2; }
FILE_SIZE=$((SIZE_MIB * 1048576))
PRETOUCH=$((PRETOUCH_MIB * 1048576))

# awscli as the tests run it (AWS_CA_BUNDLE breaks it on these machines), with
# an empty config and credentials file of its own: its defaults, whatever
# ~/.aws says.
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_PROFILE AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3

scratch=$(mktemp -d /var/tmp/mlfs-bench-output.XXXXXX)
srv=$scratch/src		# a tmpfs: the source bytes and the pre-touch
pids=""
servers=""
tmpfs_mounted=0
daemon=""
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$srv" "$scratch/direct" "$scratch/state" "$scratch/s3" "$scratch/logs" \
	"$scratch/mnt-view" "$scratch/dl"
mount -t tmpfs -o size=$((SIZE_MIB + PRETOUCH_MIB + 64))M,mode=755 tmpfs "$srv"
tmpfs_mounted=1
: >"$scratch/aws.config"
: >"$scratch/aws.credentials"
export AWS_CONFIG_FILE=$scratch/aws.config AWS_SHARED_CREDENTIALS_FILE=$scratch/aws.credentials
pretouch_mem() { [ "$PRETOUCH" -eq 0 ] || pretouch "$srv/pretouch" "$PRETOUCH"; }

s3port=$(free_port)
S3=http://127.0.0.1:$s3port
servers="s3rver:$scratch/s3"
s3pid=$(S3RVER_BUCKETS=outbench scripts/server-s3rver.sh start "$scratch/s3" "$s3port" 5)
aws() { env -u AWS_CA_BUNDLE aws --endpoint-url "$S3" "$@"; }

cat >"$scratch/bench.conf" <<CONF
[mlfs]
state_dir = $scratch/state
cache_dir = $scratch/cache

[datastore out]
type = s3
endpoint = $S3
bucket = outbench
access_key_id = S3RVER
secret_access_key = S3RVER
CONF
chmod 600 "$scratch/bench.conf"

if [ "$(stat -c %d "$scratch/direct")" != "$(stat -c %d "$scratch/state")" ]; then
	echo "$bench: the direct folder and state_dir are on different file systems" >&2
	exit 1
fi
echo "$bench: s3rver 5 (PID $s3pid) on $S3, data in $scratch/s3;" \
	"state_dir and the direct folder on $(df --output=source "$scratch/state" | tail -1)" \
	"($(df --output=fstype "$scratch/state" | tail -1)); $(aws --version 2>&1 | cut -d' ' -f1-2)" >&2

echo "$bench: $SIZE_MIB MiB of random bytes on the tmpfs" >&2
head -c "$FILE_SIZE" /dev/urandom >"$srv/random.bin"
md5_random=$(md5sum "$srv/random.bin" | cut -d' ' -f1)

# spec NAME ARCHIVE: a one-worker job spec whose output goes to s3://outbench/NAME/.
spec() {
	cat >"$scratch/$1.json" <<JSON
{"name": "$1", "workers": [{"command": "true"}],
 "data": {"output": {"type": "s3", "path": "s3://outbench/$1/", "archive": $2}}}
JSON
}

# view_mount NAME: mounts the view of job NAME, worker 1, at $scratch/mnt-view.
view_mount() {
	"$MLFS" job -f "$scratch/bench.conf" "$scratch/$1.json" "$scratch/mnt-view" --worker 1 \
		>>"$scratch/logs/$1.view.log" 2>&1 &
	daemon=$!
	pids="$pids $daemon"
	wait_mounted "$scratch/mnt-view" "$daemon" "$scratch/logs/$1.view.log" ||
		{ echo "$bench: the view of $1 did not mount" >&2; exit 1; }
	odir=$(sed -n 's/^output_dir=//p' "$scratch/mnt-view/.mlfs/mount")
	[ -n "$odir" ] || { echo "$bench: $1: .mlfs/mount names no output_dir" >&2; exit 1; }
}

# The timed write, the same on both sides: dd from $1 to $2, 1 MiB blocks, fsync'd.
write_file() {
	dd if="$1" of="$2" bs=1M count="$SIZE_MIB" conv=fsync status=none
}

# umount_timed NAME: `mlfs umount` of the view, after drop_caches and the
# pre-touch; each stderr line gets the microseconds since the start.  Sets
# t_total, t_first (to the first line: the view is gone and the upload is
# set up) and t_zip (to the zip appearing in the output folder; empty when
# it never did).  The daemon is reaped.
umount_timed() {
	local name=$1 t0 rc=0 zipmark=$scratch/zip.mark poller

	rm -f "$zipmark"
	drop_caches
	pretouch_mem
	# Sleeps without forking: read on a pipe nothing writes to.
	( exec 3<> <(:); while [ -d "$odir" ] && [ ! -e "$odir/$name.zip" ]; do
		read -r -t 0.005 -u 3 || true; done
	  [ -e "$odir/$name.zip" ] && echo "${EPOCHREALTIME/./}" >"$zipmark" ) &
	poller=$!
	t0=${EPOCHREALTIME/./}
	"$MLFS" umount "$scratch/mnt-view" 2>&1 |
		while IFS= read -r l; do echo "$((${EPOCHREALTIME/./} - t0)) $l"; done \
			>"$scratch/logs/$name.umount.log"
	rc=${PIPESTATUS[0]}
	t_total=$((${EPOCHREALTIME/./} - t0))
	stop_pid "$daemon" 100
	daemon=""
	kill "$poller" 2>/dev/null || true
	wait "$poller" 2>/dev/null || true
	if [ "$rc" -ne 0 ]; then
		echo "$bench: mlfs umount of $name failed; its output:" >&2
		tail -n 20 "$scratch/logs/$name.umount.log" >&2
		exit 1
	fi
	# Its first line names the destination's datastore, set up right before
	# the zip starts (0 if it printed none: the zip phase then counts the unmount).
	t_first=$(awk 'NR == 1 { print $1 }' "$scratch/logs/$name.umount.log")
	t_first=${t_first:-0}
	t_zip=""
	[ -f "$zipmark" ] && t_zip=$(($(cat "$zipmark") - t0))
	return 0
}

# check_object KEY SIZE MD5: the object is there, SIZE bytes long (any size
# when SIZE is "-") and, when MD5 is given, with it as ETag; then deleted.
check_object() {
	local key=$1 size=$2 md5=$3 head len etag

	head=$(aws s3api head-object --bucket outbench --key "$key" \
		--query '[ContentLength, ETag]' --output text) ||
		{ echo "$bench: s3://outbench/$key is missing" >&2; exit 1; }
	len=${head%%[[:space:]]*}
	etag=$(echo "${head#*[[:space:]]}" | tr -d '"')
	if [ "$size" != - ] && [ "$len" != "$size" ]; then
		echo "$bench: s3://outbench/$key is $len bytes, not $size" >&2
		exit 1
	fi
	if [ -n "$md5" ] && [ "$etag" != "$md5" ]; then
		echo "$bench: s3://outbench/$key has ETag $etag, not the source's MD5 $md5" >&2
		exit 1
	fi
	obj_size=$len
	aws s3 rm --only-show-errors "s3://outbench/$key"
}

# rec STEP MICROSECONDS: one sample; and its text for the progress line.
rec() {
	echo "$2" >>"$scratch/res-$1"
	line="$line $(printf '%s %.3f ' "$1" "$(us_to_s "$2")")"
}

# timed STEP COMMAND...: times COMMAND (after drop_caches and the pre-touch)
# as a sample of STEP; exits when it fails.
timed() {
	local step=$1 t
	shift
	drop_caches
	pretouch_mem
	if ! t=$(time_us "$@"); then
		echo "$bench: $step failed after $(us_to_s "$t") s: $*" >&2
		exit 1
	fi
	rec "$step" "$t"
}

for r in $(seq 1 "$RUNS"); do
	line="run $r:"

	# 1. The same write into a plain folder and into output/.
	timed direct write_file "$srv/random.bin" "$scratch/direct/big.bin"

	spec "mlfs-r$r" false
	view_mount "mlfs-r$r"
	timed view write_file "$srv/random.bin" "$scratch/mnt-view/output/big.bin"
	if [ "$r" = 1 ]; then
		echo "$bench: after the view write, .mlfs/stats of output/:" \
			"$(grep -E 'job_output\.(writes|passthrough_opens|bytes_written) ' \
				"$scratch/mnt-view/.mlfs/stats" | xargs)" >&2
	fi

	# 2. Upload: mlfs umount ("archive": false) against aws s3 cp of the same bytes.
	umount_timed "mlfs-r$r"
	rec mlfs-up "$t_total"
	echo "$t_first" >>"$scratch/res-mlfs-up-setup"
	check_object "mlfs-r$r/big.bin" "$FILE_SIZE" "$md5_random"
	[ ! -e "$odir/files/big.bin" ] ||
		{ echo "$bench: the staged file of mlfs-r$r is still there" >&2; exit 1; }

	timed aws-up aws s3 cp --no-progress --only-show-errors \
		"$scratch/direct/big.bin" "s3://outbench/aws-r$r/big.bin"
	check_object "aws-r$r/big.bin" "$FILE_SIZE" "$md5_random"
	rm "$scratch/direct/big.bin"

	# 3. What zipping adds: random bytes, then zeros.
	for kind in random zeros; do
		[ "$kind" = random ] || [ "$ZEROS" = 1 ] || continue
		spec "zip$kind-r$r" true
		view_mount "zip$kind-r$r"
		if [ "$kind" = random ]; then
			write_file "$srv/random.bin" "$scratch/mnt-view/output/big.bin"
		else
			write_file /dev/zero "$scratch/mnt-view/output/big.bin"
		fi
		umount_timed "zip$kind-r$r"
		if [ -z "$t_zip" ]; then
			echo "$bench: the zip of zip$kind-r$r was never seen in $odir" >&2
			exit 1
		fi
		rec "zip$kind-total" "$t_total"
		echo $((t_zip - t_first)) >>"$scratch/res-zip$kind-zip"
		echo $((t_total - t_zip)) >>"$scratch/res-zip$kind-send"
		line="$line(zip $(printf '%.3f' "$(us_to_s $((t_zip - t_first)))")) "
		if [ "$r" = 1 ] && [ "$kind" = random ]; then
			aws s3 cp --only-show-errors "s3://outbench/zip$kind-r$r/zip$kind-r$r.zip" \
				"$scratch/dl/z.zip"
			unzip -tq "$scratch/dl/z.zip" >/dev/null ||
				{ echo "$bench: the zip of zip$kind-r$r does not test clean" >&2; exit 1; }
			[ "$(unzip -p "$scratch/dl/z.zip" big.bin | md5sum | cut -d' ' -f1)" = "$md5_random" ] ||
				{ echo "$bench: the zip of zip$kind-r$r does not hold the source" >&2; exit 1; }
			rm "$scratch/dl/z.zip"
		fi
		check_object "zip$kind-r$r/zip$kind-r$r.zip" - ""
		echo "$obj_size" >"$scratch/size-zip$kind"
	done
	echo "$line" >&2
done

# ---- the report
med_s() { median_s "$scratch/res-$1"; }
mbps() { awk -v s="$1" -v b="$FILE_SIZE" 'BEGIN { printf "%.0f", b / 1e6 / s }'; }
row() {	# row LABEL STEP: median seconds and MB/s of FILE_SIZE bytes
	local s
	s=$(med_s "$2")
	printf '  %-44s %8.3f s  %6s MB/s\n' "$1" "$s" "$(mbps "$s")"
}
direct=$(med_s direct)
view=$(med_s view)
mup=$(med_s mlfs-up)
aup=$(med_s aws-up)
echo
echo "$bench: medians of $RUNS run(s), $SIZE_MIB MiB ($FILE_SIZE bytes), MB/s = 10^6 bytes/s;" \
	"$(nproc) CPUs, kernel $(uname -r)"
echo "1. writing (dd bs=1M conv=fsync from a tmpfs file, after drop_caches):"
row "direct: a folder next to state_dir" direct
row "view: output/ of mlfs job" view
echo "2. uploading to s3rver 5 on 127.0.0.1 (archive false):"
row "mlfs umount (start to exit)" mlfs-up
printf '  %-44s %8.3f s\n' "... of which before its first line (unmount)" "$(med_s mlfs-up-setup)"
row "aws s3 cp (8 MiB parts, 10 at a time)" aws-up
echo "3. zipping (archive true: deflate level 1, incompressible files stored):"
for kind in random zeros; do
	[ -f "$scratch/res-zip$kind-total" ] || continue
	row "$kind: mlfs umount (start to exit)" "zip$kind-total"
	row "$kind: zip phase (first line to zip)" "zip$kind-zip"
	printf '  %-44s %8.3f s  (zip of %s bytes)\n' "$kind: after the zip (upload, cleanup)" \
		"$(med_s "zip$kind-send")" "$(cat "$scratch/size-zip$kind")"
done
zipadd=$(awk -v a="$(med_s ziprandom-total)" -v b="$mup" 'BEGIN { printf "%.3f", a - b }')
printf '  %-44s %8.3f s\n' "random: umount archive true - archive false" "$zipadd"
r1=$(ratio "$direct" "$view")
r2=$(ratio "$aup" "$mup")
v1=$(verdict "$r1" 0.8)
v2=$(verdict "$r2" 0.9)
echo "bars:"
printf '  %-44s %6s  (bar >= 0.8)  %s\n' "view write MB/s / direct write MB/s" "$r1" "$v1"
printf '  %-44s %6s  (bar >= 0.9)  %s\n' "aws s3 cp time / mlfs umount time" "$r2" "$v2"
nfail=0
[ "$v1" = PASS ] || nfail=$((nfail + 1))
[ "$v2" = PASS ] || nfail=$((nfail + 1))
if [ "$nfail" -eq 0 ]; then
	echo "RESULT: both bars pass"
else
	echo "RESULT: $nfail of 2 bars FAIL"
fi
