#!/bin/bash
# output_test.sh - a worker's view (mlfs job) and its output, on local
# datastores: input/ with one and with several datasets, checkpoint/,
# models/, output/ written through the mount; `mlfs umount` zips it as
# <job>.zip (or <job>_<n>.zip) into a local folder or copies plain files,
# registers a checkpoint in the store that a second job then reads, never
# follows a symlink left in output/; a failed upload exits non-zero and
# keeps the staged files, which `mlfs sync` delivers once the destination
# is fixed; a view unmounted with plain fusermount3 loses nothing; bad
# specs are refused before anything is mounted.  Usage: output_test.sh MLFS
set -u
MLFS=$1
MLFS=$(cd "$(dirname "$MLFS")" && pwd)/${MLFS##*/}
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1
# On a failure midway: let a waiting worker end, and take down every view left mounted.
t_cleanup() {
	touch "$T_DIR/go"
	sleep 0.3
	awk -v d="$T_DIR/" '$3 == "fuse.mlfs" && index($2, d) == 1 { print $2 }' /proc/self/mounts |
		while read -r m; do fusermount3 -u -z "$m" 2>/dev/null; done
}
mkdir -p lab/mnist lab/voc/img lab/ck/resnet lab/code mnt out
printf 'digits\n' >lab/mnist/train.txt
printf 'person 12 40\n' >lab/voc/ann.txt
head -c 2000000 /dev/urandom >lab/voc/img/big.bin
printf 'epoch 7\n' >lab/ck/resnet/state.txt
printf 'print("hi")\n' >lab/code/train.py
printf 'secret\n' >"$T_DIR/secret.txt"
cat >o.conf <<CONF
[mlfs]
state_dir = $T_DIR/state
cache_dir = $T_DIR/cache
store = lab
retries = 1
[datastore lab]
type = local
root = $T_DIR/lab
[dataset mnist]
source = lab:/mnist
[dataset PASCAL VOC]
source = lab:/voc
[checkpoint resnet]
source = lab:/ck/resnet
CONF
M=$T_DIR/mnt

# job_fg SPEC WORKER: mounts worker WORKER's view in the foreground, in the background.
job_fg() {
	fg_mount "$M" "$T_DIR/mount.mnt.log" "$MLFS" job -f o.conf "$1" "$M" --worker "$2"
}

# umount_view: mlfs umount, its status and stderr kept; checks the daemon exited cleanly.
umount_view() {
	UMOUNT_STATUS=0
	"$MLFS" umount "$M" 2>"$T_DIR/umount.log" || UMOUNT_STATUS=$?
	local status=0
	wait "$MOUNT_PID" || status=$?
	MOUNT_PID=
	if [ "$status" -eq 0 ] && ! grep -qE "AddressSanitizer|runtime error|LeakSanitizer" \
		"$T_DIR/mount.mnt.log"; then
		ok "view daemon exited cleanly"
	else
		not_ok "view daemon exited with $status"
		sed 's/^/#   /' "$T_DIR/mount.mnt.log" | head -30
	fi
}

# --- one worker: several datasets, a checkpoint, a model, output zipped to a local folder
cat >train.json <<JSON
{"name": "train", "workers": [{"command": "true"}],
 "data": {"datasets": ["mnist", "PASCAL VOC"], "output": {"type": "local", "path": "$T_DIR/out/"}},
 "checkpoints": ["resnet"], "model": {"type": "datastore", "path": "lab:/code"}}
JSON
job_fg train.json 1 || { t_finish; exit 1; }
same "the view's top" "checkpoint input models output" "$(ls "$M" | xargs)"
same "several datasets: one folder each, spaces as _" "PASCAL_VOC mnist" "$(ls "$M/input" | xargs)"
same "a dataset reads" "digits" "$(cat "$M/input/mnist/train.txt")"
same "a 2 MB file reads whole" "$(sha lab/voc/img/big.bin)" "$(sha "$M/input/PASCAL_VOC/img/big.bin")"
same "one checkpoint: checkpoint/ is it" "epoch 7" "$(cat "$M/checkpoint/state.txt")"
same "models/ is the model code" 'print("hi")' "$(cat "$M/models/train.py")"
fails "input/ is read-only" "Read-only file system" touch "$M/input/mnist/new"
check "output/ is writable" sh -c "echo 'accuracy 0.93' >'$M/output/result.txt'"
mkdir -p "$M/output/logs/deep"
head -c 3000000 /dev/urandom >"$T_DIR/weights.bin"
check "a 3 MB file is written to output/" cp "$T_DIR/weights.bin" "$M/output/logs/deep/weights.bin"
check "a symlink can be left in output/" ln -s "$T_DIR/secret.txt" "$M/output/leak"
check ".mlfs/mount names the output" grep -q "^output_dir=$T_DIR/state/outputs/train.1" "$M/.mlfs/mount"
staged=$(sed -n 's/^output_dir=//p' "$M/.mlfs/mount")
same "output/ is staged in state_dir" "accuracy 0.93" "$(cat "$staged/files/result.txt")"
check ".mlfs/uploads lists it as staging while mounted" grep -q " train 1 staging 0 0 local:$T_DIR/out/" "$M/.mlfs/uploads"
umount_view
same "mlfs umount exits 0 once uploaded" 0 "$UMOUNT_STATUS"
check "... it showed progress on stderr" grep -q "job train worker 1: uploaded to local $T_DIR/out/" "$T_DIR/umount.log"
check "nothing is mounted after it" sh -c "! grep -q ' $M ' /proc/self/mounts"
check "train.zip is in the local folder" test -f out/train.zip
mkdir -p unz && (cd unz && unzip -q ../out/train.zip)
same "the zip holds what the worker wrote" "accuracy 0.93" "$(cat unz/result.txt 2>&1)"
same "... a nested 3 MB file, byte-identical" "$(sha weights.bin)" "$(sha unz/logs/deep/weights.bin)"
check "... never what a symlink names" test ! -e unz/leak
check "... and says so in the log" grep -q "leak is a symlink" "$T_DIR/umount.log"
check "the staged files are gone once safe" test ! -e "$staged/files"
check "the journal records the upload complete" grep -q '"complete"' "$staged/journal"

# --- two workers, plain files ("archive": false) and zips named per worker
cat >pair.json <<JSON
{"name": "pair", "worker_count": 2, "workers": [{"command": "true"}],
 "data": {"datasets": ["mnist"], "output": {"type": "local", "path": "$T_DIR/out2"}}}
JSON
for w in 1 2; do
	job_fg pair.json $w || break
	same "worker $w: one dataset is input/ itself" "digits" "$(cat "$M/input/train.txt")"
	echo "worker $w" >"$M/output/who.txt"
	umount_view
	same "worker $w: mlfs umount exits 0" 0 "$UMOUNT_STATUS"
done
same "two workers give two zips with the worker numbers" "pair_1.zip pair_2.zip" "$(ls out2 | xargs)"
same "... each holds its worker's output" "worker 2" "$(unzip -p out2/pair_2.zip who.txt)"
fails "a third worker is refused" "has 2 worker(s)" "$MLFS" job -f o.conf pair.json "$M" --worker 3

cat >plain.json <<JSON
{"name": "plain", "workers": [{"command": "true"}],
 "data": {"output": {"type": "local", "path": "$T_DIR/out3/", "archive": false}}}
JSON
job_fg plain.json 1 || { t_finish; exit 1; }
same "no datasets: input/ is an empty folder" "" "$(ls -A "$M/input")"
mkdir "$M/output/sub" && echo plain >"$M/output/sub/p.txt"
umount_view
same "archive false: plain files, folders kept" "plain" "$(cat out3/sub/p.txt 2>&1)"
check "... and no zip" test ! -e out3/plain.zip
check "... and no .mlfs-part left" sh -c "! find out3 -name '*.mlfs-part' | grep -q ."

# --- output registered as a checkpoint in the store; a second job reads it by name
cat >ckw.json <<JSON
{"name": "ckw", "workers": [{"command": "true"}],
 "data": {"output": {"type": "checkpoint", "path": "fresh"}}}
JSON
job_fg ckw.json 1 || { t_finish; exit 1; }
echo "epoch 9" >"$M/output/state.txt"
umount_view
same "a checkpoint output lands in the store" "epoch 9" "$(cat lab/checkpoints/fresh/state.txt 2>&1)"
cat >ckr.json <<JSON
{"name": "ckr", "workers": [{"command": "true"}], "checkpoints": ["fresh"],
 "data": {"output": {"type": "local", "path": "$T_DIR/out4"}}}
JSON
job_fg ckr.json 1 || { t_finish; exit 1; }
same "a later job names the registered checkpoint and reads it" "epoch 9" "$(cat "$M/checkpoint/state.txt" 2>&1)"
umount_view

# --- a destination that cannot be written: non-zero, staged kept; mlfs sync delivers later
printf 'not a folder\n' >blocker
cat >blocked.json <<JSON
{"name": "blocked", "workers": [{"command": "true"}],
 "data": {"output": {"type": "local", "path": "$T_DIR/blocker/deeper"}}}
JSON
job_fg blocked.json 1 || { t_finish; exit 1; }
echo "keep me" >"$M/output/keep.txt"
staged=$(sed -n 's/^output_dir=//p' "$M/.mlfs/mount")
umount_view
check "a failed upload makes mlfs umount exit non-zero" test "$UMOUNT_STATUS" -ne 0
check "... saying why" grep -q "Not a directory" "$T_DIR/umount.log"
check "... and where the output is kept" grep -q "staged output kept in $staged" "$T_DIR/umount.log"
same "the staged output is kept" "keep me" "$(cat "$staged/files/keep.txt" 2>&1)"
fails "mlfs sync fails while the destination is still broken" "not uploaded" "$MLFS" sync o.conf
rm blocker
check "mlfs sync delivers it once the destination is fixed" "$MLFS" sync o.conf
same "... the zip is there" "keep me" "$(unzip -p blocker/deeper/blocked.zip keep.txt 2>&1)"
check "mlfs sync with nothing pending exits 0" "$MLFS" sync o.conf
same "... and says so" "mlfs sync: nothing to upload: no output is staged in $T_DIR/state/outputs" \
	"$("$MLFS" sync o.conf 2>&1)"

# --- plain fusermount3 -u: nothing lost, mlfs sync uploads it
cat >lost.json <<JSON
{"name": "lost", "workers": [{"command": "true"}],
 "data": {"output": {"type": "local", "path": "$T_DIR/out5"}}}
JSON
job_fg lost.json 1 || { t_finish; exit 1; }
echo "not lost" >"$M/output/x.txt"
fusermount3 -u "$M"
wait "$MOUNT_PID"
MOUNT_PID=
check "after fusermount3 -u nothing is uploaded yet" test ! -e out5/lost.zip
check "mlfs sync uploads what it left" "$MLFS" sync o.conf
same "... intact" "not lost" "$(unzip -p out5/lost.zip x.txt 2>&1)"

# --- two uploaders of one output: the second waits for the first, nothing is sent twice
cat >two.json <<JSON
{"name": "two", "workers": [{"command": "true"}],
 "data": {"output": {"type": "local", "path": "$T_DIR/out9", "archive": false}}}
JSON
job_fg two.json 1 || { t_finish; exit 1; }
staged=$(sed -n 's/^output_dir=//p' "$M/.mlfs/mount")
head -c 400000000 /dev/zero >"$M/output/big.bin"
fusermount3 -u "$M"
wait "$MOUNT_PID"
MOUNT_PID=
"$MLFS" sync o.conf 2>"$T_DIR/sync1.log" &
sync1=$!
for _ in $(seq 1 200); do
	flock -n "$staged/upload.lock" true || break
	sleep 0.02
done
check "a second mlfs sync runs while the first uploads" "$MLFS" sync o.conf
cp "$T_DIR/check.out" "$T_DIR/sync2.log"
check "... it said it waited for the other process" grep -q "another process is uploading it; waiting" "$T_DIR/sync2.log"
wait "$sync1"
same "... and the first one exits 0" 0 "$?"
same "the file arrived once, whole" 400000000 "$(stat -c %s out9/big.bin 2>&1)"
same "... one record of it in the journal" 1 "$(grep -c '"done":"big.bin"' "$staged/journal")"

# --- refused before anything is mounted
cat >nods.json <<JSON
{"name": "nods", "workers": [{"command": "true"}],
 "data": {"datasets": ["nosuch"], "output": {"type": "local", "path": "$T_DIR/out6"}}}
JSON
fails "an unknown dataset is named with its field" 'data.datasets[0]: no dataset named "nosuch"' \
	"$MLFS" job -f o.conf nods.json "$M" --worker 1
fails "--worker is needed" "--worker N is needed" "$MLFS" job -f o.conf train.json "$M"
fails "--worker 0 is refused" "not a worker number" "$MLFS" job -f o.conf train.json "$M" --worker 0
used=$(ls state/outputs | head -1)
fails "--output-id of an output made before is refused" "that output exists already" \
	"$MLFS" job -f --output-id "$used" o.conf train.json "$M" --worker 1
fails "--output-id must be a plain folder name" "is not a folder name" \
	"$MLFS" job -f --output-id ../x o.conf train.json "$M" --worker 1
fails "--owner wants UID:GID" "is not UID:GID" "$MLFS" job -f --owner nobody o.conf train.json "$M" --worker 1
fails "only root gives the output to another user" "only root" \
	su nobody -s /bin/sh -c "'$MLFS' job -f --owner 0:0 '$T_DIR/o.conf' '$T_DIR/train.json' '$M' --worker 1"
check "nothing is mounted after them" sh -c "! grep -q ' $M ' /proc/self/mounts"
same "refused views leave no staging folder" 0 "$(ls state/outputs | grep -c '^nods')"

# --- no output destination: output/ is still there, and what it holds is kept in state_dir
cat >noout.json <<JSON
{"name": "noout", "workers": [{"command": "true"}], "data": {"datasets": ["mnist"]}}
JSON
job_fg noout.json 1 || { t_finish; exit 1; }
echo "nowhere to go" >"$M/output/n.txt"
staged=$(sed -n 's/^output_dir=//p' "$M/.mlfs/mount")
umount_view
same "no destination: mlfs umount exits 0" 0 "$UMOUNT_STATUS"
same "... and the output is kept where it was staged" "nowhere to go" "$(cat "$staged/files/n.txt" 2>&1)"
check "mlfs sync has nothing left to do" "$MLFS" sync o.conf

# --- through the gateway: the local executor mounts each worker's view at /opt/ml
mkdir -p gw out7
cat >>o.conf <<CONF
[node]
gpus = 0
cpus = 8
CONF
G=$T_DIR/gw
mount_fg o.conf "$G" || { t_finish; exit 1; }
J=$G/jobs
wait_state() { job_state_in "$J" "$@"; }
cat >gwjob.json <<JSON
{"name": "gwjob", "workers": [{"command": "cat /opt/ml/input/train.txt; pwd; echo \"\$ML_OUTPUT_PATH\"; echo done >/opt/ml/output/result.txt; while [ ! -e $T_DIR/go ]; do sleep 0.1; done"}],
 "data": {"datasets": ["mnist"], "output": {"type": "local", "path": "$T_DIR/out7"}}}
JSON
chmod 644 gwjob.json
check "a job with data is accepted" su nobody -s /bin/sh -c "cp '$T_DIR/gwjob.json' '$J/'"
wait_state gwjob RUNNING
for _ in $(seq 1 50); do [ -e "$J/gwjob/workers/1/output/result.txt" ] && break; sleep 0.1; done
same "workers/1/output shows the staged output while it runs" "done" "$(cat "$J/gwjob/workers/1/output/result.txt" 2>&1)"
check "... as a link into state_dir" sh -c "readlink '$J/gwjob/workers/1/output' | grep -q '^$T_DIR/state/outputs/gwjob.1.a1.'"
check "the view is mounted outside the worker's namespace too" sh -c "grep -q ' $T_DIR/state/jobs/gwjob/workers/1/view fuse.mlfs ' /proc/self/mounts"
check "... and /opt/ml is not bound in ours" sh -c "! grep -q ' /opt/ml ' /proc/self/mounts"
touch go
wait_state gwjob SUCCEEDED FAILED
same "the job succeeds once its output is safe" SUCCEEDED "$(cat "$J/gwjob/state")"
check "... the reason says where it went" grep -q "output safe at local $T_DIR/out7" "$J/gwjob/reason"
same "the worker read its dataset at /opt/ml/input" "[1] digits" "$(head -1 "$J/gwjob/log")"
same "... ran in /opt/ml/models" "[1] /opt/ml/models" "$(sed -n 2p "$J/gwjob/log")"
same "... was told ML_OUTPUT_PATH=/opt/ml/output" "[1] /opt/ml/output" "$(sed -n 3p "$J/gwjob/log")"
same "its output is in gwjob.zip" "done" "$(unzip -p out7/gwjob.zip result.txt 2>&1)"
check "... written by the job's user" sh -c "unzip -Z -l out7/gwjob.zip >/dev/null && test \"\$(stat -c %U '$T_DIR/state/outputs/'gwjob.1.a1.*/output.json)\" = root"
check "the events record the upload" grep -q "worker 1: output uploaded" "$J/gwjob/events"
check "the gateway's .mlfs/uploads shows it done" grep -q "^gwjob.1.a1.[0-9]* gwjob 1 done " "$G/.mlfs/uploads"
check "the view is unmounted after it" sh -c "! grep -q '$T_DIR/state/jobs/gwjob/workers/1/view ' /proc/self/mounts"

# a destination that fails: FAILED "output upload: ...", then mlfs sync turns it SUCCEEDED
printf 'not a folder\n' >blocker2
cat >upfail.json <<JSON
{"name": "upfail", "workers": [{"command": "echo precious >/opt/ml/output/p.txt"}],
 "data": {"output": {"type": "local", "path": "$T_DIR/blocker2/x"}}}
JSON
cp upfail.json "$J/"
wait_state upfail SUCCEEDED FAILED
same "a failed upload fails the job" FAILED "$(cat "$J/upfail/state")"
check "... with reason output upload: and why" grep -q "^output upload: worker 1: .*Not a directory" "$J/upfail/reason"
check "... saying the staged output is kept" grep -q "staged output kept" "$J/upfail/reason"
same "the staged output is still shown" "precious" "$(cat "$J/upfail/workers/1/output/p.txt" 2>&1)"
rm blocker2
check "mlfs sync delivers it" "$MLFS" sync o.conf
wait_state upfail SUCCEEDED
same "... and the job turns SUCCEEDED" SUCCEEDED "$(cat "$J/upfail/state")"
check "... recorded in events" grep -q "output delivered by a later sync" "$J/upfail/events"
same "... the zip is there" "precious" "$(unzip -p blocker2/x/upfail.zip p.txt 2>&1)"

# an inference input that is a corrupt archive fails STAGING_IN with a clear reason
head -c 4000 /dev/urandom >lab/broken.zip
cat >badin.json <<JSON
{"name": "badin", "type": "inference", "workers": [{"command": "echo never ran"}],
 "data": {"input": {"type": "datastore", "path": "lab:/broken.zip"},
          "output": {"type": "local", "path": "$T_DIR/out8"}}}
JSON
cp badin.json "$J/"
wait_state badin SUCCEEDED FAILED
same "a corrupt archive input fails the job" FAILED "$(cat "$J/badin/state")"
check "... in staging in, naming the archive and why" grep -q "^staging in: worker 1: .*broken.zip.*Unrecognized archive format" "$J/badin/reason"
check "... and the command never ran" sh -c "! grep -q 'never ran' '$J/badin/log'"
unmount_fg "$G"
t_finish
