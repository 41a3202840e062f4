#!/bin/bash
# demo.sh - mlfs's main job on an embedded default: installs what it needs,
# builds, mounts a demo config over local folders in a scratch folder, shows
# the tree with ls and cat, writes through it, submits a job by writing its
# spec into jobs/ and follows it with cat (the worker reads its dataset,
# checkpoint and model at /opt/ml and its output lands in the scratch
# datastore), shows a bad spec refused, unmounts, then mounts one worker's
# view by hand with `mlfs job` and ends with `mlfs umount` syncing its output
# as a zip to a demo destination; exits 0.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh plain
MLFS=$PWD/build/plain/mlfs

demo=$(mktemp -d /tmp/mlfs-demo.XXXXXX)
chmod 755 "$demo"
mnt=$demo/mnt
cleanup() {
	for m in "$mnt" "$demo/opt-ml"; do
		if grep -q " $m fuse.mlfs " /proc/self/mounts; then
			"$MLFS" umount "$m" || fusermount3 -u "$m"
		fi
	done
	rm -rf "$demo"
}
trap cleanup EXIT

# The embedded default: two local datastores and the views kept in them.
mkdir -p "$demo/lab/voc2012/JPEGImages" "$demo/lab/checkpoints/resnet50" "$demo/code/detector" \
	"$demo/scratch" "$mnt"
printf 'person 12 40 200 310\n' >"$demo/lab/voc2012/annotations.txt"
head -c 4096 /dev/urandom >"$demo/lab/voc2012/JPEGImages/2012_000001.jpg"
printf 'epoch=90 top1=76.1\n' >"$demo/lab/checkpoints/resnet50/meta.txt"
printf 'import torch\nprint("training")\n' >"$demo/code/detector/train.py"
cat >"$demo/mlfs.conf" <<CONF
[mlfs]
state_dir = $demo/state
cache_dir = $demo/cache
store = scratch                 ; where outputs registered as checkpoints are kept

[node]                          ; what jobs may use here; GPUs are detected when omitted
gpus = 0
cpus = 8
memory_gb = 4

[datastore lab]
type = local
root = $demo/lab

[datastore scratch]
type = local
root = $demo/scratch

[datastore code]
type = local
root = $demo/code

[dataset PASCAL VOC]
source = lab:/voc2012

[checkpoint resnet50]
source = lab:/checkpoints/resnet50/

[model detector]
source = code:/detector
CONF

run() {
	printf '\n$ %s\n' "$*"
	"$@"
}

run "$MLFS" check "$demo/mlfs.conf"
run "$MLFS" mount "$demo/mlfs.conf" "$mnt"
run ls -la "$mnt"
run ls -l "$mnt/datastores" "$mnt/datasets" "$mnt/checkpoints" "$mnt/models"
run find "$mnt/datasets" "$mnt/checkpoints" "$mnt/models"
run cat "$mnt/datasets/PASCAL_VOC/annotations.txt"
run cat "$mnt/checkpoints/resnet50/meta.txt"
run mkdir -p "$mnt/datastores/scratch/results"
printf '\n$ echo "mAP=0.81" > %s\n' "$mnt/datastores/scratch/results/eval.txt"
echo "mAP=0.81" >"$mnt/datastores/scratch/results/eval.txt"
run cp "$mnt/datasets/PASCAL_VOC/annotations.txt" "$mnt/datastores/scratch/results/"
run ls -l "$demo/scratch/results"
run cat "$demo/scratch/results/eval.txt"
printf '\n$ touch %s   (a read-only tree)\n' "$mnt/datasets/PASCAL_VOC/new"
if touch "$mnt/datasets/PASCAL_VOC/new" 2>&1; then
	echo "demo: a dataset accepted a write" >&2
	exit 1
fi

# A job: written into jobs/, accepted at close, run on this node with its
# data at /opt/ml (a view of its own, in a private mount namespace); its
# output goes to the scratch datastore once the worker ends.
cat >"$demo/hello.json" <<'SPEC'
{
  "name": "hello",
  "resources": {"cpu_count": 4},
  "data": {"datasets": ["PASCAL VOC"],
           "output": {"type": "datastore", "path": "scratch:/runs/hello/"}},
  "checkpoints": ["resnet50"],
  "model": {"type": "model", "path": "detector"},
  "workers": [{"command": "echo training $JOB_NAME as $(id -un) in $PWD; ls /opt/ml; cat /opt/ml/input/annotations.txt /opt/ml/checkpoint/meta.txt; sleep 1; echo loss=0.12 > /opt/ml/output/metrics.txt; echo done"}],
  "environment": {"variables": {"EPOCHS": "3"}}
}
SPEC
run cp "$demo/hello.json" "$mnt/jobs/"
run ls "$mnt/jobs" "$mnt/jobs/hello"
run cat "$mnt/jobs/hello/state" "$mnt/jobs/hello/reason"
run cat "$mnt/jobs/hello/wait"
run cat "$mnt/jobs/hello/state" "$mnt/jobs/hello/reason" "$mnt/jobs/hello/log"
run cat "$mnt/jobs/hello/events"
run cat "$mnt/jobs/hello/workers/1/exit_code"
run ls -l "$demo/scratch/runs/hello"
run cat "$demo/scratch/runs/hello/metrics.txt"
printf '{"name": "oops", "resources": {"cpu_count": 6}, "workers": [{"command": ""}]}\n' >"$demo/oops.json"
printf '\n$ cp %s %s   (a bad spec: close fails, .error says why)\n' "$demo/oops.json" "$mnt/jobs/"
if cp "$demo/oops.json" "$mnt/jobs/"; then
	echo "demo: a bad spec was accepted" >&2
	exit 1
fi
run cat "$mnt/jobs/oops.json.error"
run cat "$mnt/.mlfs/node"
run cat "$mnt/.mlfs/stats"
run cat "$mnt/.mlfs/uploads"
run "$MLFS" umount "$mnt"

# One worker's view by hand, as a batch script on a compute node mounts it:
# mlfs job, the worker writes output/, mlfs umount uploads it (a zip here).
view=$demo/opt-ml
mkdir -p "$view" "$demo/results"
cat >"$demo/eval.json" <<SPEC
{"name": "eval", "data": {"datasets": ["PASCAL VOC"],
  "output": {"type": "local", "path": "$demo/results/"}},
 "workers": [{"command": "true"}]}
SPEC
run "$MLFS" job "$demo/mlfs.conf" "$demo/eval.json" "$view" --worker 1
run ls "$view" "$view/input"
printf '\n$ echo "mAP=0.83" > %s\n' "$view/output/eval.txt"
echo "mAP=0.83" >"$view/output/eval.txt"
run "$MLFS" umount "$view"
run unzip -l "$demo/results/eval.zip"
run "$MLFS" sync "$demo/mlfs.conf"
echo
echo "demo: mounted, browsed, wrote through, ran a job on its data, synced a worker's output to"
echo "      $demo/results/eval.zip and unmounted"
