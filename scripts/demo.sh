#!/bin/bash
# demo.sh - mlfs's main job on an embedded default: installs what it needs,
# builds, mounts a demo config over local folders in a scratch folder, shows
# the tree with ls and cat, writes through it, unmounts, and exits 0.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh plain
MLFS=$PWD/build/plain/mlfs

demo=$(mktemp -d /tmp/mlfs-demo.XXXXXX)
chmod 755 "$demo"
mnt=$demo/mnt
cleanup() {
	if grep -q " $mnt fuse.mlfs " /proc/self/mounts; then
		"$MLFS" umount "$mnt" || fusermount3 -u "$mnt"
	fi
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
run cat "$mnt/.mlfs/stats"
run "$MLFS" umount "$mnt"
echo
echo "demo: mounted, browsed, wrote through and unmounted $mnt"
