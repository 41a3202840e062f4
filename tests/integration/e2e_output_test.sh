#!/bin/bash
# e2e_output_test.sh - a worker's data and output end to end, against real
# servers on 127.0.0.1 (nfs-ganesha, Samba smbd, @20minutes/s3rver 5, all
# started by scripts/server-*.sh), cross-checked with independent clients
# (awscli, nfs-ls/nfs-cat, the servers' own folders):
#  1. mlfs job + mlfs umount: two datasets on NFS, a checkpoint on S3, model
#     code on SMB; output/ zipped to s3://outbkt/results/<job>.zip;
#  2. the same through the gateway: a spec copied into jobs/ whose command
#     reads /opt/ml/{input,checkpoint,models} and writes /opt/ml/output;
#  3. two workers mounted at once: <job>_1.zip and <job>_2.zip;
#  4. output to an NFS datastore folder as plain files;
#  5. "archive": false to S3: plain objects, a 20 MiB one byte-identical;
#  6. faults: the S3 server down at mlfs umount (non-zero, staged files kept,
#     mlfs sync delivers once it is back); a 300 MiB plain upload whose
#     mlfs sync is killed -9 midway, then resumed without resending the
#     parts it had saved;
#  7. inference inputs that are archives (zip, tar, tar.gz, tar.bz2 on NFS,
#     SMB and S3 datastores, and an s3:// URL) shown extracted in input/.
# 7 runs before 6, which stops the S3 server.  Every mlfs process's stderr
# is kept in a *.log of the scratch folder and searched for sanitizer
# reports at the end (the ASan build).
# Usage: e2e_output_test.sh MLFS
set -u
MLFS=$1
TOP=$(cd "$(dirname "$0")/../.." && pwd)
MLFS=$(cd "$(dirname "$MLFS")" && pwd)/${MLFS##*/}
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1
T_START=$(date +%s.%N)

S3SRV=$TOP/scripts/server-s3rver.sh
NFSSRV=$TOP/scripts/server-nfs.sh
SMBSRV=$TOP/scripts/server-smb.sh
SMB_PASS='Passw0rd!'
export SMB_TEST_PASSWORD=$SMB_PASS
export S3RVER_BUCKETS=outbkt
# Leaks inside Samba's own libraries are theirs (see smb_test.sh).
[ -f "$TOP/tests/lsan.supp" ] && export LSAN_OPTIONS="suppressions=$TOP/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
SAN='AddressSanitizer|runtime error|LeakSanitizer'

S3P=$(free_port)
SMBP=$(free_port)
for _ in $(seq 1 50); do
	NFSP=$((20000 + RANDOM % 12000))
	MNTP=$((NFSP + 1))
	port_free "$NFSP" && port_free "$MNTP" && [ "$NFSP" != "$S3P" ] && [ "$MNTP" != "$S3P" ] &&
		[ "$NFSP" != "$SMBP" ] && [ "$MNTP" != "$SMBP" ] && break
done
NFSOPTS="version=3&nfsport=$NFSP&mountport=$MNTP"
nfs_url() { echo "nfs://127.0.0.1/export$1?$NFSOPTS"; }
EP=http://127.0.0.1:$S3P
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL
aws() { timeout 120 env -u AWS_CA_BUNDLE /usr/bin/aws --endpoint-url "$EP" "$@"; }

declare -A VPID=()	# view name -> PID of its `mlfs job -f`
SYNC_PID=

# reap PID: waits (10 s at most) for PID to end, then kills it; its exit status.
reap() {
	local pid=$1
	for _ in $(seq 1 200); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	wait "$pid"
}

# ours_left [TEXT]: PID and command line of each process still running with
# this test's scratch folder (and TEXT) in its command line (the views the
# gateway mounted for its workers, their shepherds, servers), but for this
# script's own.
ours_left() {
	local p cmd st ppid me=$BASHPID want=${1:-$T_DIR/} args
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[ "$p" = $$ ] || [ "$p" = "$me" ] && continue
		mapfile -d '' args <"/proc/$p/cmdline" 2>/dev/null || continue
		cmd="${args[*]}"
		case $cmd in *"$T_DIR/"*) ;; *) continue ;; esac
		case $cmd in *"$want"*) ;; *) continue ;; esac
		read -r _ _ st ppid _ <"/proc/$p/stat" 2>/dev/null || continue
		# not a zombie, nor this script's own pipelines
		[ "$st" = Z ] || [ "$ppid" = $$ ] || [ "$ppid" = "$me" ] && continue
		echo "$p $cmd"
	done
}

e2e_cleanup() {
	if [ -n "$SYNC_PID" ]; then
		kill -KILL "$SYNC_PID" 2>/dev/null
		wait "$SYNC_PID" 2>/dev/null
		SYNC_PID=
	fi
	# Every mlfs mount under the scratch folder: our views, the gateway, its workers' views.
	awk -v d="$T_DIR/" '$3 == "fuse.mlfs" && index($2, d) == 1 { print $2 }' /proc/self/mounts |
		while read -r m; do fusermount3 -u -z "$m" 2>/dev/null; done
	for v in "${!VPID[@]}"; do
		reap "${VPID[$v]}" 2>/dev/null
		unset "VPID[$v]"
	done
	if [ -n "${MOUNT_PID:-}" ]; then
		reap "$MOUNT_PID" 2>/dev/null
		MOUNT_PID=
	fi
	"$S3SRV" stop "$T_DIR/s3" 2>/dev/null
	"$SMBSRV" stop "$T_DIR/smb" 2>/dev/null
	"$NFSSRV" stop "$T_DIR/nfs" 2>/dev/null
	# Whatever the gateway started and left behind (a view daemon that never
	# exited, a worker blocked on it): by PID, twice, since a process blocked
	# on a dead view's FUSE request only goes once that view's daemon is gone.
	local pid cmd
	for _ in 1 2; do
		ours_left | while read -r pid cmd; do
			echo "# killing leftover $pid: ${cmd:0:160}"
			kill -KILL "$pid" 2>/dev/null
		done
		sleep 0.3
	done
	return 0
}
t_cleanup() { e2e_cleanup; }
trap 'e2e_cleanup; rm -rf "$T_DIR"' EXIT
trap 'exit 130' INT TERM

bail() { not_ok "$1"; t_finish; exit 1; }
# section TITLE: a comment line with the time since the start.
section() { echo "# --- $1 (at $(echo "$(date +%s.%N) - $T_START" | bc | cut -c1-5) s)"; }

# --- what the servers hold, seeded before they start
E=$T_DIR/nfs/export
S=$T_DIR/smb/share
mkdir -p "$E/data/mnist" "$E/data/voc/img" "$E/arch" seed/ck/resnet seed/arch arch-src/dir
printf 'digits\n' >"$E/data/mnist/train.txt"
printf 'person 12 40\n' >"$E/data/voc/ann.txt"
head -c 2000000 /dev/urandom >"$E/data/voc/img/big.bin"
cp "$E/data/voc/img/big.bin" voc-big.bin
printf 'epoch 7\n' >seed/ck/resnet/state.txt
head -c 3000000 /dev/urandom >seed/ck/resnet/weights.bin
printf 'hello archive\n' >arch-src/hello.txt
head -c 1048583 /dev/urandom >arch-src/dir/member.bin
(cd arch-src && zip -qr ../in.zip hello.txt dir && tar cf ../in.tar hello.txt dir &&
	tar czf ../in.tar.gz hello.txt dir && tar cjf ../in.tar.bz2 hello.txt dir) ||
	bail "archives made"
cp in.zip in.tar.bz2 "$E/arch/"
cp in.tar.gz seed/arch/
cp in.zip seed/arch/url.zip

"$NFSSRV" start "$T_DIR/nfs" "$NFSP" "$MNTP" >/dev/null || bail "ganesha started"
"$SMBSRV" start "$T_DIR/smb" "$SMBP" >/dev/null || bail "smbd started"
"$S3SRV" start "$T_DIR/s3" "$S3P" >/dev/null || bail "s3rver started"
mkdir -p "$S/code/detector/lib" "$S/arch"
printf 'print("hi")\n' >"$S/code/detector/train.py"
printf 'def f(): pass\n' >"$S/code/detector/lib/util.py"
cp in.tar in.tar.gz "$S/arch/"
chown -R mlfssmb "$S"
aws s3 cp --recursive --quiet seed s3://testbucket/ || bail "awscli seeded testbucket"
printf '%s\n' "$SMB_PASS" >smb.pass
chmod 600 smb.pass
echo "# servers up and seeded after $(echo "$(date +%s.%N) - $T_START" | bc) s"

CONF=$T_DIR/e.conf
cat >"$CONF" <<CONF
[mlfs]
state_dir = $T_DIR/state
cache_dir = $T_DIR/cache
timeout = 3
retries = 1

[node]
gpus = 0
cpus = 8

[datastore lab]
type = nfs
address = 127.0.0.1
export = /export
options = $NFSOPTS

[datastore share]
type = smb
address = 127.0.0.1:$SMBP
share = share
username = mlfssmb
password_file = $T_DIR/smb.pass

[datastore objs]
type = s3
endpoint = $EP
bucket = testbucket
access_key_id = S3RVER
secret_access_key = S3RVER

[datastore outs]
type = s3
endpoint = $EP
bucket = outbkt
access_key_id = S3RVER
secret_access_key = S3RVER

# Google Cloud Storage's XML API, the local S3 server standing in for its endpoint
[datastore gouts]
type = gcs
endpoint = $EP
bucket = outbkt
access_key_id = S3RVER
secret_access_key = S3RVER

[dataset mnist]
source = lab:/data/mnist

[dataset PASCAL VOC]
source = lab:/data/voc

[checkpoint resnet]
source = objs:/ck/resnet/

[model detector]
source = share:/code/detector
CONF
check "mlfs check accepts the config" timeout 20 "$MLFS" check "$CONF"

# view_up NAME SPEC WORKER: worker WORKER's view of SPEC at $T_DIR/NAME, in
# the foreground, in the background; its stderr in view.NAME.log.
view_up() {
	local mp=$T_DIR/$1
	mkdir -p "$mp"
	"$MLFS" job -f "$CONF" "$2" "$mp" --worker "$3" 2>"$T_DIR/view.$1.log" &
	VPID[$1]=$!
	for _ in $(seq 1 400); do
		is_mounted "$mp" && return 0
		kill -0 "${VPID[$1]}" 2>/dev/null || break
		sleep 0.05
	done
	echo "# view $1 did not come up:"
	sed 's/^/#   /' "$T_DIR/view.$1.log"
	return 1
}

# view_reap NAME: waits for the view's daemon; checks it exited 0 with no sanitizer report.
view_reap() {
	local status=0
	reap "${VPID[$1]}" || status=$?
	unset "VPID[$1]"
	if [ "$status" -eq 0 ] && ! grep -qE "$SAN" "$T_DIR/view.$1.log"; then
		ok "view $1: daemon exited cleanly"
	else
		not_ok "view $1: daemon exited with $status"
		sed 's/^/#   /' "$T_DIR/view.$1.log" | head -30
	fi
}

# view_down NAME: mlfs umount (status in UMOUNT_STATUS, stderr in umount.NAME.log), then view_reap.
view_down() {
	UMOUNT_STATUS=0
	timeout 180 "$MLFS" umount "$T_DIR/$1" 2>"$T_DIR/umount.$1.log" || UMOUNT_STATUS=$?
	view_reap "$1"
	if grep -qE "$SAN" "$T_DIR/umount.$1.log"; then
		not_ok "mlfs umount of $1: a sanitizer report"
		sed 's/^/#   /' "$T_DIR/umount.$1.log" | head -30
	fi
}

# in_log DESCRIPTION PATTERN FILE: passes when FILE has a line matching PATTERN; shows FILE if not.
in_log() {
	if timeout 20 grep -qE -- "$2" "$3" 2>/dev/null; then
		ok "$1"
	else
		not_ok "$1 (no '$2' in ${3##*/})"
		timeout 20 sed 's/^/#   /' "$3" 2>&1 | head -20
	fi
}

# Reads and writes through a mount, bounded: a hung mount fails a check, not the run.
# s3_get S3URL FILE: awscli's copy of an object, tried up to 3 times (a
# bounded wait for a slow server); on failure prints awscli's own words and
# what a HEAD says of the object, so a failure says why.
s3_get() {
	local try
	rm -f "$2"
	for try in 1 2 3; do
		aws s3 cp --only-show-errors "$1" "$2" >"$T_DIR/s3_get.err" 2>&1 && return 0
		echo "# aws s3 cp $1 failed (try $try): $(tr '\n' ' ' <"$T_DIR/s3_get.err" | cut -c1-400)"
		sleep 2
	done
	echo "# HEAD $1: $(aws s3api head-object --bucket "$(echo "$1" | cut -d/ -f3)" \
		--key "$(echo "$1" | cut -d/ -f4-)" 2>&1 | tr '\n' ' ' | cut -c1-400)"
	return 1
}
# s3_same S3URL FILE: awscli's copy of the object (in got.bin, removed after)
# is FILE, byte for byte.  awscli is tried up to 3 times (a bounded wait for
# a slow server); a failure prints its own words and what a HEAD of the
# object says, so the test says why.
s3_same() {
	local try bucket=${1#s3://}
	bucket=${bucket%%/*}
	rm -f got.bin
	for try in 1 2 3; do
		if aws s3 cp --only-show-errors "$1" got.bin 2>&1; then
			cmp got.bin "$2"
			try=$?
			rm -f got.bin
			return "$try"
		fi
		echo "aws s3 cp $1 failed (try $try)"
		sleep 2
	done
	echo "HEAD: $(aws s3api head-object --bucket "$bucket" --key "${1#s3://"$bucket"/}" 2>&1)"
	return 1
}
mcat() { timeout 20 cat "$@" 2>&1; }
mls() { timeout 20 ls "$@" 2>&1 | xargs; }
msha() { timeout 60 sha256sum "$1" 2>&1 | cut -d' ' -f1; }
mput() { timeout 20 sh -c 'printf "%s\n" "$1" >"$2"' _ "$1" "$2"; }

# staged_of NAME: the view's output folder in state_dir (from .mlfs/mount).
staged_of() { timeout 20 sed -n 's/^output_dir=//p' "$T_DIR/$1/.mlfs/mount"; }

# mlfs_logged NAME ARGS...: mlfs ARGS (at most 300 s), its stderr kept in NAME.log and passed on.
mlfs_logged() {
	local log=$T_DIR/$1.log st=0
	shift
	timeout 300 "$MLFS" "$@" 2>"$log" || st=$?
	cat "$log" >&2
	return "$st"
}

# s3_zip_member KEY MEMBER: MEMBER of the zip at s3://outbkt/KEY, through awscli.
s3_zip_member() {
	rm -f got.zip
	aws s3 cp --quiet "s3://outbkt/$1" got.zip 2>&1 && unzip -p got.zip "$2" 2>&1
}

# ======== 1. mlfs job + mlfs umount: NFS datasets, S3 checkpoint, SMB model, output to S3
section "1 mlfs job + umount to S3"
cat >e2e.json <<JSON
{"name": "e2e", "workers": [{"command": "true"}],
 "data": {"datasets": ["mnist", "PASCAL VOC"],
          "output": {"type": "s3", "path": "s3://outbkt/results/"}},
 "checkpoints": ["resnet"], "model": {"type": "model", "path": "detector"}}
JSON
view_up v1 e2e.json 1 || bail "the e2e view came up"
V=$T_DIR/v1
same "the view's top" "checkpoint input models output" "$(mls "$V")"
same "two NFS datasets, one folder each" "PASCAL_VOC mnist" "$(mls "$V/input")"
same "a dataset on NFS reads through input/" "digits" "$(mcat "$V/input/mnist/train.txt")"
same "... a 2 MB file on NFS, byte-identical" "$(sha voc-big.bin)" "$(msha "$V/input/PASCAL_VOC/img/big.bin")"
same "the S3 checkpoint reads through checkpoint/" "epoch 7" "$(mcat "$V/checkpoint/state.txt")"
same "... a 3 MB object, byte-identical" "$(sha seed/ck/resnet/weights.bin)" "$(msha "$V/checkpoint/weights.bin")"
same "the SMB model code reads through models/" 'print("hi")' "$(mcat "$V/models/train.py")"
same "... and its subfolder" 'def f(): pass' "$(mcat "$V/models/lib/util.py")"
fails "input/ is read-only" "Read-only file system" timeout 20 touch "$V/input/mnist/new"
check "the worker writes output/result.txt" mput 'accuracy 0.93' "$V/output/result.txt"
timeout 20 mkdir -p "$V/output/logs"
mput "$(printf 'step,loss\n1,0.5')" "$V/output/logs/metrics.csv"
staged=$(staged_of v1)
view_down v1
same "mlfs umount exits 0 once the zip is in S3" 0 "$UMOUNT_STATUS"
in_log "... with progress on stderr" "job e2e worker 1: uploaded to s3 s3://outbkt/results/" "$T_DIR/umount.v1.log"
same "e2e.zip is in s3://outbkt/results/" "e2e.zip" "$(aws s3 ls s3://outbkt/results/ | awk '{print $4}' | xargs)"
same "... and holds output/result.txt" "accuracy 0.93" "$(s3_zip_member results/e2e.zip result.txt)"
same "... and the nested file" "$(printf 'step,loss\n1,0.5')" "$(unzip -p got.zip logs/metrics.csv 2>&1)"
same "... nothing else" "logs/ logs/metrics.csv result.txt" "$(unzip -Z1 got.zip 2>&1 | sort | xargs)"
check "the staged files are gone once safe" test ! -e "$staged/files"

# ======== 2. the same destination through the gateway
section "2 gateway"
G=$T_DIR/gw
mkdir -p "$G"
# gw_down: mlfs umount of the gateway (bounded), then its daemon's exit and log.
gw_down() {
	local status=0 ustatus=0 t0 t1
	t0=$(date +%s.%N)
	timeout 30 "$MLFS" umount "$G" 2>"$T_DIR/umount.gw.log" || ustatus=$?
	t1=$(date +%s.%N)
	[ "$ustatus" -eq 0 ] || fusermount3 -u -z "$G" 2>/dev/null
	reap "$MOUNT_PID" || status=$?
	MOUNT_PID=
	echo "# gateway: mlfs umount took $(echo "$t1 - $t0" | bc | cut -c1-5) s, its daemon's exit $(echo "$(date +%s.%N) - $t1" | bc | cut -c1-5) s more"
	same "mlfs umount of the gateway exits 0" 0 "$ustatus"
	if [ "$status" -eq 0 ] && ! grep -qE "$SAN" "$T_DIR/mount.gw.log" "$T_DIR/umount.gw.log"; then
		ok "the gateway's daemon exited cleanly"
	else
		not_ok "the gateway's daemon exited with $status"
		sed 's/^/#   /' "$T_DIR/mount.gw.log" "$T_DIR/umount.gw.log" | head -30
	fi
}
if mount_fg "$CONF" "$G"; then
	J=$G/jobs
	wait_state() { job_state_in "$J" "$@"; }
	cat >gwe2e.json <<JSON
{"name": "gwe2e", "workers": [{"command": "cat /opt/ml/input/mnist/train.txt /opt/ml/checkpoint/state.txt /opt/ml/models/train.py >/opt/ml/output/result.txt && sha256sum </opt/ml/input/PASCAL_VOC/img/big.bin | cut -c1-64 >/opt/ml/output/sha.txt"}],
 "data": {"datasets": ["mnist", "PASCAL VOC"],
          "output": {"type": "s3", "path": "s3://outbkt/gw/"}},
 "checkpoints": ["resnet"], "model": {"type": "model", "path": "detector"}}
JSON
	check "the gateway accepts the spec copied into jobs/" timeout 20 cp gwe2e.json "$J/"
	wait_state gwe2e SUCCEEDED FAILED CANCELLED
	same "the job ends SUCCEEDED" SUCCEEDED "$(mcat "$J/gwe2e/state")"
	in_log "... its reason says the output is safe" "output safe" "$J/gwe2e/reason"
	[ "$(mcat "$J/gwe2e/state")" = SUCCEEDED ] ||
		timeout 20 sed 's/^/#   /' "$J/gwe2e/log" "$J/gwe2e/events" 2>&1 | head -20
	same "gwe2e.zip is in s3://outbkt/gw/" "gwe2e.zip" "$(aws s3 ls s3://outbkt/gw/ | awk '{print $4}' | xargs)"
	same "... with what the worker read from /opt/ml" "$(printf 'digits\nepoch 7\nprint("hi")')" \
		"$(s3_zip_member gw/gwe2e.zip result.txt)"
	same "... and the 2 MB NFS file's hash as the worker saw it" "$(sha voc-big.bin)" "$(unzip -p got.zip sha.txt 2>&1)"
	# The worker's view (a daemonized mlfs job) ends once its output is uploaded.
	end=$((SECONDS + 10))
	while [ -n "$(ours_left "$T_DIR/state/jobs/gwe2e/")" ] && [ "$SECONDS" -lt "$end" ]; do
		sleep 0.1
	done
	left=$(ours_left "$T_DIR/state/jobs/gwe2e/")
	same "the job's view daemon is gone 10 s after the job ended" "" "${left:0:300}"
	[ -z "$left" ] || timeout 20 sed 's/^/#   /' "$J/gwe2e/events" "$J/gwe2e/workers/1/upload.log" 2>&1 | head -30
	gw_down
else
	not_ok "the gateway came up"
fi

# ======== 3. two workers, mounted at once: <job>_1.zip and <job>_2.zip
section "3 two workers"
cat >pair.json <<JSON
{"name": "pair", "worker_count": 2, "workers": [{"command": "true"}],
 "data": {"datasets": ["mnist"], "output": {"type": "s3", "path": "s3://outbkt/pair/"}}}
JSON
if view_up w1 pair.json 1 && view_up w2 pair.json 2; then
	for w in 1 2; do
		same "worker $w sees its dataset" "digits" "$(mcat "$T_DIR/w$w/input/train.txt")"
		mput "worker $w" "$T_DIR/w$w/output/who.txt"
		head -c $((w * 100000)) /dev/urandom >"own$w.bin"
		timeout 20 cp "own$w.bin" "$T_DIR/w$w/output/own.bin"
	done
	view_down w1
	same "worker 1: mlfs umount exits 0" 0 "$UMOUNT_STATUS"
	view_down w2
	same "worker 2: mlfs umount exits 0" 0 "$UMOUNT_STATUS"
	same "two zips named by worker" "pair_1.zip pair_2.zip" "$(aws s3 ls s3://outbkt/pair/ | awk '{print $4}' | sort | xargs)"
	for w in 1 2; do
		same "pair_$w.zip holds worker $w's who.txt" "worker $w" "$(s3_zip_member "pair/pair_$w.zip" who.txt)"
		same "... and its own.bin" "$(sha "own$w.bin")" "$(unzip -p got.zip own.bin | sha256sum | cut -d' ' -f1)"
	done
else
	not_ok "two workers' views came up"
fi

# ======== 4. output to an NFS datastore folder, as plain files
section "4 NFS datastore output"
cat >nfsout.json <<JSON
{"name": "nfsout", "workers": [{"command": "true"}],
 "data": {"output": {"type": "datastore", "path": "lab:/out/"}}}
JSON
if view_up n1 nfsout.json 1; then
	mput "to nfs" "$T_DIR/n1/output/result.txt"
	timeout 20 mkdir -p "$T_DIR/n1/output/sub/deeper"
	head -c 3000001 /dev/urandom >nfs-big.bin
	timeout 20 cp nfs-big.bin "$T_DIR/n1/output/sub/deeper/big.bin"
	view_down n1
	same "mlfs umount to an NFS datastore exits 0" 0 "$UMOUNT_STATUS"
	same "nfs-ls shows the plain files in /out" "result.txt sub" \
		"$(timeout 20 nfs-ls "$(nfs_url /out)" 2>&1 | awk '{print $NF}' | grep -v '^\.\.\?$' | sort | xargs)"
	same "nfs-cat reads result.txt" "to nfs" "$(timeout 20 nfs-cat "$(nfs_url /out/result.txt)" 2>&1)"
	same "nfs-cat reads the nested 3 MB file, byte-identical" "$(sha nfs-big.bin)" \
		"$(timeout 20 nfs-cat "$(nfs_url /out/sub/deeper/big.bin)" | sha256sum | cut -d' ' -f1)"
	same "the export folder holds them too" "to nfs" "$(cat "$E/out/result.txt" 2>&1)"
	check "... no zip and no .mlfs-part left" sh -c "! find '$E/out' -name '*.mlfs-part' -o -name '*.zip' | grep -q ."
else
	not_ok "the NFS-output view came up"
fi

# ======== 5. "archive": false to S3: plain objects
section "5 archive false"
cat >plain.json <<JSON
{"name": "plain", "workers": [{"command": "true"}],
 "data": {"output": {"type": "s3", "path": "s3://outbkt/plain/", "archive": false}}}
JSON
if view_up p1 plain.json 1; then
	head -c $((20 << 20)) /dev/urandom >plain20.bin
	check "a 20 MiB file is written to output/" timeout 60 cp plain20.bin "$T_DIR/p1/output/big.bin"
	timeout 20 mkdir -p "$T_DIR/p1/output/sub"
	mput "plain note" "$T_DIR/p1/output/sub/note.txt"
	view_down p1
	same "archive false: mlfs umount exits 0" 0 "$UMOUNT_STATUS"
	same "plain objects, no zip" "plain/big.bin plain/sub/note.txt" \
		"$(aws s3 ls --recursive s3://outbkt/plain/ | awk '{print $4}' | sort | xargs)"
	check "the 20 MiB object is byte-identical (aws s3 cp + cmp)" \
		s3_same s3://outbkt/plain/big.bin plain20.bin
	same "the nested object reads back" "plain note" "$(aws s3 cp s3://outbkt/plain/sub/note.txt - 2>&1)"
else
	not_ok "the plain-output view came up"
fi

# ======== 5b. proxiML's gcp input and output (gs://): the gcs backend
section "5b gcp input and output"
cat >gcp.json <<JSON
{"name": "gcp", "type": "inference", "workers": [{"command": "true"}],
 "data": {"input": {"type": "gcp", "path": "gs://outbkt/results/"},
          "output": {"type": "gcp", "path": "gs://outbkt/gcp/"}}}
JSON
if view_up g1 gcp.json 1; then
	same "a gcp input from gs:// shows the bucket's prefix" "e2e.zip" "$(mls "$T_DIR/g1/input")"
	check "the worker writes output/score.txt" mput 'gcp 0.97' "$T_DIR/g1/output/score.txt"
	view_down g1
	same "gcp output: mlfs umount exits 0" 0 "$UMOUNT_STATUS"
	in_log "... the upload names the gcs destination" "uploaded to gcp gs://outbkt/gcp/" \
		"$T_DIR/umount.g1.log"
	same "gcp.zip is in gs://outbkt/gcp/ (awscli at the same server)" "gcp.zip" \
		"$(aws s3 ls s3://outbkt/gcp/ | awk '{print $4}' | xargs)"
	same "... and holds output/score.txt" "gcp 0.97" "$(s3_zip_member gcp/gcp.zip score.txt)"
else
	not_ok "the gcp view came up"
fi

# ======== 7. archives as inference input
section "7 archive inputs"
# inf_view NAME INPUT_JSON: an inference view whose input is INPUT_JSON; checks input/ shows it extracted.
inf_view() {
	cat >"$1.json" <<JSON
{"name": "$1", "type": "inference", "workers": [{"command": "true"}],
 "data": {"input": $2}}
JSON
	if ! view_up "$1" "$1.json" 1; then
		not_ok "$1: the view came up"
		return
	fi
	same "$1: input/ shows the archive extracted" "dir hello.txt" "$(mls "$T_DIR/$1/input")"
	same "$1: a member reads" "hello archive" "$(mcat "$T_DIR/$1/input/hello.txt")"
	same "$1: a 1 MiB member is byte-identical" "$(sha arch-src/dir/member.bin)" \
		"$(msha "$T_DIR/$1/input/dir/member.bin")"
	view_down "$1"
	same "$1: mlfs umount exits 0" 0 "$UMOUNT_STATUS"
}
inf_view inzip '{"type": "datastore", "path": "lab:/arch/in.zip"}'
inf_view intar '{"type": "datastore", "path": "share:/arch/in.tar"}'
inf_view intgz '{"type": "datastore", "path": "objs:/arch/in.tar.gz"}'
inf_view intbz2 '{"type": "datastore", "path": "lab:/arch/in.tar.bz2"}'
inf_view insmbgz '{"type": "datastore", "path": "share:/arch/in.tar.gz"}'
inf_view inurl '{"type": "s3", "path": "s3://testbucket/arch/url.zip"}'

# an input folder ("…/") is fetched whole into the cache before the view is up
aws s3 cp --quiet --recursive arch-src s3://testbucket/infolder/
cat >infold.json <<JSON
{"name": "infold", "type": "inference", "workers": [{"command": "true"}],
 "data": {"input": {"type": "s3", "path": "s3://testbucket/infolder/"}}}
JSON
if view_up infold infold.json 1; then
	stat_of() { timeout 20 sed -n "s/^datastore.dataset:input.$1 //p" "$T_DIR/infold/.mlfs/stats"; }
	fetched=$(stat_of cache_bytes_fetched)
	check "an input folder is in the cache before the worker reads it" test "${fetched:-0}" -ge 1048576
	misses=$(stat_of cache_misses)
	same "... its files read back byte-identical" "$(sha arch-src/dir/member.bin)" \
		"$(msha "$T_DIR/infold/input/dir/member.bin")"
	same "... with no new cache miss" "$misses" "$(stat_of cache_misses)"
	view_down infold
else
	not_ok "the input-folder view came up"
fi

# ======== 6a. the S3 server down at mlfs umount; mlfs sync once it is back
section "6a S3 down"
cat >down.json <<JSON
{"name": "down", "workers": [{"command": "true"}],
 "data": {"output": {"type": "s3", "path": "s3://outbkt/fault/"}}}
JSON
if view_up d1 down.json 1; then
	mput "kept while down" "$T_DIR/d1/output/keep.txt"
	staged=$(staged_of d1)
	"$S3SRV" stop "$T_DIR/s3"
	# The stop script counts a zombie leader as stopped, but node's other
	# threads can hold the listening socket a moment longer: wait for the port.
	for _ in $(seq 1 200); do port_free "$S3P" && break; sleep 0.05; done
	check "the S3 server is stopped" port_free "$S3P"
	view_down d1
	check "S3 down: mlfs umount exits non-zero" test "$UMOUNT_STATUS" -ne 0
	in_log "... saying it was not uploaded" "not uploaded to s3://outbkt/fault/" "$T_DIR/umount.d1.log"
	in_log "... and where the output is kept" "staged output kept in $staged" "$T_DIR/umount.d1.log"
	same "the staged file is kept" "kept while down" "$(cat "$staged/files/keep.txt" 2>&1)"
	# a view reading from the server down does not come up: the worker never
	# runs on no data (its executor fails the job in STAGING_IN with this line)
	cat >nock.json <<JSON
{"name": "nock", "workers": [{"command": "true"}], "checkpoints": ["resnet"]}
JSON
	mkdir -p "$T_DIR/nock"
	fails "S3 down: a view reading a checkpoint there does not come up, naming it and why" \
		"checkpoint resnet (objs:/ck/resnet/): cannot be read: Input/output error" \
		timeout 60 "$MLFS" job -f "$CONF" nock.json "$T_DIR/nock" --worker 1
	check "... and nothing is mounted there" sh -c "! mountpoint -q '$T_DIR/nock'"
	fails "mlfs sync fails while the server is still down" "not uploaded" mlfs_logged sync-down sync "$CONF"
	"$S3SRV" start "$T_DIR/s3" "$S3P" >/dev/null || not_ok "s3rver started again"
	check "mlfs sync delivers it once the server is back" mlfs_logged sync-back sync "$CONF"
	same "... down.zip is in s3://outbkt/fault/" "down.zip" "$(aws s3 ls s3://outbkt/fault/ | awk '{print $4}' | xargs)"
	same "... with the staged content" "kept while down" "$(s3_zip_member fault/down.zip keep.txt)"
	check "... and the staged files are gone" test ! -e "$staged/files"
	same "earlier outputs are still there (same data folder)" "e2e.zip" \
		"$(aws s3 ls s3://outbkt/results/ | awk '{print $4}' | xargs)"
else
	not_ok "the fault view came up"
fi

# ======== 6b. mlfs sync killed -9 midway through a 300 MiB multipart upload, then resumed
section "6b kill -9 and resume"
cat >huge.json <<JSON
{"name": "huge", "workers": [{"command": "true"}],
 "data": {"output": {"type": "s3", "path": "s3://outbkt/huge/", "archive": false}}}
JSON
BIG=$((300 << 20))
PARTS=$(((BIG + (8 << 20) - 1) / (8 << 20)))
if view_up h1 huge.json 1; then
	head -c $BIG /dev/urandom >huge.bin
	check "a 300 MiB file is written to output/" timeout 120 cp huge.bin "$T_DIR/h1/output/huge.bin"
	staged=$(staged_of h1)
	check "plain fusermount3 -u unmounts the view" timeout 20 fusermount3 -u "$T_DIR/h1"
	view_reap h1
	same "nothing is uploaded by fusermount3 -u" "" "$(aws s3 ls --recursive s3://outbkt/huge/ 2>/dev/null)"
	"$MLFS" sync "$CONF" >sync1.log 2>&1 &
	SYNC_PID=$!
	st=0
	kill_once_saved "$SYNC_PID" "$staged/resume.json" || st=$?
	SYNC_PID=
	same "the first mlfs sync was killed midway" 137 "$st"
	check "... after saving resume.json" test -s "$staged/resume.json"
	done1=$(jq -r .done "$staged/resume.json" 2>/dev/null)
	token=$(jq -r .token "$staged/resume.json" 2>/dev/null)
	listed=$(printf '%s\n' "$token" | grep -c '^[1-9][0-9]*=')
	upid=$(printf '%s\n' "$token" | sed -n 's/^id=//p')
	echo "# killed with $listed of $PARTS parts saved, done=$done1"
	check "... which records bytes done, more than 0 and less than all" \
		test "${done1:-0}" -gt 0 -a "${done1:-0}" -lt "$BIG"
	same "... and names the file" "huge.bin" "$(jq -r .file "$staged/resume.json" 2>&1)"
	same "no object yet" "" "$(aws s3 ls --recursive s3://outbkt/huge/ 2>/dev/null)"
	sleep 0.3	# s3rver writes its log lines as it answers
	n0=$(wc -l <"$T_DIR/s3/s3rver.log")
	start=$(date +%s.%N)
	st=0
	mlfs_logged sync2 sync "$CONF" 2>/dev/null || st=$?
	same "a second mlfs sync exits 0" 0 "$st"
	# Its first progress line: MiB already in place when it started sending.
	first=$(grep -m1 -o 'uploading to s3 s3://outbkt/huge/: [0-9.]* of' sync2.log | awk '{print $5}')
	check "... its progress starts where the killed run stopped ($((done1 >> 20)) MiB), not at 0" \
		awk -v f="${first:-0}" -v d="$((done1 >> 20))" 'BEGIN { exit !(f >= d && f > 0) }'
	echo "# first progress line of the resumed run: $(grep -m1 uploading sync2.log)"
	echo "# resumed upload took $(echo "$(date +%s.%N) - $start" | bc) s"
	sleep 0.3
	tail -n +$((n0 + 1)) "$T_DIR/s3/s3rver.log" >resume-run.log
	same "... it sent only the parts not saved before" $((PARTS - listed)) \
		"$(grep -c 'Stored part ' resume-run.log)"
	same "... all into the same multipart upload" $((PARTS - listed)) \
		"$(grep -c "Stored part [0-9]* of $upid " resume-run.log)"
	check "the 300 MiB object is byte-identical (aws s3 cp + cmp)" s3_same s3://outbkt/huge/huge.bin huge.bin
	check "... and the staged files are gone" test ! -e "$staged/files"
	rm -f huge.bin
else
	not_ok "the 300 MiB view came up"
fi

check "mlfs sync with nothing pending exits 0" mlfs_logged sync-none sync "$CONF"
# Every mlfs process's stderr: views, umounts, syncs, the gateway, and the
# views and uploads the gateway ran for its worker (workers/N/log, upload.log).
check "no sanitizer report in any mlfs log" sh -c "! grep -lE '$SAN' '$T_DIR'/*.log '$T_DIR'/state/jobs/*/workers/*/*log"
echo "# run time $(echo "$(date +%s.%N) - $T_START" | bc) s"
# E2E_LOGS=DIR keeps every log of the run there (the scratch folder goes).
[ -n "${E2E_LOGS:-}" ] && mkdir -p "$E2E_LOGS" && cp "$T_DIR"/*.log "$E2E_LOGS/" 2>/dev/null
t_finish
