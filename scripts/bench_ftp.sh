#!/bin/bash
# bench_ftp.sh - how fast mlfs reads a file from an FTP server, next to curl
# reading the same file from the same server in the same run (issue 23's
# bar: the first read at least 0.8x curl's speed).
#
# vsftpd (scripts/server-vsftpd.sh) on 127.0.0.1 serves big.bin, 256 MiB of
# random bytes, from a tmpfs, so a drop of the page cache leaves the server
# as it was.  The ways, each repetition, in an order that alternates:
#   curl         `curl -o /dev/null ftp://127.0.0.1:PORT/big.bin`: one
#                stream, the server's own ceiling;
#   mlfs-first   `cat MOUNT/datastores/ftp/big.bin` on a fresh mount with an
#                empty cache_dir (on disk, not tmpfs): the first read;
#   mlfs-cache   the next job: unmount, drop_caches, mount again with the
#                same cache_dir, cat: read from mlfs's disk cache;
#   mlfs-local   for comparison with mlfs-cache: the same file in a local
#                datastore on the same disk, read the same way.
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
MNT=$scratch/mnt-mlfs

mount_mlfs() {
	"$MLFS" mount -f "$scratch/mlfs.conf" "$MNT" >>"$scratch/logs/mlfs.log" 2>&1 &
	daemon=$!
	pids="$pids $daemon"
	wait_mounted "$MNT" "$daemon" "$scratch/logs/mlfs.log"
}
umount_mlfs() {
	fusermount3 -u "$MNT"
	stop_pid "$daemon" 50
}
cat_null() { cat "$1" >/dev/null; }
# read_way WAY FILE: drop_caches, then the time of cat FILE into $scratch/res-WAY.
read_way() {
	drop_caches
	time_us cat_null "$2" >>"$scratch/res-$1"
}
one_way() {
	case $1 in
	curl)
		drop_caches
		time_us curl -s -o /dev/null "ftp://127.0.0.1:$PORT/big.bin" >>"$scratch/res-curl" ;;
	mlfs-first)
		rm -rf "$scratch/cache" "$scratch/state"
		mount_mlfs
		read_way mlfs-first "$MNT/datastores/ftp/big.bin"
		umount_mlfs
		mount_mlfs
		read_way mlfs-cache "$MNT/datastores/ftp/big.bin"
		umount_mlfs ;;
	mlfs-local)
		mount_mlfs
		read_way mlfs-local "$MNT/datastores/disk/big.bin"
		umount_mlfs ;;
	esac
}

for run in $(seq "$RUNS"); do
	for way in $(run_order "$run" curl mlfs-first mlfs-local); do
		one_way "$way"
	done
	echo "# run $run: curl $(us_to_s "$(tail -1 "$scratch/res-curl")") s," \
		"mlfs first $(us_to_s "$(tail -1 "$scratch/res-mlfs-first")") s," \
		"from the cache $(us_to_s "$(tail -1 "$scratch/res-mlfs-cache")") s," \
		"local $(us_to_s "$(tail -1 "$scratch/res-mlfs-local")") s"
done

declare -A med
for w in curl mlfs-first mlfs-cache mlfs-local; do
	med[$w]=$(median_s "$scratch/res-$w")
	printf '%-12s median %.3f s  %4d MiB/s\n' "$w" "${med[$w]}" \
		"$(awk -v s="${med[$w]}" -v b="$FILE_SIZE" 'BEGIN { printf "%d", b / 1048576 / s }')"
done
r=$(ratio "${med[curl]}" "${med[mlfs-first]}")
echo "first read, mlfs over curl:        $r (bar >= 0.8) $(verdict "$r" 0.8)"
r=$(ratio "${med[mlfs-local]}" "${med[mlfs-cache]}")
echo "next job from the cache over local: $r (for information)"
