#!/bin/bash
# bench_ftp.sh - how fast mlfs reads a file from an FTP server, next to curl
# reading the same file from the same server in the same run (issue 23's
# bar: the first read at least 0.8x curl's speed, curl's bytes read by a
# process as mlfs's are).
#
# vsftpd (scripts/server-vsftpd.sh) on 127.0.0.1 serves big.bin, 256 MiB of
# random bytes, from a tmpfs, so a drop of the page cache leaves the server
# as it was.  The ways, each repetition, in an order that alternates:
#   curl         `curl ftp://127.0.0.1:PORT/big.bin >/dev/null`: one
#                stream, the server's own ceiling (its bytes go nowhere);
#   curl-cat     the same `curl` into a pipe that `cat` reads: the bytes in
#                another process, as `cat` through mlfs has them (the
#                first-read bar is against this one; bench_lib.sh);
#   mlfs-first   `cat MOUNT/datastores/ftp/big.bin` on a fresh mount with an
#                empty cache_dir (on disk, not tmpfs): the first read;
#   mlfs-cache   the next job: unmount, drop_caches, mount again with the
#                same cache_dir, cat: read from mlfs's disk cache;
#   mlfs-local   for comparison with mlfs-cache: the same file in a local
#                datastore on the same disk, read the same way (it and the
#                cache's file read once untimed before: bench_lib.sh, host_warm).
# Each way's times go to $scratch/res-WAY; medians and ratios are printed at
# the end.  Usage: bench_ftp.sh (root; BENCH_RUNS repetitions, default 5;
# BENCH_DIR the scratch folder, default /var/tmp/mlfs-bench-ftp).
set -eu
cd "$(dirname "$0")/.."
bench=bench_ftp
. scripts/bench_lib.sh
RUNS=${BENCH_RUNS:-5}
[ "$(id -u)" -eq 0 ] || { echo "$bench: run as root (mounts, drop_caches)" >&2; exit 2; }
MLFS=${MLFS:-build/plain/mlfs}
[ -x "$MLFS" ] || scripts/build.sh plain >/dev/null
MLFS=$(readlink -f "$MLFS")
scratch=${BENCH_DIR:-/var/tmp/mlfs-bench-ftp}
FILE_SIZE=$((256 << 20))
pids=""

cleanup() {
	bench_stop_all
	scripts/server-vsftpd.sh stop "$scratch/srv" 2>/dev/null || true
	umount "$scratch/srv" 2>/dev/null || true
}
trap cleanup EXIT

rm -rf "$scratch"
mkdir -p "$scratch/srv" "$scratch/disk" "$scratch/logs" "$scratch/mnt-mlfs"
mount -t tmpfs -o size=600m tmpfs "$scratch/srv"
mkdir -p "$scratch/srv/pub"
head -c "$FILE_SIZE" /dev/urandom >"$scratch/srv/pub/big.bin"
cp "$scratch/srv/pub/big.bin" "$scratch/disk/big.bin"
PORT=$(free_port)
scripts/server-vsftpd.sh start "$scratch/srv" "$PORT" >/dev/null
cat >"$scratch/mlfs.conf" <<CONF
[mlfs]
state_dir = $scratch/state
cache_dir = $scratch/cache
[datastore ftp]
type = ftp
url = ftp://127.0.0.1:$PORT/
[datastore disk]
type = local
root = $scratch/disk
CONF
curl_read() { curl -s -f "ftp://127.0.0.1:$PORT/big.bin"; }
curl_wake() { curl -s -f -I "ftp://127.0.0.1:$PORT/big.bin"; }

first_read_bench datastores/ftp/big.bin datastores/disk/big.bin "" "$scratch/disk/big.bin"
