#!/bin/bash
# full_disk_test.sh - a full disk (issue 9), on small tmpfs mounts for the
# cache dir, the state dir, a local datastore and an output destination:
#  1. the data cache (http datastore, nginx) stays under cache_size while
#     its filesystem has room; once that filesystem is full, and when it
#     is already full at mount, remote files still read right (uncached)
#     and the daemon keeps serving;
#  2. a write into a local datastore whose filesystem is full fails with
#     ENOSPC ("No space left on device"); the mount keeps working: rm frees
#     the space and a new write works;
#  3. a worker's output/ (mlfs job) on a full state dir: the write that
#     does not fit fails with ENOSPC, what was written before is intact;
#     with the state dir full at upload (no room for the zip) and then the
#     destination full (a local folder, and a datastore for plain files),
#     mlfs umount, mlfs sync and the gateway's umount fail and keep the
#     staged output, byte for byte; once there is room mlfs sync delivers
#     it intact (checksums);
#  4. nothing crashes: every daemon exits 0 (and, in the ASan build, with no
#     sanitizer report).
# Usage: full_disk_test.sh MLFS  (or MLFS=... full_disk_test.sh)
set -u
MLFS=${1:-${MLFS:-}}
[ -n "$MLFS" ] || { echo "usage: full_disk_test.sh MLFS" >&2; exit 2; }
MLFS=$(cd "$(dirname "$MLFS")" && pwd)/${MLFS##*/}
. "$(dirname "$0")/lib.sh"
SCRIPTS=$(cd "$(dirname "$0")/../../scripts" && pwd)
t_setup
cd "$T_DIR" || exit 1
T_START=$(date +%s)
SAN='AddressSanitizer|runtime error|LeakSanitizer'

PORT=$(free_port)
FS_LIST="cachefs fullcachefs statefs storefs destfs"
t_cleanup() {
	local m
	awk -v d="$T_DIR/" '$3 == "fuse.mlfs" && index($2, d) == 1 { print $2 }' /proc/self/mounts |
		while read -r m; do fusermount3 -u -z "$m" 2>/dev/null; done
	for m in ${MOUNT_PID:-} ${G_PID:-}; do	# every daemon it started: 10 s to go
		for _ in $(seq 1 100); do kill -0 "$m" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$m" 2>/dev/null && kill -KILL "$m" 2>/dev/null
	done
	MOUNT_PID=
	G_PID=
	"$SCRIPTS/server-nginx.sh" stop "$T_DIR/http" >/dev/null 2>&1
	for m in $FS_LIST; do
		mountpoint -q "$T_DIR/$m" && umount "$T_DIR/$m"
	done
}
trap 't_cleanup; rm -rf "$T_DIR"' EXIT
trap 'exit 130' INT TERM HUP
G_PID=

mkdir -p http/www/a http/www/b roomy mnt view $FS_LIST
# tmpfs sizes: the cache's 8 MiB (4 MiB cache_size for the eviction check,
# then 64 MiB, so the disk fills first), 4 MiB for a cache full before its
# mount, the state dir's 4 MiB, a datastore's 1 MiB, the destination's 2 MiB.
mount -t tmpfs -o size=8m,mode=0755 tmpfs cachefs &&
	mount -t tmpfs -o size=4m,mode=0755 tmpfs fullcachefs &&
	mount -t tmpfs -o size=4m,mode=0755 tmpfs statefs &&
	mount -t tmpfs -o size=1m,mode=0755 tmpfs storefs &&
	mount -t tmpfs -o size=2m,mode=0755 tmpfs destfs ||
	{ not_ok "the small tmpfs mounts"; t_finish; exit 1; }
mkdir -p storefs/root

for i in $(seq 1 12); do head -c $((1 << 20)) /dev/urandom >"http/www/a/f$i.bin"; done
for i in $(seq 1 8); do head -c $((2 << 20)) /dev/urandom >"http/www/b/g$i.bin"; done
"$SCRIPTS/server-nginx.sh" start "$T_DIR/http" "$PORT" >/dev/null ||
	{ not_ok "nginx started"; t_finish; exit 1; }

# conf FILE CACHE_DIR CACHE_SIZE
conf() {
	cat >"$1" <<CONF
[mlfs]
state_dir = $T_DIR/statefs/state
cache_dir = $2
cache_size = $3
timeout = 5
retries = 1

[node]
gpus = 0
cpus = 8
memory_gb = 8

[datastore web]
type = http
url = http://127.0.0.1:$PORT/

[datastore tiny]
type = local
root = $T_DIR/storefs/root

[datastore roomy]
type = local
root = $T_DIR/roomy
CONF
}
conf evict.conf "$T_DIR/cachefs/evict" 4M
conf full.conf "$T_DIR/cachefs/cache" 64M
conf prefull.conf "$T_DIR/fullcachefs/cache" 64M

# fill DIR: writes DIR/filler until its filesystem is full.
fill() {
	dd if=/dev/zero of="$1/filler" bs=4k 2>/dev/null
	sync -f "$1" 2>/dev/null
	return 0
}
avail() { df --output=avail -B1 "$1" | tail -1 | tr -d ' '; }
# reads_right DIR SRC...: 0 when every SRC (a path under http/www) reads the same under DIR.
reads_right() {
	local dir=$1 f bad=0
	shift
	for f in "$@"; do
		cmp "http/www/$f" "$dir/$f" 2>&1 || bad=1
	done
	return $bad
}
M=$T_DIR/mnt
W=$M/datastores/web

# --- 1a. the cache stays under cache_size while its disk has room
mount_fg evict.conf "$M" || { not_ok "mount came up"; t_finish; exit 1; }
check "twelve 1 MiB files read right through a 4 MiB cache" \
	reads_right "$W" a/f{1..12}.bin
for _ in $(seq 1 50); do
	used=$(du -sb cachefs/evict | cut -f1)
	[ "$used" -le $((4 << 20)) ] && [ "$(stat_of "$M" cache.evictions)" -ge 1 ] && break
	sleep 0.1
done
check "the cache folder holds at most cache_size (4 MiB): $used bytes" test "$used" -le $((4 << 20))
check "... by evicting" test "$(stat_of "$M" cache.evictions)" -ge 1
unmount_fg "$M"
rm -rf cachefs/evict

# --- 1b. the cache's disk (8 MiB, 3 MiB of it taken by other files) fills
# before cache_size (64 MiB): g3 only partly fits, then the disk is full
head -c $((3 << 20)) /dev/zero >cachefs/other
mount_fg full.conf "$M" || { not_ok "mount came up"; t_finish; exit 1; }
check "three 2 MiB files read right as the cache's disk fills" reads_right "$W" b/g{1..3}.bin
# Fetched blocks are written behind the reader; the write that does not fit
# fails with ENOSPC, is logged, and starts an eviction of what is not open.
filled() {
	[ "$(avail cachefs)" -lt $((1 << 20)) ] ||
		{ grep -q "cannot keep fetched blocks (No space left on device)" \
			"$T_DIR/mount.mnt.log" && [ "$(stat_of "$M" cache.evictions)" -ge 1 ]; }
}
for _ in $(seq 1 50); do
	filled && break
	sleep 0.1
done
check "... and the cache filled its disk: under 1 MiB free, or ENOSPC logged and evicted" filled
check "they read right a second time" reads_right "$W" b/g{1..3}.bin
fill cachefs
evicted=$(stat_of "$M" cache.evictions)
same "the cache's disk is full to the last block" 0 "$(avail cachefs)"
check "with it full, files never read before read right" reads_right "$W" a/f{1..2}.bin b/g4.bin
check "... and so do the files read before" reads_right "$W" b/g1.bin b/g3.bin
check "... the cache made room on its full disk by evicting, far under its 64 MiB cache_size" \
	test "$(stat_of "$M" cache.evictions)" -gt "$evicted"
check "... and the log says the file it had no room for was read uncached" \
	grep -q "no room for object .* (No space left on device), reading it uncached" "$T_DIR/mount.mnt.log"
same "... the file list is served" "$(ls http/www/a | xargs)" "$(ls "$W/a" 2>&1 | xargs)"
check "the local datastore is served too" \
	sh -c "echo hi >'$M/datastores/roomy/hi.txt' && grep -q hi '$M/datastores/roomy/hi.txt'"
check "the daemon is still running" kill -0 "$MOUNT_PID"
rm -f cachefs/filler cachefs/other
check "with room again, files read right" reads_right "$W" a/f{5..6}.bin b/g5.bin

# --- 2. a local datastore on a full 1 MiB disk
T=$M/datastores/tiny
head -c 300000 /dev/urandom >small.bin
check "a small file is written into the tiny datastore" cp small.bin "$T/small.bin"
fails "dd of 2 MiB into it fails with ENOSPC" "No space left on device" \
	dd if=/dev/zero of="$T/big.bin" bs=64k count=32 conv=fsync
fails "cp of a 2 MiB file into it fails with ENOSPC" "No space left on device" \
	cp http/www/b/g2.bin "$T/copy.bin"
same "what was there before is intact" "$(sha small.bin)" "$(sha "$T/small.bin")"
same "the datastore lists what it holds" "big.bin copy.bin small.bin" "$(ls "$T" 2>&1 | xargs)"
check "rm frees the space" rm -f "$T/big.bin" "$T/copy.bin"
head -c 500000 /dev/urandom >second.bin
check "then a new write works" cp second.bin "$T/second.bin"
same "... and reads back right" "$(sha second.bin)" "$(sha "$T/second.bin")"
same "... as on the disk" "$(sha second.bin)" "$(sha storefs/root/second.bin)"
rm -f "$T/second.bin" "$T/small.bin"
unmount_fg "$M"
rm -rf cachefs/cache

# --- 1c. a cache whose disk is full before the mount
fill fullcachefs
if mount_fg prefull.conf "$M"; then
	check "with the cache's disk full at mount, remote files read right" \
		reads_right "$W" a/f6.bin b/g3.bin
	check "... and the daemon is still running" kill -0 "$MOUNT_PID"
	unmount_fg "$M"
else
	st=0
	wait "$MOUNT_PID" 2>/dev/null || st=$?
	MOUNT_PID=
	not_ok "a mount whose cache disk is full comes up (its daemon exited with $st)"
fi
rm -f fullcachefs/filler

# --- 3. a worker's output on a full state dir, then a full destination
mount_fg full.conf "$M" || { not_ok "mount came up"; t_finish; exit 1; }
G_PID=$MOUNT_PID	# the gateway, unmounted at the end
V=$T_DIR/view
cat >zipped.json <<JSON
{"name": "zipped", "workers": [{"command": "true"}],
 "data": {"output": {"type": "local", "path": "$T_DIR/destfs/out"}}}
JSON
cat >plain.json <<JSON
{"name": "plain", "workers": [{"command": "true"}],
 "data": {"output": {"type": "datastore", "path": "tiny:/results/", "archive": false}}}
JSON
# view SPEC: mounts worker 1's view of SPEC at $V, in the foreground, in the background.
view() {
	fg_mount "$V" "$T_DIR/view.$1.log" "$MLFS" job -f full.conf "$1" "$V" --worker 1
}
# umount_view SPEC: mlfs umount of the view; UMOUNT_STATUS, its stderr in umount.log.
umount_view() {
	local status=0
	UMOUNT_STATUS=0
	"$MLFS" umount "$V" 2>"$T_DIR/umount.log" || UMOUNT_STATUS=$?
	if is_mounted "$V"; then	# never wait for a daemon whose mount is still there
		not_ok "mlfs umount unmounted the view"
		sed 's/^/#   /' "$T_DIR/umount.log"
		fusermount3 -u -z "$V"
	fi
	wait "$MOUNT_PID" || status=$?
	MOUNT_PID=$G_PID
	if [ "$status" -eq 0 ] && ! grep -qE "$SAN" "$T_DIR/view.$1.log"; then
		ok "the view's daemon exited cleanly"
	else
		not_ok "the view's daemon exited with $status"
		sed 's/^/#   /' "$T_DIR/view.$1.log" | head -30
	fi
}

view zipped.json || { not_ok "a view came up"; MOUNT_PID=$G_PID; t_finish; exit 1; }
ZS=$(sed -n 's/^output_dir=//p' "$V/.mlfs/mount")
head -c $((1 << 20)) /dev/urandom >weights.bin
echo "accuracy 0.93" >result.txt
check "1 MiB is written to output/" cp weights.bin "$V/output/weights.bin"
check "a small file too" cp result.txt "$V/output/result.txt"
fails "a write that fills the state dir fails with ENOSPC" "No space left on device" \
	dd if=/dev/urandom of="$V/output/huge.bin" bs=64k count=128 conv=fsync
same "the state dir is full" 0 "$(avail statefs)"
same "what was written before is intact in output/" "$(sha weights.bin)" "$(sha "$V/output/weights.bin")"
same "... and in the staging folder" "$(sha weights.bin)" "$(sha "$ZS/files/weights.bin")"
fails "a new file in output/ fails with ENOSPC too" "No space left on device" \
	sh -c "head -c 100000 /dev/urandom >'$V/output/more.bin'"
check "rm in output/ frees the space" rm -f "$V/output/huge.bin" "$V/output/more.bin"
check "then a new write works" sh -c "echo later >'$V/output/later.txt'"
same "... and reads back" "later" "$(cat "$V/output/later.txt" 2>&1)"
# The disk fills up again before the upload: no room for the zip.
fill statefs
echo '{"name": "nospace", "workers": [{"command": "true"}]}' >nospace.json
fails "a spec written into jobs/ on the full state dir fails with ENOSPC" \
	"No space left on device" cp nospace.json "$M/jobs/"
check "... its .error says the state folder is full" \
	grep -q "cannot keep the job in the state folder: No space left on device" "$M/jobs/nospace.json.error"
check "... and the journal holds whole records only" python3 -c "
import json, sys
for line in open(sys.argv[1]): json.loads(line)" statefs/state/jobs.journal
umount_view zipped.json
check "with no room for the zip, mlfs umount exits non-zero" test "$UMOUNT_STATUS" -ne 0
check "... saying why" grep -q "No space left on device" "$T_DIR/umount.log"
check "... and that the staged output is kept" grep -q "staged output kept in $ZS" "$T_DIR/umount.log"
same "the staged output is intact" "$(sha weights.bin) $(sha result.txt)" \
	"$(sha "$ZS/files/weights.bin") $(sha "$ZS/files/result.txt")"
check "... with no half-made zip left behind" sh -c "! ls -A '$ZS' | grep -q 'zip'"
check "nothing reached the destination" test ! -e destfs/out/zipped.zip

# Room in the state dir again, but the destination (2 MiB) is full.
rm -f statefs/filler
check "with room again, the same spec is accepted" cp nospace.json "$M/jobs/"
check "... and runs" job_state_in "$M/jobs" nospace SUCCEEDED
mkdir -p destfs/out
fill destfs
fails "mlfs sync fails while the destination is full" "not uploaded" "$MLFS" sync full.conf
cp "$T_DIR/check.out" sync1.log
check "... saying why" grep -q "No space left on device" sync1.log
same "the staged output is still intact" "$(sha weights.bin) $(sha result.txt) later" \
	"$(sha "$ZS/files/weights.bin") $(sha "$ZS/files/result.txt") $(cat "$ZS/files/later.txt" 2>&1)"
check "no partial zip is put in place at the destination" test ! -e destfs/out/zipped.zip

# Plain files into the tiny datastore, itself full.
view plain.json || { not_ok "a second view came up"; MOUNT_PID=$G_PID; t_finish; exit 1; }
PS=$(sed -n 's/^output_dir=//p' "$V/.mlfs/mount")
head -c 600000 /dev/urandom >p1.bin
head -c 300000 /dev/urandom >p2.bin
mkdir -p "$V/output/sub"
cp p1.bin "$V/output/p1.bin"
cp p2.bin "$V/output/sub/p2.bin"
fill storefs
umount_view plain.json
check "plain files to a full datastore: mlfs umount exits non-zero" test "$UMOUNT_STATUS" -ne 0
check "... saying why" grep -q "No space left on device" "$T_DIR/umount.log"
same "... the staged files are intact" "$(sha p1.bin) $(sha p2.bin)" \
	"$(sha "$PS/files/p1.bin") $(sha "$PS/files/sub/p2.bin")"
check "... and no partial file is put in place" sh -c "! test -e storefs/root/results/p1.bin || cmp -s p1.bin storefs/root/results/p1.bin"

# The gateway's umount syncs its state dir: both destinations still full.
"$MLFS" umount "$M" 2>gw-umount.log
same "the gateway's mlfs umount exits 1 with outputs it could not send" 1 "$?"
check "... saying so" grep -q "2 output(s) not uploaded" gw-umount.log
st=0
wait "$MOUNT_PID" || st=$?
MOUNT_PID=
G_PID=
if [ "$st" -eq 0 ] && ! grep -qE "$SAN" "$T_DIR/mount.mnt.log"; then
	ok "the gateway's daemon exited cleanly"
else
	not_ok "the gateway's daemon exited with $st"
	sed 's/^/#   /' "$T_DIR/mount.mnt.log" | head -30
fi
same "both staged outputs are still intact" \
	"$(sha weights.bin) $(sha result.txt) $(sha p1.bin) $(sha p2.bin)" \
	"$(sha "$ZS/files/weights.bin") $(sha "$ZS/files/result.txt") $(sha "$PS/files/p1.bin") $(sha "$PS/files/sub/p2.bin")"

# Room at last: mlfs sync delivers both, intact.
rm -f destfs/filler storefs/filler
check "with room, mlfs sync delivers both outputs" "$MLFS" sync full.conf
mkdir -p unz && (cd unz && unzip -q "$T_DIR/destfs/out/zipped.zip" 2>/dev/null)
same "the zip holds the output intact" "$(sha weights.bin) $(sha result.txt) later" \
	"$(sha unz/weights.bin 2>/dev/null) $(sha unz/result.txt 2>/dev/null) $(cat unz/later.txt 2>&1)"
check "... and nothing the failed write left" test ! -e unz/huge.bin
same "the plain files arrived intact" "$(sha p1.bin) $(sha p2.bin)" \
	"$(sha storefs/root/results/p1.bin 2>/dev/null) $(sha storefs/root/results/sub/p2.bin 2>/dev/null)"
check "... with no .mlfs-part left" sh -c "! find storefs/root destfs -name '*.mlfs-part' | grep -q ."
check "mlfs sync with nothing pending exits 0" "$MLFS" sync full.conf

check "no mlfs mount is left" sh -c "! awk '\$3 == \"fuse.mlfs\"' /proc/self/mounts | grep -qF '$T_DIR/'"
echo "# full_disk_test.sh ran $(( $(date +%s) - T_START )) s"
t_finish	# (the EXIT trap then finds nothing left to undo)
