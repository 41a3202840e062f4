#!/bin/bash
# smb_test.sh - a real gateway over a real Samba smbd (scripts/server-smb.sh),
# seeded through the share's folder and cross-checked with smbclient:
# listings (one of 5,000 files), stat, reads, writes small and 64 MiB, what
# each side wrote seen by the other, rename, rm, mkdir, rmdir, truncate,
# touch, the datastore root rule; a wrong password, a stopped server, and
# the same mount working again after smbd restarts.  posix_check is not run
# here: SMB has no owners, links or symlinks, and says so with errors.
# Usage: smb_test.sh MLFS POSIX_CHECK
set -u
MLFS=$1
POSIX_CHECK=$2
TOP=$(cd "$(dirname "$0")/../.." && pwd)
MLFS=$(cd "$(dirname "$MLFS")" && pwd)/${MLFS##*/}
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1
: "$POSIX_CHECK"

SERVER=$TOP/scripts/server-smb.sh
PASS='Passw0rd!'
export SMB_TEST_PASSWORD=$PASS
# Leaks inside Samba's own libraries (talloc globals kept until exit) are
# theirs; tests/lsan.supp names only libsmbclient/samba frames.
[ -f "$TOP/tests/lsan.supp" ] && export LSAN_OPTIONS="suppressions=$TOP/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

PORT=${SMB_TEST_PORT:-$(free_port)}
smbc() { smbclient -p "$PORT" -U "mlfssmb%$PASS" //127.0.0.1/share "$@"; }

smb_cleanup() { server_cleanup "$SERVER" "$T_DIR/smb"; }
t_cleanup() { smb_cleanup; }
trap 'smb_cleanup; rm -rf "$T_DIR"' EXIT

"$SERVER" start smb "$PORT" >/dev/null || { not_ok "smbd started"; t_finish; exit 1; }
S=$T_DIR/smb/share

# --- seed, straight into the share's folder
mkdir -p "$S/data/sub" "$S/dir2/subdir2" "$S/many" mnt
printf 'hello smb\n' >"$S/data/a.txt"
head -c 3145739 /dev/urandom >"$S/data/sub/rand.bin"
head -c 1234567 /dev/urandom >"$S/data/cold.bin"
head -c 777777 /dev/urandom >"$S/data/cold2.bin"
echo "odd name" >"$S/data/with space, 100% #1 & +.txt"
echo "inside the root" >"$S/dir2/subdir2/in.txt"
echo "above the root" >"$S/top.txt"
(cd "$S/many" && for i in $(seq -w 0 4999); do printf '%s\n' "$i" >"f$i"; done)
chown -R mlfssmb "$S"
printf '%s\n' "$PASS" >pass
chmod 600 pass
printf 'not-the-password\n' >badpass
chmod 600 badpass

cat >mlfs.conf <<CONF
[mlfs]
# exact request counts below: no read-ahead past the epoch's files
read_ahead_files = 0
state_dir = state
cache_dir = cache
timeout = 3
retries = 1

[datastore share]
type = smb
address = 127.0.0.1:$PORT
share = share
username = mlfssmb
password_file = $T_DIR/pass

[datastore rooted]
type = smb
address = 127.0.0.1:$PORT
share = share
root = /dir2
username = mlfssmb
password_file = $T_DIR/pass

[datastore bad]
type = smb
address = 127.0.0.1:$PORT
share = share
username = mlfssmb
password_file = $T_DIR/badpass

[dataset d]
source = share:/data

[dataset u]
source = smb://127.0.0.1:$PORT/share/data/sub

[dataset many]
source = share:/many
CONF

check "mlfs check accepts the config" "$MLFS" check mlfs.conf
chmod 644 pass
fails "a password file others can read is refused" "others can read or change it" \
	"$MLFS" check mlfs.conf
chmod 600 pass
mount_fg mlfs.conf "$T_DIR/mnt" || { not_ok "mount came up"; t_finish; exit 1; }
M=$T_DIR/mnt
B=$M/datastores/share
R=$M/datastores/rooted
D=$M/datasets/d
LOG=$T_DIR/mount.mnt.log

# --- reading
same "ls shows the share's top level" "data dir2 many top.txt" "$(ls "$B" | tr '\n' ' ' | sed 's/ $//')"
same "ls shows the dataset" "a.txt cold.bin cold2.bin sub with space, 100% #1 & +.txt" \
	"$(ls "$D" | tr '\n' ' ' | sed 's/ $//')"
same "stat shows a file's size" 3145739 "$(stat -c %s "$B/data/sub/rand.bin")"
disk_size=$(df -B1 --output=size "$S" | tail -1)
share_size=$(df -B1 --output=size "$B" | tail -1)
echo "# df: the share's disk $disk_size bytes, the datastore $share_size"
check "df shows the share's size, as its own disk's (libsmbclient counts sectors)" \
	test "$(( (disk_size - share_size) / 1048576 ))" -eq 0
same "a name is 255 bytes at most (libsmbclient says 0)" 255 "$(stat -f -c %l "$B")"
check "a folder is a folder" test -d "$B/data/sub"
same "cat reads a small file" "hello smb" "$(cat "$B/data/a.txt")"
same "a name with space, %, #, & and + reads back (SMB forbids ?)" "odd name" "$(cat "$D/with space, 100% #1 & +.txt")"
same "a whole read is the seeded file" "$(sha "$S/data/sub/rand.bin")" "$(sha "$B/data/sub/rand.bin")"
same "and through the dataset" "$(sha "$S/data/sub/rand.bin")" "$(sha "$D/sub/rand.bin")"
same "and through an smb:// URL source, which borrows the share's credentials" \
	"$(sha "$S/data/sub/rand.bin")" "$(sha "$M/datasets/u/rand.bin")"
same_at_offsets "reads at random offsets return the seeded bytes" "$S/data/sub/rand.bin" "$B/data/sub/rand.bin"
fails "a missing file is ENOENT" "No such file" stat "$B/data/nope"
start=$(date +%s.%N)
n=$(ls "$B/many" | wc -l)
echo "# listing 5,000 files took $(echo "$(date +%s.%N) - $start" | bc) s"
same "a folder of 5,000 files lists completely" 5000 "$n"
same "every one of them, by name" "$(seq -w 0 4999 | sed 's/^/f/' | sha256sum)" \
	"$(ls "$B/many" | sort | sha256sum)"
same "ls -l of them shows sizes" 5000 "$(ls -l "$B/many" | awk '$5 == 5' | wc -l)"
same "a listed file reads back" "4321" "$(cat "$B/many/f4321")"

# --- epochs of a dataset of small files (as a DataLoader reads them): the second, in the
# same mount, looks up, opens and reads each from the cache, and asks the server nothing
first=$(read_epoch "$M/datasets/many" 'f00*')
same "a first epoch of 100 small files reads their bytes" "$(seq -w 0 99 | sed 's/^/00/' | sha256sum)" "$first"
quiet_of "$M"	# the read-ahead of the files after the epoch's
before=$(stat_of "$M" datastore.share.requests)
same "a second epoch reads the same bytes" "$first" "$(read_epoch "$M/datasets/many" 'f00*')"
same "... with no request to the server (datastore.share.requests)" "$before" \
	"$(stat_of "$M" datastore.share.requests)"

# --- the datastore root rule
same "a rooted datastore shows its root's content" "subdir2" "$(ls "$R")"
same "a job path /subdir2 is /dir2/subdir2" "inside the root" "$(cat "$R/subdir2/in.txt")"
fails "nothing above the root: top.txt" "No such file" stat "$R/top.txt"
fails "nothing above the root: ../top.txt" "No such file" cat "$R/../top.txt"
fails "nothing above the root: subdir2/../../top.txt" "No such file" cat "$R/subdir2/../../top.txt"
echo made-in-root >"$R/subdir2/new.txt"
same "a file made in the rooted datastore lands in /dir2" "made-in-root" "$(cat "$S/dir2/subdir2/new.txt")"

# --- writing
head -c 1000003 /dev/urandom >small.bin
head -c $((64 << 20)) /dev/urandom >big.bin
check "cp writes a new file" cp small.bin "$B/data/out.bin"
same "it reads back through the mount" "$(sha small.bin)" "$(sha "$B/data/out.bin")"
rm -f got.bin
smbc -c "get data/out.bin $T_DIR/got.bin" >/dev/null 2>&1
same "smbclient sees what mlfs wrote" "$(sha small.bin)" "$(sha got.bin 2>/dev/null)"
smbc -c "put $T_DIR/small.bin data/from-smbclient.bin" >/dev/null 2>&1
same "mlfs sees what smbclient put" "$(sha small.bin)" "$(sha "$B/data/from-smbclient.bin")"
start=$(date +%s.%N)
check "cp writes a 64 MiB file" cp big.bin "$B/data/big.bin"
echo "# 64 MiB written in $(echo "$(date +%s.%N) - $start" | bc) s"
same "the share has all 64 MiB" $((64 << 20)) "$(stat -c %s "$S/data/big.bin")"
same "the 64 MiB file reads back identical" "$(sha big.bin)" "$(sha "$B/data/big.bin")"
rm -f got.bin
smbc -c "get data/big.bin $T_DIR/got.bin" >/dev/null 2>&1
same "and identical through smbclient" "$(sha big.bin)" "$(sha got.bin 2>/dev/null)"
printf 'appended\n' >>"$B/data/a.txt"
same "appending to a file" "$(printf 'hello smb\nappended')" "$(cat "$S/data/a.txt")"
check "truncate shrinks a file" truncate -s 5 "$B/data/a.txt"
same "the share sees the truncated file" "hello" "$(cat "$S/data/a.txt")"
check "truncate grows a file" truncate -s 100 "$B/data/a.txt"
same "the share sees the grown file" 100 "$(stat -c %s "$S/data/a.txt")"
check "touch creates a file" touch "$B/data/empty"
same "the touched file is empty" 0 "$(stat -c %s "$S/data/empty")"
check "touch -d sets the mtime" touch -d "2001-02-03 04:05:06 UTC" "$B/data/empty"
same "the share sees the mtime" "$(date -d '2001-02-03 04:05:06 UTC' +%s)" "$(stat -c %Y "$S/data/empty")"
fails "O_EXCL on an existing file is EEXIST" "File exists" \
	python3 -c "import os; os.open('$B/data/empty', os.O_CREAT | os.O_EXCL | os.O_WRONLY)"
check "rm removes a file" rm "$B/data/out.bin"
fails "smbclient no longer sees it" "NO_SUCH_FILE" smbc -c "ls data/out.bin"
fails "rm of a missing file fails" "No such file" rm "$B/data/out.bin"
check "mv renames a file" mv "$B/data/empty" "$B/data/renamed"
check "mv: the share has the new name" test -e "$S/data/renamed"
check "mv: and not the old one" bash -c "! test -e '$S/data/empty'"
cp small.bin "$B/data/t1" && echo t2 >"$B/data/t2"
check "mv of a file onto an existing one" mv "$B/data/t1" "$B/data/t2"
same "replaces it" "$(sha small.bin)" "$(sha "$B/data/t2")"
fails "mv --no-clobber semantics: RENAME_NOREPLACE onto a file is EEXIST" "File exists" \
	python3 -c "
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, b'$B/data/renamed', -100, b'$B/data/t2', 1) != 0:
    e = ctypes.get_errno(); raise OSError(e, os.strerror(e))"
# SMB keeps a file open here from being removed or replaced (libsmbclient opens without
# FILE_SHARE_DELETE): both say EBUSY, and the file is left as it was
echo busy >"$B/data/busy" && echo other >"$B/data/other"
exec 7<"$B/data/busy"
fails "rm of a file open here is EBUSY" "Device or resource busy" rm "$B/data/busy"
fails "mv onto a file open here is EBUSY (libsmbclient says EEXIST)" \
	"Device or resource busy" mv -T "$B/data/other" "$B/data/busy"
same "the open file reads on, unchanged" "busy" "$(cat <&7)"
exec 7<&-
check "once closed, mv onto it replaces it" mv -T "$B/data/other" "$B/data/busy"
# close(2) returns before the daemon hears of it (FUSE's RELEASE comes after), so an unlink
# or a rename right after a close met the file still open on the server: EBUSY
same "unlink and rename right after a close succeed" 0 "$(python3 - "$B/data" <<'PY'
import os, sys
bad = 0
for i in range(30):
    p = os.path.join(sys.argv[1], "closed%d" % i)
    with open(p, "w") as f:
        f.write("x")
    try:
        if i % 2:
            os.unlink(p)
        else:
            os.rename(p, p + ".moved")
            os.unlink(p + ".moved")
    except OSError:
        bad += 1
print(bad)
PY
)"
same "sqlite with its rollback journal (removed at each commit)" "200 ok" "$(python3 - "$B/data/t.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("pragma journal_mode=delete")
db.execute("create table t (v text)")
for k in range(20):
    with db:
        db.executemany("insert into t values (?)", [("x" * k,)] * 10)
print(db.execute("select count(*) from t").fetchone()[0],
      db.execute("pragma integrity_check").fetchone()[0])
db.close()
PY
)"
check "mkdir makes a folder" mkdir "$B/newdir"
check "the share has it" test -d "$S/newdir"
check "a file inside it" cp small.bin "$B/newdir/f"
fails "rmdir of a non-empty folder fails" "Directory not empty" rmdir "$B/newdir"
check "mv renames a folder" mv "$B/newdir" "$B/newdir2"
same "its file moved with it" "$(sha small.bin)" "$(sha "$S/newdir2/f")"
check "rm the file" rm "$B/newdir2/f"
check "rmdir of the empty folder" rmdir "$B/newdir2"
check "the folder is gone" bash -c "! test -e '$S/newdir2'"
fails "symlink is refused" "Operation not permitted" ln -s a.txt "$B/data/link"
fails "mkfifo is refused with EPERM, not ENOSYS" "Operation not permitted" mkfifo "$B/data/fifo"
fails "so is binding a unix socket" "Operation not permitted" \
	python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('$B/data/sock')"
same "the log says it once for the datastore" 1 "$(grep -c "datastore share (smb): special files" "$LOG")"

# --- faults
fails "wrong password: ls fails with EACCES" "Permission denied" ls "$M/datastores/bad"
check "the log names the datastore and tells to check the password" \
	grep -E "datastore bad: .*refused access.*check username and password" "$LOG"
check "the password is never logged" bash -c "! grep -qe '$PASS' -e not-the-password '$LOG'"

"$SERVER" stop "$T_DIR/smb"
start=$(date +%s.%N)
fails "a stopped server gives EIO" "Input/output error" cat "$B/data/cold.bin"
took=$(echo "$(date +%s.%N) - $start" | bc)
echo "# the failed read took $took s"
check "... within timeout x (retries + 1) + a few seconds" \
	bash -c "[ \$(echo '$took < 3 * 2 + 5' | bc) = 1 ]"
"$SERVER" start "$T_DIR/smb" "$PORT" >/dev/null || not_ok "smbd restarted"
same "after a restart the next read works, no remount" "$(sha "$S/data/cold.bin")" \
	"$(sha "$B/data/cold.bin")"
same "and a file never read before" "$(sha "$S/data/cold2.bin")" "$(sha "$D/cold2.bin")"
check "and writes work again" cp small.bin "$B/data/after.bin"
same "the share has it" "$(sha small.bin)" "$(sha "$S/data/after.bin")"

# --- the next job: a new mount over the same cache lists the folder once, then reads the
# epoch's files from the cache
next_job_epoch mlfs.conf "$M" share "$M/datasets/many" 'f00*' "$first"
unmount_fg "$M"
"$SERVER" stop "$T_DIR/smb"
trap - EXIT
t_finish
