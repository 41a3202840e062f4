#!/bin/bash
# bench_azure.sh - how fast mlfs reads a blob from Azurite, next to curl
# reading the same blob from the same server in the same run (issue 23's
# bars: the first read at least 0.8x curl's speed, curl's bytes read by
# a process as mlfs's are; the next job's read from
# the cache at least 0.9x a local datastore's).
#
# Azurite (scripts/server-azurite.sh) on 127.0.0.1 keeps big.bin, 256 MiB of
# random bytes put by Microsoft's client (scripts/azure-blob.js), on a tmpfs,
# so a drop of the page cache leaves the server as it was.  The ways, each
# repetition, in an order that alternates:
#   curl         `curl` of the blob's URL with a read SAS to /dev/null:
#                one stream, the server's own ceiling (its bytes go nowhere);
#   curl-cat     the same `curl` into a pipe that `cat` reads: the bytes in
#                another process, as `cat` through mlfs has them (the
#                first-read bar is against this one; bench_lib.sh);
#   mlfs-first   `cat MOUNT/datastores/az/big.bin` (Shared Key) on a fresh
#                mount with an empty cache_dir (on disk): the first read;
#   mlfs-cache   the next job: unmount, drop_caches, mount again with the
#                same cache_dir, cat: read from mlfs's disk cache;
#   mlfs-local   the same file in a local datastore on the same disk, read
#                the same way (it and the cache's file read once untimed
#                before: bench_lib.sh, host_warm).
# Medians and ratios are printed at the end.  Usage: bench_azure.sh (root;
# BENCH_RUNS repetitions, default 5; BENCH_DIR, default /var/tmp/mlfs-bench-azure).
set -eu
cd "$(dirname "$0")/.."
bench=bench_azure
. scripts/bench_lib.sh
RUNS=${BENCH_RUNS:-5}
[ "$(id -u)" -eq 0 ] || { echo "$bench: run as root (mounts, drop_caches)" >&2; exit 2; }
MLFS=${MLFS:-build/plain/mlfs}
[ -x "$MLFS" ] || scripts/build.sh plain >/dev/null
MLFS=$(readlink -f "$MLFS")
scratch=${BENCH_DIR:-/var/tmp/mlfs-bench-azure}
FILE_SIZE=$((256 << 20))
pids=""

cleanup() {
	bench_stop_all
	scripts/server-azurite.sh stop "$scratch/srv" 2>/dev/null || true
	umount "$scratch/srv" 2>/dev/null || true
}
trap cleanup EXIT

rm -rf "$scratch"
mkdir -p "$scratch/srv" "$scratch/disk" "$scratch/logs" "$scratch/mnt-mlfs"
mount -t tmpfs -o size=700m tmpfs "$scratch/srv"
head -c "$FILE_SIZE" /dev/urandom >"$scratch/disk/big.bin"
PORT=$(free_port)
scripts/server-azurite.sh start "$scratch/srv" "$PORT" >/dev/null
export AZ_ENDPOINT=http://127.0.0.1:$PORT/devstoreaccount1 AZ_ACCOUNT=devstoreaccount1
export AZ_KEY=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==
node scripts/azure-blob.js mkcontainer data
node scripts/azure-blob.js put data big.bin "$scratch/disk/big.bin"
SAS=$(node scripts/azure-blob.js sas data)
cat >"$scratch/mlfs.conf" <<CONF
[mlfs]
state_dir = $scratch/state
cache_dir = $scratch/cache
[datastore az]
type = azure
endpoint = $AZ_ENDPOINT
account = devstoreaccount1
key = $AZ_KEY
container = data
[datastore disk]
type = local
root = $scratch/disk
CONF
curl_read() { curl -s -f "$AZ_ENDPOINT/data/big.bin?$SAS"; }
curl_wake() { curl -s -f -I "$AZ_ENDPOINT/data/big.bin?$SAS"; }

first_read_bench datastores/az/big.bin datastores/disk/big.bin "0.9" "$scratch/disk/big.bin"
