#!/bin/bash
# bench_remote.sh - how fast mlfs reads from an S3 and an HTTP server, next
# to curl, s3fs and `rclone mount` against the same servers in the same run.
#
# Two local servers on 127.0.0.1, started with scripts/server-s3rver.sh and
# scripts/server-nginx.sh, keep their data on a fresh tmpfs (so a drop of
# the page cache leaves them as they were): s3rver 3.7.1 serves
# testbucket/big.bin (256 MiB of random bytes) and testbucket/many/ (10,000
# small objects); nginx (autoindex) serves the same as www/big.bin and
# www/many/.  s3rver 3.7.1 and not the signature-checking s3rver 5 fork, for
# every S3 client here, mlfs included: s3fs and rclone ask for the bucket as
# `GET /bucket/`, which the fork refuses (SignatureDoesNotMatch); see
# docs/benchmarks.md.  The ways compared:
#   curl-s3, curl-http   `curl -o /dev/null` of big.bin (SigV4-signed for S3):
#                        one stream, each server's own ceiling;
#   mlfs-s3, mlfs-http   MOUNT/datastores/{s3,web} of one mlfs config with a
#                        `type = s3`, a `type = http` and a `type = local`
#                        datastore, cache_dir on disk (not tmpfs);
#   mlfs-local           MOUNT/datastores/disk, the local datastore over a
#                        disk folder holding the same 256 MiB file;
#   direct               that disk file itself, no FUSE (for information);
#   s3fs                 `s3fs testbucket MNT -o url=... -o use_path_request_style
#                        -o passwd_file=...` (Debian's, defaults otherwise);
#   rclone-s3            `rclone mount s3:testbucket MNT` (provider = Other,
#                        default options, run under `env -u AWS_CA_BUNDLE`);
#   rclone-http          `rclone mount web: MNT` (type = http);
#   httpdirfs            `httpdirfs -f URL MNT`, only where it is installed.
# Each repetition times, with $EPOCHREALTIME:
#   first read   `cat big.bin >/dev/null` right after a fresh mount (for mlfs
#                also with an empty cache_dir and state_dir);
#   ls -l        `ls -l many` (into a file on the tmpfs, counted afterwards),
#                the first listing of the 10,000-object prefix since that
#                mount;
#   cache read   mlfs-s3 and mlfs-http: unmount, `sync; echo 3 >
#                /proc/sys/vm/drop_caches`, mount again with the same
#                cache_dir, cat: the next job's read, served from mlfs's disk
#                cache, not from the page cache;
#   disk read    mlfs-local, measured the same way: mount, unmount,
#                drop_caches, mount, cat; direct: drop_caches, cat;
#   CPU          of each first read: the milliseconds of CPU the server
#                (nginx's workers, s3rver's node), the daemon and the reader
#                (cat, or curl itself) spent on it, from /proc (1/CLK_TCK s
#                resolution), beside its wall time: on a 2-CPU machine
#                their sum over 2 is the least the read can take.
# Then the cache reads again, in BENCH_PAIRS rounds (default 12) of pairs:
# a read through mlfs-s3's cache, then one through mlfs-local (each after
# drop_caches, with a fresh mount), and the same for mlfs-http, the cache
# read first in odd rounds and second in even ones.  On this VM a read
# after drop_caches takes about 0.12 s or about 0.4 s at random, so the
# cache bars compare the lower quartiles of these rounds' times.
# The ways take turns within each repetition (in reverse in even ones: see
# run_order in bench_lib.sh), so a noisy neighbour spreads over all of them,
# and every timed step starts with a "pre-touch" (640 MiB
# written to the tmpfs and deleted: see bench_lib.sh and docs/benchmarks.md;
# a first read through mlfs fills two page caches, the FUSE file's and the
# disk cache file's, 512 MiB of fresh pages).
# In the first repetition each read through a mount is compared with the
# original bytes (cmp, not timed), every listing must show 10,000 files, and
# each cache read prints how many MiB the server sent meanwhile (it should
# be 0: a revalidating HEAD at open sends none).
# The medians of BENCH_RUNS repetitions (default 5) are printed, with MiB/s,
# and the bars from the issue, each PASS or FAIL:
#   first read   mlfs >= 0.8 x curl's, for S3 and for HTTP
#   first read   mlfs-http >= 2 x rclone-http's
#   cache read   mlfs >= 0.9 x mlfs-local's disk read, for S3 and for HTTP
#                (lower quartiles of the rounds of pairs)
#   ls -l        mlfs faster than s3fs and rclone (S3), than rclone (HTTP)
# It is a benchmark, not a test: it exits 0 when a bar fails, and says so.
# A peer that fails to mount or to read is reported (with how long it took
# and its log) and left out; a bar that needs it reads "n/a".  It exits
# non-zero only when it cannot measure: a server or the seeding fails, or
# mlfs itself cannot mount or read.
#
# Usage (as root, from anywhere):
#   [BENCH_RUNS=N] [BENCH_PAIRS=M] [BENCH_WAYS="way ..."] scripts/bench_remote.sh
# It installs its packages (scripts/install-deps.sh --bench), builds mlfs
# into build/bench (RelWithDebInfo), and removes every mount, server,
# process and file it made.
set -eu
export LC_ALL=C
cd "$(dirname "$0")/.."
. scripts/bench_lib.sh
. scripts/bench_servers.sh
bench=bench_remote

bench_start "it mounts a tmpfs and drops the page cache"
cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLFS_WERROR=ON >/dev/null
cmake --build build/bench -j"$(nproc)" >/dev/null
MLFS=$PWD/build/bench/mlfs

FILE_SIZE=$((256 * 1024 * 1024))
NFILES=10000
PRETOUCH=$((640 * 1024 * 1024))

# On disk, not tmpfs: mlfs's cache_dir and the local datastore's folder.
scratch=$(mktemp -d /var/tmp/mlfs-bench-remote.XXXXXX)
chmod 755 "$scratch"		# nginx's workers walk down to srv/http/www
srv=$scratch/srv		# a tmpfs: the servers' data
pids=""				# processes started here that may still run
servers=""			# "script:dir" of each server started here
tmpfs_mounted=0

trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$srv" "$scratch/disk" "$scratch/logs"
mount -t tmpfs -o size=2G,mode=755 tmpfs "$srv"
tmpfs_mounted=1


# Servers -----------------------------------------------------------------
s3port=$(free_port)
S3=http://127.0.0.1:$s3port
mkdir -p "$srv/s3"
servers="$servers s3rver:$srv/s3"
# server-s3rver.sh runs node with OpenSSL's legacy provider: s3rver makes
# ListObjectsV2 continuation tokens with DES (mlfs lists with V2; s3fs and
# rclone use V1 here).
s3pid=$(scripts/server-s3rver.sh start "$srv/s3" "$s3port" 3)
httpport=$(free_port)		# s3rver listens by now: not the same port
WEB=http://127.0.0.1:$httpport
mkdir -p "$srv/http/www/many"
servers="$servers nginx:$srv/http"
httppid=$(scripts/server-nginx.sh start "$srv/http" "$httpport")
wait_http "$S3/testbucket"
wait_http "$WEB/"
echo "$bench: s3rver 3.7.1 (PID $s3pid) on $S3, nginx (PID $httppid) on $WEB" >&2


echo "$bench: seeding a 256 MiB object and $NFILES small ones on each server" >&2
t0=${EPOCHREALTIME/./}
head -c "$FILE_SIZE" /dev/urandom >"$scratch/disk/big.bin"
cp "$scratch/disk/big.bin" "$srv/http/www/big.bin"
s3curl -T "$scratch/disk/big.bin" "$S3/testbucket/big.bin" >/dev/null
for i in $(seq -w 1 "$NFILES"); do
	printf 'small file %s\n' "$i" >"$srv/http/www/many/f$i.txt"
done
# One curl, one connection, 10,000 PUTs ("f[00001-10000].txt" is curl's glob).
(cd "$srv/http/www/many" &&
	s3curl -T "f[$(printf "%0${#NFILES}d" 1)-$NFILES].txt" "$S3/testbucket/many/" >/dev/null)
echo "$bench: seeded in $(us_to_s $((${EPOCHREALTIME/./} - t0))) s" >&2

# Configs ------------------------------------------------------------------
cat >"$scratch/mlfs.conf" <<CONF
[mlfs]
state_dir = $scratch/mlfs-state
cache_dir = $scratch/mlfs-cache
cache_size = 2G

[datastore s3]
type = s3
endpoint = $S3
bucket = testbucket
access_key_id = S3RVER
secret_access_key = S3RVER

[datastore web]
type = http
url = $WEB/

[datastore disk]
type = local
root = $scratch/disk
CONF
chmod 600 "$scratch/mlfs.conf"
cat >"$scratch/rclone.conf" <<CONF
[s3]
type = s3
provider = Other
access_key_id = S3RVER
secret_access_key = S3RVER
endpoint = $S3
region = us-east-1

[web]
type = http
url = $WEB/
CONF
echo "S3RVER:S3RVER" >"$scratch/s3fs.passwd"
chmod 600 "$scratch/s3fs.passwd"

# Mounts -------------------------------------------------------------------
# Mounts way $1 in the foreground of a background process; sets $root to the
# folder that holds big.bin and many/ there and $daemon to the PID.  Prints
# how long the mount took to stderr with $2 (a label) when it fails.
mount_way() {
	local way=$1 mnt=$scratch/mnt-$1 log=$scratch/logs/$1.log

	mkdir -p "$mnt"
	case $way in
	mlfs-s3 | mlfs-http | mlfs-local)
		"$MLFS" mount -f "$scratch/mlfs.conf" "$mnt" >>"$log" 2>&1 &
		case $way in
		mlfs-s3) root=$mnt/datastores/s3 ;;
		mlfs-http) root=$mnt/datastores/web ;;
		mlfs-local) root=$mnt/datastores/disk ;;
		esac ;;
	s3fs)
		s3fs testbucket "$mnt" -f -o url="$S3" -o use_path_request_style \
			-o passwd_file="$scratch/s3fs.passwd" >>"$log" 2>&1 &
		root=$mnt ;;
	rclone-s3)
		env -u AWS_CA_BUNDLE rclone mount --config "$scratch/rclone.conf" \
			s3:testbucket "$mnt" >>"$log" 2>&1 &
		root=$mnt ;;
	rclone-http)
		rclone mount --config "$scratch/rclone.conf" web: "$mnt" >>"$log" 2>&1 &
		root=$mnt ;;
	httpdirfs)
		httpdirfs -f "$WEB/" "$mnt" >>"$log" 2>&1 &
		root=$mnt ;;
	esac
	way_started "$mnt" "$log"
}

curl_s3() { s3curl -o /dev/null -w '%{size_download}\n' "$S3/testbucket/big.bin" >"$srv/curl.out"; }
curl_http() { curl -sSf -o /dev/null -w '%{size_download}\n' "$WEB/big.bin" >"$srv/curl.out"; }

failed=""	# ways left out, each with why

# CPU of first reads: what the server, the daemon (none for curl) and the
# reader (cat, or curl itself) spend, in clock ticks (see step in bench_lib.sh).
cpu_step=first
server_pids() {
	case $1 in
	*-s3 | s3fs) echo "$s3pid" ;;
	*) pgrep -P "$httppid" || true ;;	# nginx's workers
	esac
}
cpu_now() {
	local p s=0 d=0
	for p in $(server_pids "$1"); do
		s=$((s + $(ticks "$p")))
	done
	[ -z "${daemon:-}" ] || d=$(ticks "$daemon")
	echo "$s $d $(ticks $$ children)"
}


# Bytes the server of way $1 has sent so far: s3rver's write count (its log
# cannot tell a HEAD from a GET), the body bytes in nginx's access log.
server_sent() {
	case $1 in
	mlfs-s3) awk '$1 == "wchar:" { print $2 }' "/proc/$s3pid/io" ;;
	*) awk '{ s += $10 } END { printf "%.0f\n", s }' "$srv/http/access.log" ;;
	esac
}

# One repetition of way $1.
measure() {
	local way=$1 sent

	line=""
	case $way in
	curl-s3 | curl-http)
		step "$way" first "${way/-/_}" || return 0
		if [ "$(cat "$srv/curl.out")" != "$FILE_SIZE" ]; then
			drop_way "$way" "curl got $(cat "$srv/curl.out") bytes"
			return 0
		fi ;;
	direct | mlfs-local)
		measure_disk "$way" || return 0 ;;
	*)
		case $way in
		mlfs-*) rm -rf "$scratch/mlfs-cache" "$scratch/mlfs-state" ;;
		esac
		mount_way "$way" || { drop_way "$way" "mount failed" mount; return 0; }
		step "$way" first read_file "$root/big.bin" || return 0
		check_bytes "$root/big.bin" || { drop_way "$way" "read wrong bytes"; return 0; }
		step "$way" ls list_ls "$root/many" || return 0
		check_ls || { drop_way "$way" "wrong listing"; return 0; }
		umount_way "$way"
		case $way in
		mlfs-s3 | mlfs-http)
			line="$line cache_dir $(du -sm "$scratch/mlfs-cache" | cut -f1) MiB "
			drop_caches
			mount_way "$way" || { drop_way "$way" "second mount failed" mount; return 0; }
			sent=$(server_sent "$way")
			step "$way" cache read_file "$root/big.bin" || return 0
			sent=$(($(server_sent "$way") - sent))
			line="$line(the server sent $(awk -v b="$sent" 'BEGIN { printf "%.1f", b / 1048576 }') MiB) "
			check_bytes "$root/big.bin" || { drop_way "$way" "cache read wrong bytes"; return 0; }
			umount_way "$way" ;;
		esac ;;
	esac
	printf '  %-12s %s\n' "$way" "$line" >&2
}

WAYS=${BENCH_WAYS:-curl-s3 curl-http mlfs-s3 mlfs-http mlfs-local direct s3fs rclone-s3 rclone-http}
if [ -n "${BENCH_WAYS:-}" ]; then
	:	# as asked
elif command -v httpdirfs >/dev/null; then
	WAYS="$WAYS httpdirfs"
else
	echo "$bench: httpdirfs is not installed: left out" >&2
fi
t_start=${EPOCHREALTIME/./}
for run in $(seq "$RUNS"); do
	echo "$bench: repetition $run of $RUNS" >&2
	# shellcheck disable=SC2086
	for way in $(run_order "$run" $WAYS); do
		way_failed "$way" || measure "$way"
	done
done

# Cache reads in pairs -------------------------------------------------------
# A cache read and a local disk read are the same read of an ext4 file (FUSE
# passthrough).  On this VM such a read right after drop_caches takes about
# 0.12 s or about 0.4 s, whoever makes it, at random, and about a third of
# them are slow: a median of a few decides nothing (docs/benchmarks.md).  So
# the cache bars are decided here, by $PAIRS rounds: in each, for each cache
# way, big.bin is read through that way's cache and through mlfs-local right
# after one another (each read: drop_caches, mount, pre-touch, cat,
# unmount), the cache read first in odd rounds and second in even ones.  A
# bar compares the lower quartiles of the two ways' times over the rounds:
# what a read costs when the VM does not slow it; the median of the pairs'
# ratios is printed beside it.
PAIRS=${BENCH_PAIRS:-12}
case $PAIRS in
'' | *[!0-9]*) echo "$bench: BENCH_PAIRS must be a number" >&2; exit 2 ;;
esac
# Whether every way named is measured and still in.
measured() {
	local w
	for w in "$@"; do
		case " $WAYS " in *" $w "*) ;; *) return 1 ;; esac
		! way_failed "$w" || return 1
	done
}
# Reads big.bin through way $1 after drop_caches, as a step named "pair".
pair_read() {
	drop_caches
	mount_way "$1" || return 1
	step "$1" pair read_file "$root/big.bin" || return 1
	umount_way "$1"
}
paired=""
if [ "$PAIRS" -gt 0 ] && measured mlfs-s3 mlfs-http mlfs-local; then
	echo "$bench: cache reads in $PAIRS rounds of pairs" >&2
	rm -rf "$scratch/mlfs-cache" "$scratch/mlfs-state"
	mount_way mlfs-s3 || { echo "$bench: mlfs did not mount" >&2; exit 1; }
	cat "$scratch/mnt-mlfs-s3/datastores/s3/big.bin" \
		"$scratch/mnt-mlfs-s3/datastores/web/big.bin" >/dev/null
	umount_way mlfs-s3
	paired=yes
	for run in $(seq "$PAIRS"); do
		line=""
		for way in mlfs-s3 mlfs-http; do
			for w in $(run_order "$run" "$way" mlfs-local); do
				pair_read "$w" || { paired=""; break 3; }
			done
			echo "$(ratio "$(tail -n 1 "$scratch/res-mlfs-local-pair")" \
				"$(tail -n 1 "$scratch/res-$way-pair")")" >>"$scratch/pair-$way"
		done
		printf '  round %-3s %s\n' "$run" "$line" >&2
	done
	[ -n "$paired" ] || echo "$bench: the rounds of cache reads stopped: the cache bars are n/a" >&2
fi
t_total=$(us_to_s $((${EPOCHREALTIME/./} - t_start)))

# Results ----------------------------------------------------------------

declare -A med
for way in $WAYS; do
	for m in first cache disk ls; do
		if ! way_failed "$way" && [ -s "$scratch/res-$way-$m" ]; then
			med[$way.$m]=$(median_s "$scratch/res-$way-$m")
		fi
	done
done

echo
echo "mlfs remote benchmark: $RUNS repetitions, medians; 256 MiB object, $NFILES-object prefix"
echo "s3rver 3.7.1 and nginx on 127.0.0.1, data on tmpfs; mlfs cache_dir on disk"
echo "kernel $(uname -r), $(nproc) CPUs; measuring took $t_total s"
echo
printf '%-12s %20s %20s %8s\n' way "first read s (MiB/s)" "cache/disk read" "ls -l s"
for way in $WAYS; do
	again=$(cell "$way" cache)
	case $way in mlfs-local | direct) again=$(cell "$way" disk) ;; esac
	printf '%-12s %20s %20s %8s\n' "$way" "$(cell "$way" first)" "$again" "$(cell "$way" ls)"
done
if [ -n "$failed" ]; then
	echo "left out (see above):$failed"
fi
echo
echo "CPU of a first read, medians in ms (1/$(getconf CLK_TCK) s resolution), against its wall time:"
printf '%-12s %8s %8s %8s %8s %10s %8s\n' way server daemon reader sum "sum/$(nproc)" wall
for way in $WAYS; do
	if [ ! -s "$scratch/cpu-$way" ] || [ -z "${med[$way.first]:-}" ]; then
		continue
	fi
	c=$(for k in 1 2 3; do median_col "$scratch/cpu-$way" "$k"; done | tr '\n' ' ')
	echo "$c ${med[$way.first]} $(nproc)" | awk -v w="$way" '{ s = $1 + $2 + $3
		printf "%-12s %8d %8d %8d %8d %10d %8d\n", w, $1, $2, $3, s, s / $5, $4 * 1000 }'
done
if [ -n "$paired" ]; then
	echo
	echo "cache reads in $PAIRS rounds of pairs, seconds: lower quartile, median"
	for way in mlfs-s3 mlfs-http mlfs-local; do
		printf '  %-12s %.3f  %.3f\n' "$way" "$(quantile_s "$scratch/res-$way-pair" 25)" \
			"$(median_s "$scratch/res-$way-pair")"
	done
	for way in mlfs-s3 mlfs-http; do
		echo "  $way / mlfs-local, pair by pair: $(tr '\n' ' ' <"$scratch/pair-$way")"
	done
fi

# bar NAME A.STEP B.STEP BAR [strict] [time]: the throughput ratio A/B (time
# ratio B/A with "time": how many times faster A is), checked against BAR.
nbars=0
nfail=0
nna=0

echo
echo "bars (throughput ratios for reads, time ratios for ls -l):"
bar "first read: mlfs-s3 / curl-s3" mlfs-s3.first curl-s3.first 0.8
bar "first read: mlfs-http / curl-http" mlfs-http.first curl-http.first 0.8
bar "first read: mlfs-http / rclone-http" mlfs-http.first rclone-http.first 2
# The lower quartiles of the pairs' times (see "Cache reads in pairs").
pair_bar() {
	bar_value "cache read: $1 / mlfs-local, pairs" "$([ -z "$paired" ] ||
		ratio "$(quantile_s "$scratch/res-mlfs-local-pair" 25)" \
			"$(quantile_s "$scratch/res-$1-pair" 25)")" 0.9
}
pair_bar mlfs-s3
pair_bar mlfs-http
bar "ls -l: s3fs time / mlfs-s3 time" mlfs-s3.ls s3fs.ls 1 strict
bar "ls -l: rclone-s3 time / mlfs-s3 time" mlfs-s3.ls rclone-s3.ls 1 strict
bar "ls -l: rclone-http time / mlfs-http time" mlfs-http.ls rclone-http.ls 1 strict
echo "for information:"
info "first read: mlfs-s3 / s3fs" mlfs-s3.first s3fs.first
info "first read: mlfs-s3 / rclone-s3" mlfs-s3.first rclone-s3.first
info "first read: s3fs / curl-s3" s3fs.first curl-s3.first
info "first read: rclone-s3 / curl-s3" rclone-s3.first curl-s3.first
info "first read: rclone-http / curl-http" rclone-http.first curl-http.first
info "first read: httpdirfs / curl-http" httpdirfs.first curl-http.first
info "first read: mlfs-http / httpdirfs" mlfs-http.first httpdirfs.first
info "ls -l: httpdirfs time / mlfs-http time" mlfs-http.ls httpdirfs.ls
info "cache read: mlfs-s3 / mlfs-local, medians" mlfs-s3.cache mlfs-local.disk
info "cache read: mlfs-http / mlfs-local, medians" mlfs-http.cache mlfs-local.disk
if [ -n "$paired" ]; then
	for way in mlfs-s3 mlfs-http; do
		printf '  %-46s %6s\n' "cache read: $way / mlfs-local, pairs' median" \
			"$(median_col "$scratch/pair-$way" 1)"
	done
fi
info "cache read: mlfs-s3 / curl-s3 first read" mlfs-s3.cache curl-s3.first
info "cache read: mlfs-s3 / direct disk read" mlfs-s3.cache direct.disk
info "cache read: mlfs-http / direct disk read" mlfs-http.cache direct.disk
info "disk read: mlfs-local / direct" mlfs-local.disk direct.disk

echo
if [ "$nna" -gt 0 ]; then
	echo "RESULT: $nfail of $nbars bars FAIL, $nna could not be measured"
elif [ "$nfail" -eq 0 ]; then
	echo "RESULT: all $nbars bars pass"
else
	echo "RESULT: $nfail of $nbars bars FAIL (a benchmark: exiting 0 all the same)"
fi
case " $failed " in
*" mlfs-"* | *" curl-"*)
	echo "$bench: could not measure mlfs or curl, so some bars are missing" >&2
	exit 1 ;;
esac
exit 0
