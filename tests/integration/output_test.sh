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
	"$MLFS" job -f o.conf "$1" "$M" --worker "$2" 2>"$T_DIR/mount.mnt.log" &
	MOUNT_PID=$!
	for _ in $(seq 1 100); do
		is_mounted "$M" && return 0
		kill -0 "$MOUNT_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "# view did not come up:"
	sed 's/^/#   /' "$T_DIR/mount.mnt.log"
	return 1
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
umount_view
same "mlfs umount exits 0 once uploaded" 0 "$UMOUNT_STATUS"
check "... it showed progress on stderr" grep -q "job train worker 1: done" "$T_DIR/umount.log"
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

# --- refused before anything is mounted
cat >nods.json <<JSON
{"name": "nods", "workers": [{"command": "true"}],
 "data": {"datasets": ["nosuch"], "output": {"type": "local", "path": "$T_DIR/out6"}}}
JSON
fails "an unknown dataset is named with its field" 'data.datasets[0]: no dataset named "nosuch"' \
	"$MLFS" job -f o.conf nods.json "$M" --worker 1
cat >noout.json <<JSON
{"name": "noout", "workers": [{"command": "true"}]}
JSON
fails "a spec without an output is refused" "data.output" "$MLFS" job -f o.conf noout.json "$M" --worker 1
fails "--worker is needed" "--worker N is needed" "$MLFS" job -f o.conf train.json "$M"
fails "--worker 0 is refused" "not a worker number" "$MLFS" job -f o.conf train.json "$M" --worker 0
check "nothing is mounted after them" sh -c "! grep -q ' $M ' /proc/self/mounts"
same "refused views leave no staging folder" 0 "$(ls state/outputs | grep -c '^nods\|^noout')"
t_finish
