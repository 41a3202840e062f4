#!/bin/bash
# mount_test.sh - a real gateway over local folders, driven by the commands a
# user types: ls, stat, cat, cp, mkdir, mv, rm, truncate, ln, chmod, chown,
# df, rsync, sqlite3, and by another uid.  Usage: mount_test.sh MLFS POSIX_CHECK
set -u
MLFS=$1
POSIX_CHECK=$2
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1

mkdir -p data/store/voc/train data/store/ckpt/resnet data/store/shared data/other/code mnt
echo "hello voc" >data/store/voc/a.txt
echo "img" >"data/store/voc/train/img 1.jpg"
echo "weights" >data/store/ckpt/resnet/model.pt
echo "def main(): pass" >data/other/code/train.py
echo "top secret" >data/store/private
chmod 600 data/store/private
echo "for everyone" >data/store/public
chmod 644 data/store/public
chmod 1777 data/store/shared
cat >mlfs.conf <<CONF
[mlfs]
state_dir = state
cache_dir = cache

[datastore store]
type = local
root = data/store

[datastore other]
type = local
root = data/other

[datastore owned]
type = local
root = data/store/voc
uid = 65534
gid = 65534
mode = 600

[dataset PASCAL VOC]
source = store:/voc

[checkpoint resnet]
source = store:/ckpt/resnet/

[model detector]
source = other:/code

[source repo]
source = other:/
sub_path = code
mount_path = /workspace/repo
CONF

mount_fg mlfs.conf "$T_DIR/mnt" || { not_ok "mount came up"; t_finish; exit 1; }
M=$T_DIR/mnt
S=$M/datastores/store

# --- the tree
dev=$(awk -v m="$M" '$5 == m {print $3}' /proc/self/mountinfo | tail -1)
same "the mount's readahead window is 1 MiB" 1024 "$(cat "/sys/class/bdi/$dev/read_ahead_kb")"
same "ls shows the tree" ".mlfs checkpoints datasets datastores jobs models sources" "$(ls -A "$M" | tr '\n' ' ' | sed 's/ $//')"
same "a [source] is shown under sources/, at its sub_path" "train.py" "$(ls "$M/sources/repo")"
fails "... read-only (EROFS)" "Read-only file system" touch "$M/sources/repo/new.py"
same "a name with spaces is shown with underscores" "PASCAL_VOC" "$(ls "$M/datasets")"
same "datastores are listed" "other owned store" "$(ls "$M/datastores" | tr '\n' ' ' | sed 's/ $//')"
same "cat reads a dataset file" "hello voc" "$(cat "$M/datasets/PASCAL_VOC/a.txt")"
same "a file name with a space inside a dataset" "img" "$(cat "$M/datasets/PASCAL_VOC/train/img 1.jpg")"
same "checkpoint view" "weights" "$(cat "$M/checkpoints/resnet/model.pt")"
same "model view" "def main(): pass" "$(cat "$M/models/detector/train.py")"
same "stat shows the backing size" "$(stat -c %s data/store/voc/a.txt)" "$(stat -c %s "$M/datasets/PASCAL_VOC/a.txt")"
same "stat shows the backing mode and owner" "$(stat -c '%A %U' data/store/private)" "$(stat -c '%A %U' "$S/private")"
check "ls -l lists a datastore" ls -l "$S"
same "find sees what the folder has" "$(cd data/store && find . | sort)" "$(cd "$S" && find . | sort)"
check ".mlfs/stats counts the opens" grep -qE '^datastore\.store\.opens [1-9]' "$M/.mlfs/stats"
if grep -qx "mount.passthrough 1" "$M/.mlfs/stats"; then
	check "local files are served by the kernel (FUSE passthrough)" \
		grep -qE '^datastore\.store\.passthrough_opens [1-9]' "$M/.mlfs/stats"
else
	ok "# skip: this kernel offers no FUSE passthrough (Linux 6.9+ and root needed)"
fi

# --- writing through datastores/
head -c 5000000 /dev/urandom >rand.bin
check "cp into a datastore" cp rand.bin "$S/rand.bin"
check "the copy is in the folder" cmp rand.bin data/store/rand.bin
check "cp out of a datastore" cp "$S/rand.bin" out.bin
check "the copy out is intact" cmp rand.bin out.bin
check "mkdir" mkdir -p "$S/new/deeper"
check "mkdir reached the folder" test -d data/store/new/deeper
check "mv within a datastore" mv "$S/rand.bin" "$S/new/moved.bin"
check "mv reached the folder" test -f data/store/new/moved.bin -a ! -e data/store/rand.bin
check "mv across datastores (copy and delete)" mv "$S/new/moved.bin" "$M/datastores/other/moved.bin"
check "mv across reached the other folder" cmp rand.bin data/other/moved.bin
check "truncate" truncate -s 100 "$M/datastores/other/moved.bin"
same "truncate reached the folder" 100 "$(stat -c %s data/other/moved.bin)"
check "rm" rm "$M/datastores/other/moved.bin"
check "rm reached the folder" test ! -e data/other/moved.bin
check "rm -r" rm -r "$S/new"
check "rm -r reached the folder" test ! -e data/store/new
echo linked >"$S/orig"
check "ln (hard link)" ln "$S/orig" "$S/hard"
same "the hard link counts two" 2 "$(stat -c %h "$S/hard")"
same "the folder has the hard link" "$(stat -c %i data/store/orig)" "$(stat -c %i data/store/hard)"
check "ln -s" ln -s orig "$S/soft"
same "readlink" orig "$(readlink "$S/soft")"
same "cat through a symlink" linked "$(cat "$S/soft")"

# --- special files: the folder holds the node, the kernel does a FIFO's and a socket's I/O.
# The mount is nodev (libfuse's default), so a device made through it cannot be opened there.
check "mkfifo in a datastore" mkfifo "$S/fifo"
same "the folder holds a FIFO" fifo "$(stat -c %F data/store/fifo)"
(sleep 0.2; echo "through the fifo" >"$S/fifo") &
writer=$!
same "a writer and a reader meet through it" "through the fifo" "$(timeout 10 cat "$S/fifo")"
wait "$writer"
check "a unix socket in a datastore is bound, connected to and answers" \
	python3 -c "$SOCKET_PING" "$S/sock"
same "the folder holds the socket" socket "$(stat -c %F data/store/sock)"
check "mknod of a device as root" mknod "$S/null" c 1 3
same "the folder holds it" "character special file 1,3" "$(stat -c '%F %t,%T' data/store/null)"
fails "the mount is nodev: the device cannot be opened through it" "Permission denied" \
	sh -c "echo x >'$S/null'"
check "special files are removed like files" rm "$S/fifo" "$S/sock" "$S/null"
check "chmod" chmod 640 "$S/orig"
same "chmod reached the folder" 640 "$(stat -c %a data/store/orig)"
check "chown as root" chown 65534:65534 "$S/orig"
same "chown reached the folder" "65534:65534" "$(stat -c %u:%g data/store/orig)"
check "touch -d sets mtime" touch -d "2001-02-03 04:05:06" "$S/orig"
same "mtime reached the folder" "$(date -d '2001-02-03 04:05:06' +%s)" "$(stat -c %Y data/store/orig)"
printf '#!/bin/sh\necho ran "$@"\n' >data/store/run.sh && chmod 755 data/store/run.sh
same "a script runs from the mount (an execve's open)" "ran 1" "$("$S/run.sh" 1 2>&1)"
rm -f data/store/run.sh
check "df on the mount" df "$M"
same "df on a datastore shows its disk" "$(df --output=size data/store | tail -1)" "$(df --output=size "$S" | tail -1)"
echo "changed behind the mount, longer" >data/store/public.new
mv data/store/public.new data/store/public
sleep 1.2
same "a change made behind the mount is seen" "changed behind the mount, longer" "$(cat "$S/public")"

# --- without passthrough every read goes through mlfs and the kernel's FUSE page cache:
# kept across opens while size and mtime hold, dropped when they change.  This VM's balloon
# may reclaim a few cached pages at any time, so "kept" is "most of it" (without keep_cache
# an open drops every page: 0).
MAIN_PID=$MOUNT_PID
mkdir -p "$T_DIR/mnt2"
M2=$T_DIR/mnt2
# the same config but its state_dir (one gateway per state_dir), over the same cache
sed 's/^state_dir = state$/state_dir = state2/' mlfs.conf >mlfs2.conf
mount_fg mlfs2.conf "$M2" -o nopassthrough || not_ok "a mount with -o nopassthrough came up"
S2=$M2/datastores/store
resident() { fincore --bytes --noheadings --output RES "$1" | tr -d ' '; }
mostly_resident() { [ "$(resident "$1")" -gt $(($2 / 2)) ]; }
head -c 4194304 /dev/urandom >data/store/cached.bin
check "nopassthrough: reads come through mlfs" cmp data/store/cached.bin "$S2/cached.bin"
check "nopassthrough: .mlfs/stats counts the bytes read" \
	grep -qE '^datastore\.store\.bytes_read [1-9]' "$M2/.mlfs/stats"
check "nopassthrough: no open is served by the kernel" \
	grep -qE '^datastore\.store\.passthrough_opens 0$' "$M2/.mlfs/stats"
check "nopassthrough: .mlfs/stats says so" grep -qx "mount.passthrough 0" "$M2/.mlfs/stats"
check "a read file is in the page cache" mostly_resident "$S2/cached.bin" 4194304
sleep 1.2
check "an unchanged file keeps its pages across opens (keep_cache)" mostly_resident "$S2/cached.bin" 4194304
touch -d "2030-01-01" data/store/cached.bin
sleep 1.2
same "a file changed behind the mount loses its cached pages" 0 "$(resident "$S2/cached.bin")"
cat "$M2/datasets/PASCAL_VOC/a.txt" >/dev/null
check "a dataset file keeps its pages" mostly_resident "$M2/datasets/PASCAL_VOC/a.txt" 4096
check "POSIX checks pass without passthrough" "$POSIX_CHECK" "$S2"
unmount_fg "$M2"
MOUNT_PID=$MAIN_PID

# --- rsync round trip
mkdir -p src/sub
echo one >src/one
echo two >src/sub/two
ln -s one src/link
chmod 700 src/sub
# rsync leaves alone a time already right to the second: make every time old
touch -h -d "2010-01-01 10:00:00.123456789" src/one src/sub/two src/link src/sub src
check "rsync -a into a datastore" rsync -a src/ "$S/rs/"
check "rsync -a back out" rsync -a "$S/rs/" back/
check "the round trip is identical" diff -r src back
same "rsync sees nothing left to do" "" "$(rsync -a -n -i src/ "$S/rs/")"
same "modes and symlinks survive" "$(cd src && find . -printf '%m %y %s %T@ %l\n' | sort)" "$(cd back && find . -printf '%m %y %s %T@ %l\n' | sort)"

# --- sqlite3 on a datastore
if command -v sqlite3 >/dev/null; then
	check "sqlite3 creates and fills a database" sqlite3 "$S/db.sqlite" \
		"create table t(x); begin; $(for i in $(seq 1 500); do printf 'insert into t values(%d);' "$i"; done) commit;"
	same "sqlite3 reads it back" 500 "$(sqlite3 "$S/db.sqlite" 'select count(*) from t')"
	same "sqlite3 integrity check" ok "$(sqlite3 "$S/db.sqlite" 'pragma integrity_check')"
	same "sqlite3 in WAL mode" 500 "$(sqlite3 "$S/db.sqlite" 'pragma journal_mode=wal; insert into t values(0); delete from t where x=0; select count(*) from t' | tail -1)"
	same "the folder holds a valid database" ok "$(sqlite3 data/store/db.sqlite 'pragma integrity_check')"
else
	not_ok "sqlite3 is installed"
fi

# --- read-only trees
fails "write into a dataset fails with EROFS" "Read-only file system" touch "$M/datasets/PASCAL_VOC/new"
fails "overwrite in a dataset fails with EROFS" "Read-only file system" cp rand.bin "$M/datasets/PASCAL_VOC/a.txt"
fails "rm in a checkpoint fails with EROFS" "Read-only file system" rm "$M/checkpoints/resnet/model.pt"
fails "mkdir in a model fails with EROFS" "Read-only file system" mkdir "$M/models/detector/x"
fails "chmod in a dataset fails with EROFS" "Read-only file system" chmod 777 "$M/datasets/PASCAL_VOC/a.txt"
fails "a new dataset cannot be made by mkdir" "Read-only file system" mkdir "$M/datasets/new"
fails "a datastore cannot be removed" "Operation not permitted" rmdir "$M/datastores/other"
same "the dataset is untouched" "hello voc" "$(cat data/store/voc/a.txt)"

# --- another uid
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
fails "another uid cannot read a 0600 file" "Permission denied" as_nobody cat "$S/private"
same "another uid reads a 0644 file" "changed behind the mount, longer" "$(as_nobody cat "$S/public")"
fails "another uid cannot write a root folder" "Permission denied" as_nobody touch "$S/nobody-file"
check "another uid makes a FIFO in a 1777 folder" as_nobody mkfifo -m 0640 "$S/shared/fifo"
same "it is that uid's, with the mode asked" "65534:65534 640" "$(stat -c '%u:%g %a' data/store/shared/fifo)"
check "another uid writes into a 1777 folder" as_nobody sh -c "echo mine >'$S/shared/mine'"
same "the new file belongs to that uid" "65534:65534" "$(stat -c %u:%g data/store/shared/mine)"
echo "root's" >"$S/shared/rootfile"
fails "another uid cannot remove root's file in a sticky folder" "Operation not permitted" \
	as_nobody rm -f "$S/shared/rootfile"

same "a datastore's uid, gid and mode are what is shown" "-rw------- 65534 65534" \
	"$(stat -c '%A %u %g' "$M/datastores/owned/a.txt")"
same "folders add x where r is set" "drwx------" "$(stat -c %A "$M/datastores/owned/train")"
same "the owner the config names reads the file" "hello voc" "$(as_nobody cat "$M/datastores/owned/a.txt")"
fails "root's other users are held to the shown mode" "Permission denied" \
	setpriv --reuid=1000 --regid=1000 --clear-groups cat "$M/datastores/owned/a.txt"

# --- POSIX behaviour, syscall by syscall
check "POSIX checks pass on a datastore" "$POSIX_CHECK" "$S"

# --- many processes at once: creates, renames of files and folders, listings, removals
# race each other for 3 seconds (the sanitizer build checks the daemon at unmount)
mkdir -p "$S/race"
racers=
for w in 1 2 3; do
	(
		end=$((SECONDS + 3))
		i=0
		while [ $SECONDS -lt $end ]; do
			i=$((i + 1))
			d=$S/race/d$((i % 4))
			mkdir -p "$d/sub" 2>/dev/null
			{ echo "$i" >"$d/f$w"; } 2>/dev/null
			mv "$d/f$w" "$S/race/d$(((i + 1) % 4))/g$w" 2>/dev/null
			mv "$d" "$S/race/t$w" 2>/dev/null && mv "$S/race/t$w" "$d" 2>/dev/null
			ls -lR "$S/race" >/dev/null 2>&1
			rm -rf "$S/race/d$(((i + 2) % 4))" 2>/dev/null
		done
	) &
	racers="$racers $!"
done
# shellcheck disable=SC2086
wait $racers
sleep 1.2
same "after the race the mount shows what the folder holds" \
	"$(cd data/store/race && find . | sort)" "$(cd "$S/race" && find . | sort)"
check "the daemon still answers" ls "$S"

# --- a second mount on the same mountpoint
fails "a second mount on a busy mountpoint fails" "already a mount point" "$MLFS" mount mlfs.conf "$M"
same "still exactly one mount there" 1 "$(grep -c " $M fuse.mlfs " /proc/self/mounts)"

unmount_fg "$M"
check "nothing is left mounted" sh -c "! grep -q ' $M ' /proc/self/mounts"
t_finish
