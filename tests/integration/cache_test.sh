#!/bin/bash
# cache_test.sh - the shared disk cache, through real mounts of an http
# datastore served by nginx: two mlfs processes reading the same cold file
# at once fetch each byte once between them (nginx's own access log says so,
# not just our counters); a restart reads from the cache with no GET; a file
# fully cached is handed to the kernel (passthrough); a file changed on the
# server is read fresh; the cache stays under cache_size; a daemon killed
# with SIGKILL mid-read leaves a cache that still serves right bytes; small
# files are served from memory and written behind, all on disk once the
# daemon exits; a cache disk turned read-only leaves every read working,
# uncached, said once; a cache folder emptied under a mount is made anew; a
# cache folder that refuses O_DIRECT (ramfs) gets plain writes, said once.
# Usage: cache_test.sh MLFS POSIX_CHECK
set -u
MLFS=$1
. "$(dirname "$0")/lib.sh"
SCRIPTS=$(cd "$(dirname "$0")/../../scripts" && pwd)
t_setup
cd "$T_DIR" || exit 1

PORT=$(free_port)
MOUNT2_PID=
t_cleanup() {
	for m in "$T_DIR/mnt" "$T_DIR/mnt2" "$T_DIR/mnt3"; do
		fusermount3 -u "$m" 2>/dev/null
	done
	mountpoint -q "$T_DIR/ramcache" && umount "$T_DIR/ramcache"
	mountpoint -q "$T_DIR/rocache/objects" && umount "$T_DIR/rocache/objects"
	[ -n "$MOUNT2_PID" ] && wait "$MOUNT2_PID" 2>/dev/null
	MOUNT2_PID=
	"$SCRIPTS/server-nginx.sh" stop "$T_DIR/http" >/dev/null 2>&1
}
trap t_cleanup EXIT

mkdir -p http/www/small mnt mnt2 mnt3 ramcache rocache
head -c $((24 << 20)) /dev/urandom >http/www/big.bin
head -c $((24 << 20)) /dev/urandom >http/www/other.bin
for i in 1 2 3 4 5 6; do
	head -c $((3 << 20)) /dev/urandom >"http/www/small/f$i.bin"
done
mkdir -p http/www/tiny
for i in $(seq 1 20); do
	head -c $((50000 + i)) /dev/urandom >"http/www/tiny/t$i.bin"
done
"$SCRIPTS/server-nginx.sh" start "$T_DIR/http" "$PORT" >/dev/null ||
	{ not_ok "nginx started"; t_finish; exit 1; }
URL=http://127.0.0.1:$PORT

conf() { # conf FILE CACHE_SIZE
	cat >"$1" <<CONF
[mlfs]
state_dir = state
cache_dir = cache
cache_size = $2
timeout = 5
retries = 1

[datastore web]
type = http
url = $URL/
# what a HEAD or a listing said is used 2 s, not 5: a shorter wait past it below
metadata_ttl = 2

[dataset big]
source = $URL/big.bin
CONF
}
conf a.conf 1G
mkdir -p state2
sed 's/^state_dir = state$/state_dir = state2/' a.conf >b.conf

# The body bytes nginx sent for PATH since the log was last cleared.
sent() {
	awk -v p="$1" '$7 == p && $6 == "\"GET" {s += $10} END {print s + 0}' http/access.log
}
clear_log() {
	: >http/access.log
}

mount_fg a.conf "$T_DIR/mnt" || { not_ok "mount came up"; t_finish; exit 1; }
"$MLFS" mount -f b.conf "$T_DIR/mnt2" 2>"$T_DIR/mount.mnt2.log" &
MOUNT2_PID=$!
for _ in $(seq 1 100); do is_mounted "$T_DIR/mnt2" && break; sleep 0.05; done
check "a second mlfs process mounts with the same cache_dir" is_mounted "$T_DIR/mnt2"

# --- two processes, one cold file, read at once
want=$(sha256sum <http/www/big.bin)
clear_log
sha256sum <mnt/datastores/web/big.bin >sum.a &
pa=$!
sha256sum <mnt2/datastores/web/big.bin >sum.b &
pb=$!
wait "$pa" "$pb"
same "process 1 read the right bytes" "$want" "$(cat sum.a)"
same "process 2 read the right bytes" "$want" "$(cat sum.b)"
fetched=$(( $(stat_of mnt datastore.web.cache_bytes_fetched) +
	    $(stat_of mnt2 datastore.web.cache_bytes_fetched) ))
same "between them the two processes fetched each byte once" $((24 << 20)) "$fetched"
same "nginx sent each byte of the file once" $((24 << 20)) "$(sent /big.bin)"
# What a first read fetched is held in memory only while it is read and
# written (O_DIRECT) to the cache: given back once the readers closed.
held() { echo $(($(stat_of mnt cache.memory_bytes) + $(stat_of mnt2 cache.memory_bytes))); }
for _ in $(seq 1 50); do
	[ "$(held)" -eq 0 ] && break
	sleep 0.1
done
same "the fetched blocks held in memory are given back after the reads" 0 "$(held)"
same "the cache's data file holds the file's bytes" "$want" "$(cat cache/objects/*/*.data | sha256sum)"

# --- the next job: a restart reads from the disk cache
"$MLFS" umount "$T_DIR/mnt2"
wait "$MOUNT2_PID"
check "the second daemon exited cleanly" test $? -eq 0
MOUNT2_PID=
unmount_fg "$T_DIR/mnt"
clear_log
echo 3 >/proc/sys/vm/drop_caches
mount_fg a.conf "$T_DIR/mnt" || { not_ok "mount came up again"; t_finish; exit 1; }
same "after a restart the file reads right" "$want" "$(sha256sum <mnt/datastores/web/big.bin)"
same "... with nothing fetched" 0 "$(stat_of mnt datastore.web.cache_bytes_fetched)"
same "... and no byte sent by nginx" 0 "$(sent /big.bin)"
if [ "$(stat_of mnt mount.passthrough)" = 1 ]; then
	check "a fully cached file is handed to the kernel (passthrough)" \
		test "$(stat_of mnt datastore.web.passthrough_opens)" -ge 1
else
	echo "# skip: this kernel did not agree to FUSE passthrough (needs Linux 6.9 and root)"
fi
same "the dataset of the same URL shares the cached bytes" "$want" \
	"$(sha256sum <mnt/datasets/big/big.bin)"
same "... fetching nothing" 0 "$(sent /big.bin)"
# every request that reached nginx is counted, under the datastore that sent it
reqs() { echo $(($(stat_of mnt datastore.web.requests) + $(stat_of mnt datastore.dataset:big.requests))); }
same "datastore.NAME.requests counts each request nginx logged" "$(wc -l <http/access.log)" "$(reqs)"
before=$(reqs)
same "a second read of the dataset's file in the same mount" "$want" \
	"$(sha256sum <mnt/datasets/big/big.bin)"
same "... reaches the server with no request" "$before" "$(reqs)"

# --- a file changed on the server is read fresh under datastores/
head -c 1000 /dev/zero >http/www/changing.txt
cat mnt/datastores/web/changing.txt >/dev/null
head -c 1000 /dev/urandom >http/www/changing.txt
touch -d '2030-01-01 00:00:00' http/www/changing.txt
sleep 2.2	# an open under datastores/ takes what a HEAD said in the last 2 s (metadata_ttl)
same "a changed file is read fresh, never from the stale cache" \
	"$(sha256sum <http/www/changing.txt)" "$(sha256sum <mnt/datastores/web/changing.txt)"
unmount_fg "$T_DIR/mnt"

# --- a daemon killed mid-read leaves a cache that serves right bytes
mount_fg a.conf "$T_DIR/mnt" || { not_ok "mount came up"; t_finish; exit 1; }
head -c $((12 << 20)) mnt/datastores/web/other.bin >/dev/null
kill -9 "$MOUNT_PID"
wait "$MOUNT_PID" 2>/dev/null
MOUNT_PID=
fusermount3 -u "$T_DIR/mnt" 2>/dev/null || umount -l "$T_DIR/mnt"
mount_fg a.conf "$T_DIR/mnt" || { not_ok "mount came up after kill -9"; t_finish; exit 1; }
same "after kill -9 the partly cached file reads right" \
	"$(sha256sum <http/www/other.bin)" "$(sha256sum <mnt/datastores/web/other.bin)"
unmount_fg "$T_DIR/mnt"

# --- the cache stays under cache_size, evicting the least recently used
rm -rf cache
conf small.conf 16M
mount_fg small.conf "$T_DIR/mnt" || { not_ok "mount came up"; t_finish; exit 1; }
bad=0
for i in 1 2 3 4 5 6; do
	cmp -s "http/www/small/f$i.bin" "mnt/datastores/web/small/f$i.bin" || bad=$((bad + 1))
done
same "every file read through a small cache is right" 0 "$bad"
# Eviction runs beside the reads: give it up to 5 s to catch up (seen lag on a busy CI run).
for _ in $(seq 1 50); do
	used=$(du -sb cache | cut -f1)
	[ "$used" -le $((16 << 20)) ] && [ "$(stat_of mnt cache.evictions)" -ge 1 ] && break
	sleep 0.1
done
check "the cache folder holds at most cache_size (16 MiB): $used bytes" \
	test "$used" -le $((16 << 20))
check "the cache evicted to stay there" test "$(stat_of mnt cache.evictions)" -ge 1
same "the most recently read file is still cached" 0 \
	"$(clear_log; echo 3 >/proc/sys/vm/drop_caches
	   cat mnt/datastores/web/small/f6.bin >/dev/null; sent /small/f6.bin)"

# --- small files written behind: served from memory, on disk once the daemon exits
tiny_sums() { (cd "$1" && for i in $(seq 1 20); do sha256sum <"t$i.bin"; done | sha256sum); }
pt=$(stat_of mnt datastore.web.passthrough_opens)
exec 3<mnt/datastores/web/tiny/t1.bin
same "a small file reads right" "$(sha256sum <http/www/tiny/t1.bin)" "$(sha256sum <&3)"
check "... held in memory while open, not written yet (cache.write_behind_bytes)" \
	test "$(stat_of mnt cache.write_behind_bytes)" -ge 50001
if [ "$(stat_of mnt mount.passthrough)" = 1 ]; then
	same "... and not handed to the kernel (no passthrough: not in the cache's files)" "$pt" \
		"$(stat_of mnt datastore.web.passthrough_opens)"
fi
exec 3<&-
same "20 small files read right" "$(tiny_sums http/www/tiny)" "$(tiny_sums mnt/datastores/web/tiny)"
unmount_fg "$T_DIR/mnt"
clear_log
echo 3 >/proc/sys/vm/drop_caches
mount_fg a.conf "$T_DIR/mnt" || { not_ok "mount came up again"; t_finish; exit 1; }
same "the next mount reads them right" "$(tiny_sums http/www/tiny)" \
	"$(tiny_sums mnt/datastores/web/tiny)"
same "... from the cache: the exiting daemon wrote them all, no GET" 0 \
	"$(awk '$7 ~ /^\/tiny\// && $6 == "\"GET"' http/access.log | wc -l)"
same "... and holds none in memory" 0 "$(stat_of mnt cache.write_behind_bytes)"
unmount_fg "$T_DIR/mnt"

# --- a cache folder that turns read-only under a mount (a disk remounted
# read-only after errors: mount refuses that while files are open on it, so
# a read-only tmpfs is put over the cache's objects/): every read still
# works, uncached, and the log says so once, not once per file
sed 's|^cache_dir = cache$|cache_dir = rocache|; s|^state_dir = state$|state_dir = state4|' \
	a.conf >ro.conf
mount_fg ro.conf "$T_DIR/mnt3" || { not_ok "mount came up"; t_finish; exit 1; }
same "a cache on a writable disk: a file reads right" "$(sha256sum <http/www/small/f1.bin)" \
	"$(sha256sum <mnt3/datastores/web/small/f1.bin)"
if mount -t tmpfs -o ro tmpfs rocache/objects; then
	same "the cache's folder read-only: a big file never read reads right" "$want" \
		"$(sha256sum <mnt3/datastores/web/big.bin)"
	same "... and 20 small ones" "$(tiny_sums http/www/tiny)" \
		"$(tiny_sums mnt3/datastores/web/tiny)"
	check "... the big one read uncached (cache.bypassed)" \
		test "$(stat_of mnt3 cache.bypassed)" -ge 1
	same "... the log says why" 1 "$(grep -c \
		"cannot keep object .* (Read-only file system), reading it uncached" \
		"$T_DIR/mount.mnt3.log")"
	for _ in $(seq 1 100); do
		[ "$(stat_of mnt3 cache.write_behind_bytes)" = 0 ] && break
		sleep 0.1
	done
	same "... the small ones, served from memory, could not be written behind: dropped" 0 \
		"$(stat_of mnt3 cache.write_behind_bytes)"
	same "... which the log says once for the 20 of them" 1 "$(grep -c \
		"cannot keep it (Read-only file system); it is fetched again when read again" \
		"$T_DIR/mount.mnt3.log")"
	same "... and they read right again" "$(tiny_sums http/www/tiny)" \
		"$(tiny_sums mnt3/datastores/web/tiny)"
	check "... the daemon runs on" kill -0 "$MOUNT_PID"
	umount rocache/objects
else
	not_ok "a read-only tmpfs over the cache's objects/"
fi
# --- the cache folder emptied under a mount (rm -rf of it to free room): made anew
rm -rf rocache/objects
same "the cache's objects/ removed under the mount: a file reads right" \
	"$(sha256sum <http/www/small/f2.bin)" "$(sha256sum <mnt3/datastores/web/small/f2.bin)"
unmount_fg "$T_DIR/mnt3"
clear_log
mount_fg ro.conf "$T_DIR/mnt3" || { not_ok "mount came up"; t_finish; exit 1; }
same "... and was kept in objects/ made anew: the next mount reads it with no byte sent" \
	"$(sha256sum <http/www/small/f2.bin):0" \
	"$(sha256sum <mnt3/datastores/web/small/f2.bin):$(sent /small/f2.bin)"
unmount_fg "$T_DIR/mnt3"

# --- a cache folder that refuses O_DIRECT: ramfs (tmpfs and ext4 take it)
if mount -t ramfs ramfs "$T_DIR/ramcache" 2>/dev/null; then
	sed 's|^cache_dir = cache$|cache_dir = ramcache/c|; s|^state_dir = state$|state_dir = state3|' \
		a.conf >ram.conf
	mount_fg ram.conf "$T_DIR/mnt3" || { not_ok "mount came up"; t_finish; exit 1; }
	clear_log
	same "a first read into a cache that refuses O_DIRECT is right" "$want" \
		"$(sha256sum <mnt3/datastores/web/big.bin)"
	same "... the refusal is logged once" 1 \
		"$(grep -c 'O_DIRECT writes refused, using the page cache' "$T_DIR/mount.mnt3.log")"
	same "... and the cache's data file holds the file's bytes" "$want" \
		"$(cat ramcache/c/objects/*/*.data | sha256sum)"
	unmount_fg "$T_DIR/mnt3"
	clear_log
	mount_fg ram.conf "$T_DIR/mnt3" || { not_ok "mount came up"; t_finish; exit 1; }
	same "... which a restart reads with no byte sent by nginx" "$want:0" \
		"$(sha256sum <mnt3/datastores/web/big.bin):$(sent /big.bin)"
	unmount_fg "$T_DIR/mnt3"
	umount "$T_DIR/ramcache"
else
	echo "# skip: no ramfs here (a folder that refuses O_DIRECT)"
fi

trap - EXIT
t_finish
