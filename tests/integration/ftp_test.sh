#!/bin/bash
# ftp_test.sh - the ftp backend through a real mount over a real vsftpd
# (scripts/server-vsftpd.sh): listings through libcurl's parser, sizes and
# dates, whole and ranged reads, an empty folder, ENOENT, ENOTDIR, EROFS;
# FTPS with explicit TLS and a self-signed certificate trusted by ca_file
# (and refused without it), a login by password_file and a refused one
# (EACCES); epochs of a dataset from an ftp:// URL (the second, and the next
# job's, ask the server nothing); a server that is gone fails a read with
# EIO in time and a restarted one serves again without a remount.
# Usage: ftp_test.sh MLFS POSIX_CHECK
set -u
MLFS=$(readlink -f "$1")
POSIX_CHECK=$(readlink -f "$2")	# unused: the backend is read-only; kept for the common interface
FTP_SH=$(cd "$(dirname "$0")/../../scripts" && pwd)/server-vsftpd.sh
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1
: "$POSIX_CHECK"

FTP_DIR=$T_DIR/ftp
t_cleanup() { server_cleanup "$FTP_SH" "$FTP_DIR"; }
trap 't_cleanup; rm -rf "$T_DIR"' EXIT

P=$FTP_DIR/pub
mkdir -p "$P/sub/deeper" "$P/empty" "$P/many" mnt
head -c $((20 << 20)) /dev/urandom >"$P/big.bin"
head -c $((8 << 20)) /dev/urandom >"$P/gone.bin"
head -c $((24 << 20)) /dev/urandom >"$P/rand.bin"
head -c $((48 << 20)) /dev/urandom >"$P/mid.bin"
head -c $((48 << 20)) /dev/urandom >"$P/cut.bin"
echo "hello ftp" >"$P/small.txt"
echo "spaced" >"$P/with space.txt"
echo "unicode" >"$P/ünïcödé.txt"
echo "inner" >"$P/sub/inner.txt"
head -c 1234567 /dev/urandom >"$P/sub/tls.bin"
echo "deep" >"$P/sub/deeper/deep.txt"
for i in $(seq -w 0 99); do echo "00$i" >"$P/many/f00$i"; done
# dated an hour back, as a dataset is that was not written a minute ago: a listing's date
# (to the minute) then names a version, and the files open with no request
touch -d '1 hour ago' "$P/many"/f*
mkdir -p "$P/fresh"
echo aaaa >"$P/fresh/x.txt"
touch -d '2 hours ago' "$P/small.txt"
# links the server follows, and what no walk should enter or curl can ask for
mkdir -p "$P/links/real"
echo "data" >"$P/links/data.txt"
echo "in real" >"$P/links/real/f.txt"
ln -s data.txt "$P/links/link.txt"
ln -s real "$P/links/dirlink"
ln -s . "$P/links/self"
ln -s .. "$P/links/up"
ln -s nowhere "$P/links/dangling"
ln -s /etc/passwd "$P/links/abs"
echo "tab" >"$P/links/$(printf 'ta\tb.txt')"
mkdir -p arch-src/dir
echo "zipped member" >arch-src/dir/m.txt
(cd arch-src && zip -qr "$P/sets.zip" dir)

# random_reads ORIGINAL MOUNTED: 48 preads of 1 B to 3 MiB at random offsets,
# from 4 threads sharing one open file; "ok" when each is the original's.
random_reads() {
	python3 - "$1" "$2" <<'PY'
import os, random, sys, threading
data = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_RDONLY)
rng = random.Random(7)
jobs = [(rng.randrange(len(data)), rng.choice([1, 4096, 65536, 300000, 1 << 20, 3 << 20]))
        for _ in range(48)]
bad = []
def work(part):
    for off, n in part:
        if os.pread(fd, n, off) != data[off:off + n]:
            bad.append(off)
threads = [threading.Thread(target=work, args=(jobs[i::4],)) for i in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print("ok" if not bad else "differs at offsets %s" % sorted(bad)[:4])
PY
}

# idle_read ORIGINAL MOUNTED VSFTPD_LOG: reads 4 KiB, waits past half the
# timeout (the parked RETR must be dropped: the server logs the download
# cut), then reads the whole file; "ok" when all of it is the original's.
idle_read() {
	python3 - "$1" "$2" "$3" <<'PY'
import os, sys, time
data = open(sys.argv[1], "rb").read()
name = "/" + os.path.basename(sys.argv[2])
fd = os.open(sys.argv[2], os.O_RDONLY)
first = os.pread(fd, 4096, 0)
time.sleep(2.5)
cut = [l for l in open(sys.argv[3], errors="replace")
       if "FAIL DOWNLOAD" in l and '"%s"' % name in l]
got = first + os.pread(fd, len(data), 4096)
if not cut:
    print("the server still sends %s: no FAIL DOWNLOAD logged" % name)
else:
    print("ok" if got == data else "differs")
PY
}

# cut_read MOUNTED: reads 4 KiB, stops the server (and its logins), reads
# on to the end: "EIO" when that read fails so, else what it did.
cut_read() {
	python3 - "$1" "$FTP_SH" "$FTP_DIR" <<'PY'
import errno, os, subprocess, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.pread(fd, 4096, 0)
subprocess.run([sys.argv[2], "stop", sys.argv[3]], check=True)
try:
    off = 4096
    while True:
        b = os.pread(fd, 1 << 20, off)
        if not b:
            break
        off += len(b)
    print("read all %d bytes" % off)
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY
}

PORT=$(free_port) || { not_ok "a free port"; t_finish; exit 1; }
"$FTP_SH" start "$FTP_DIR" "$PORT" >/dev/null || { not_ok "vsftpd started"; t_finish; exit 1; }
ok "vsftpd started on 127.0.0.1:$PORT"
printf 'mlfsftp\n' >ftp.pass
chmod 600 ftp.pass

cat >mlfs.conf <<CONF
[mlfs]
state_dir = state
cache_dir = cache
timeout = 2
retries = 1
# exact request counts below: no read-ahead past the epoch's files
read_ahead_files = 0

[datastore f]
type = ftp
url = ftp://127.0.0.1:$PORT/

[datastore tls]
type = ftp
url = ftps://127.0.0.1:$PORT/sub/
username = mlfsftp
password_file = ftp.pass
ca_file = $FTP_DIR/cert.pem

[datastore untrusted]
type = ftp
url = ftps://127.0.0.1:$PORT/

[datastore badpass]
type = ftp
url = ftp://127.0.0.1:$PORT/
username = mlfsftp
password = not-the-password
# PAM (pam_unix) answers a wrong password after about 2 s, whatever vsftpd says
timeout = 6

[dataset many]
source = ftp://127.0.0.1:$PORT/many/

[dataset links]
source = ftp://127.0.0.1:$PORT/links/

[dataset fresh]
source = ftp://127.0.0.1:$PORT/fresh/

[dataset zipped]
source = ftp://127.0.0.1:$PORT/sets.zip

[datastore onefile]
type = ftp
url = ftp://127.0.0.1:$PORT/small.txt
CONF

check "mlfs check accepts the config" "$MLFS" check mlfs.conf
mount_fg mlfs.conf "$T_DIR/mnt" || { not_ok "mount came up"; t_finish; exit 1; }
M=$T_DIR/mnt
F=$M/datastores/f
LOG=$T_DIR/mount.mnt.log

# --- listing and reading
same "ls lists the server's folder (libcurl's listing parser)" \
	"big.bin cut.bin empty fresh gone.bin links many mid.bin rand.bin sets.zip small.txt sub with space.txt ünïcödé.txt" \
	"$(ls "$F" | xargs)"
same "ls -l shows a file's size" 20971520 "$(ls -l "$F" | awk '$NF == "big.bin" {print $5}')"
same "stat shows the size" 10 "$(stat -c %s "$F/small.txt")"
same "... and the date the server has (to the minute, from a listing)" \
	"$(date -u -r "$P/small.txt" +%Y-%m-%dT%H:%M)" "$(date -u -r "$F/small.txt" +%Y-%m-%dT%H:%M)"
check "a folder is a folder" test -d "$F/sub/deeper"
same "cat reads a small file" "hello ftp" "$(cat "$F/small.txt")"
same "a name with a space reads" "spaced" "$(cat "$F/with space.txt")"
same "a name in UTF-8 reads" "unicode" "$(cat "$F/ünïcödé.txt")"
same "a nested file reads" "deep" "$(cat "$F/sub/deeper/deep.txt")"
retrs() { grep -c "\"RETR $1\"" "$FTP_DIR/vsftpd.log"; }
same "a 20 MiB file reads whole, byte for byte" "$(sha "$P/big.bin")" "$(sha "$F/big.bin")"
# One per fetch would be 5 or more; one stream kept running makes it 1: a read-ahead fetch
# that reaches ftp_streams_read before the fetch just below it has taken the stream waits
# (20 ms at most) for it rather than start a RETR of its own. 2 leaves room for a machine so
# busy that the fetch below comes later than that.
check "... through at most 2 RETRs (one kept running, not one per fetch): $(retrs big.bin)" \
	test "$(retrs big.bin)" -le 2
same "reads at random offsets from 4 threads of one open, uncached, return the server's bytes" \
	ok "$(random_reads "$P/rand.bin" "$F/rand.bin" 2>&1)"
same_at_offsets "reads at random offsets (REST) return the server's bytes" "$P/big.bin" "$F/big.bin"
same "an empty folder lists empty" "" "$(ls "$F/empty")"
fails "a missing file is ENOENT" "No such file" stat "$F/nope"
fails "a missing folder is ENOENT" "No such file" ls "$F/nodir"
fails "a file is not a folder (ENOTDIR)" "Not a directory" ls "$F/small.txt/x"
fails "a write is refused: read-only (EROFS)" "Read-only file system" touch "$F/new.txt"
fails "so is mkdir" "Read-only file system" mkdir "$F/newdir"
fails "a datastore whose url is a file lists as missing" "No such file" ls "$M/datastores/onefile"
check "... and the log says an ftp url names a folder" grep -q "datastore onefile: .*is no folder" "$LOG"
same "a zip on the server, as a dataset's source, is shown extracted" "zipped member" \
	"$(cat "$M/datasets/zipped/dir/m.txt" 2>&1)"

# --- symbolic links on the server: what it follows is shown; loops and dead ends are not
L=$F/links
same "a folder of links lists the targets the server gives (none dead, none a loop)" \
	"data.txt dirlink link.txt real" "$(ls "$L" | xargs)"
same "a link to a file is that file, with its size (not the link's)" "regular file 5" \
	"$(ls -l "$L" >/dev/null; stat -c '%F %s' "$L/link.txt")"
same "... and reads as it" "data" "$(cat "$L/link.txt")"
check "a link to a folder beside it is a folder" test -d "$L/dirlink"
same "... whose files read" "in real" "$(cat "$L/dirlink/f.txt")"
check "a link to its own folder or above it is left out, and the log says why once" \
	test "$(grep -c 'a link to a folder outside the datastore or above the link' "$LOG")" -eq 1
check "a name with a control character (curl cannot ask for it) is left out, and said" \
	grep -q 'links/ta?b.txt: a name with a control character' "$LOG"
DL=$M/datasets/links
same "in a dataset (a trusted listing) too: a linked file's size is its target's" 5 \
	"$(ls -l "$DL" >/dev/null; stat -c %s "$DL/link.txt")"
same "... its bytes" "data" "$(cat "$DL/link.txt")"
same "... and a walk of the tree ends, each file once per name" \
	"data.txt dirlink dirlink/f.txt link.txt real real/f.txt" \
	"$(cd "$DL" && timeout 20 find . -mindepth 1 | sed 's|^\./||' | sort | xargs)"

# --- FTPS, logins
same "ftps:// with ca_file lists over explicit TLS" "deeper inner.txt tls.bin" \
	"$(ls "$M/datastores/tls" | xargs)"
same "... and reads, byte for byte" "$(sha "$P/sub/tls.bin")" "$(sha "$M/datastores/tls/tls.bin")"
check "... the server saw AUTH TLS and the login of password_file" \
	grep -q 'OK LOGIN: Client "127.0.0.1"' "$FTP_DIR/vsftpd.log"
check "... TLS was asked for" grep -qE '"AUTH (TLS|SSL)"' "$FTP_DIR/vsftpd.log"
fails "ftps:// whose certificate nobody trusts fails with EIO" "Input/output error" \
	ls "$M/datastores/untrusted"
check "... the log says why (the certificate)" grep -qi "certificate" "$LOG"
fails "a refused password is EACCES" "Permission denied" ls "$M/datastores/badpass"
check "... the password is in no log" bash -c "! grep -q not-the-password '$LOG'"

# --- a dataset from an ftp:// URL: epochs
D=$M/datasets/many
want=$(seq -w 0 99 | sed 's/^/00/' | sha256sum)
same "a first epoch of 100 small files reads their bytes" "$want" "$(read_epoch "$D" 'f*')"
before=$(stat_of "$M" datastore.dataset:many.requests)
sleep 1.2
same "the second epoch reads the same bytes" "$want" "$(read_epoch "$D" 'f*')"
same "... and asks the server nothing (trusted listing, the cache)" "$before" \
	"$(stat_of "$M" datastore.dataset:many.requests)"
next_job_epoch mlfs.conf "$M" dataset:many "$D" 'f*' "$want"
# under datastores/ too, within metadata_ttl: the same URL, size and listed date, so the
# dataset's cached copy, with no HEAD
ls "$F/many" >/dev/null
before=$(stat_of "$M" datastore.f.requests)
same "under datastores/ a settled file listed within metadata_ttl reads" "0001" "$(cat "$F/many/f0001")"
same "... with no request (no HEAD: its listed size and date name the version, cached)" 0 \
	$(($(stat_of "$M" datastore.f.requests) - before))

# --- a file written this minute: its listed date names no version (a rewrite of the same
# size in the same minute would look the same), so the open asks (SIZE, MDTM: to the second)
X=$M/datasets/fresh
# both versions dated in the minute before this one, 30 s apart: in the past (a listing shows
# a date ahead of the server's clock with its year, not its time) and under 2 minutes old
minute=$(($(date +%s) / 60 * 60 - 60))
touch -d "@$((minute + 10))" "$P/fresh/x.txt"
# and one dated ahead of the server's clock, which a listing dates to the day (with its year)
echo cccc >"$P/fresh/ahead.txt"
touch -d "@$(($(date +%s) + 60))" "$P/fresh/ahead.txt"
ls "$X" >/dev/null
same "a file dated ahead of the server's clock reads" cccc "$(cat "$X/ahead.txt")"
before=$(stat_of "$M" datastore.dataset:fresh.requests)
same "a file written just now reads" aaaa "$(cat "$X/x.txt")"
same "... after a HEAD, then its RETR" 2 $(($(stat_of "$M" datastore.dataset:fresh.requests) - before))
echo bbbb >"$P/fresh/x.txt"
touch -d "@$((minute + 40))" "$P/fresh/x.txt"
echo dddd >"$P/fresh/ahead.txt"
touch -d "@$(($(date +%s) + 90))" "$P/fresh/ahead.txt"
unmount_fg "$M"
mount_fg mlfs.conf "$M" || { not_ok "the mount came up again"; t_finish; exit 1; }
ls "$X" >/dev/null	# as a job's walk does: the listing shows the same size and minute
same "rewritten in that minute with the same size, it reads anew in the next job" bbbb \
	"$(cat "$X/x.txt")"
same "... and so does the one dated to the day, rewritten that day" dddd "$(cat "$X/ahead.txt")"

# --- 8 readers at once keep their logins: each request does not log in anew
logins() { grep -c 'CONNECT: Client' "$FTP_DIR/vsftpd.log"; }
before=$(logins)
same "8 readers at once read 100 files' bytes" "$want" \
	"$(find "$F/many" -type f | xargs -P 8 -n 5 cat | sort | sha256sum)"
check "... logging in at most 16 times, not once per request: $(($(logins) - before))" \
	test $(($(logins) - before)) -le 16

# --- a RETR kept running: dropped when unused, and the server gone under it
same "a read left idle past half the timeout, then read on, is the server's bytes" ok \
	"$(idle_read "$P/mid.bin" "$F/mid.bin" "$FTP_DIR/vsftpd.log" 2>&1)"
"$FTP_SH" stop "$FTP_DIR"
"$FTP_SH" start "$FTP_DIR" "$PORT" >/dev/null || not_ok "vsftpd restarted"
same "the server gone midway through a read: EIO, not other bytes" EIO \
	"$(cut_read "$F/cut.bin" 2>&1)"
"$FTP_SH" start "$FTP_DIR" "$PORT" >/dev/null || not_ok "vsftpd restarted"

# --- faults: the server gone, then back
stat "$F/gone.bin" >/dev/null
"$FTP_SH" stop "$FTP_DIR"
start=$SECONDS
fails "a read with the server gone fails with EIO" "Input/output error" cat "$F/gone.bin"
check "... within timeout x (retries + 1) + 3 s" test $((SECONDS - start)) -le 7
"$FTP_SH" start "$FTP_DIR" "$PORT" >/dev/null || not_ok "vsftpd restarted"
same "after a restart the read works, no remount" "$(sha "$P/gone.bin")" "$(sha "$F/gone.bin")"

unmount_fg "$M"
t_finish
