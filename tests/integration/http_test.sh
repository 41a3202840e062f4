#!/bin/bash
# http_test.sh - the http backend through a real mount over a real nginx
# (scripts/server-nginx.sh): listings in HTML and JSON, sizes, whole and
# ranged reads, a single-file dataset URL, epochs of a dataset of small files
# (no HEAD before a GET, none for the next job), ENOENT, EROFS, EPERM for mkfifo,
# and faults: a server that is gone or stalled fails a read with an error
# within timeout x (retries + 1) plus a little, a restarted one serves again
# without a remount, and a kept connection the server closes as a request
# comes (a proxy, http_proxy.py) costs no retry.  Usage: http_test.sh MLFS POSIX_CHECK
set -u
MLFS=$(readlink -f "$1")
POSIX_CHECK=$(readlink -f "$2")	# unused: the backend is read-only; kept for the common interface
NGINX_SH=$(cd "$(dirname "$0")/../../scripts" && pwd)/server-nginx.sh
HERE=$(cd "$(dirname "$0")" && pwd)		# http_proxy.py
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1
: "$POSIX_CHECK"

NGINX_DIR=$T_DIR/http
NGINX_PID=
PROXY_PID=
# Stops our nginx (by the PID it printed, should its pid file be gone) and the proxy before lib.sh's t_finish.
cleanup() {
	"$NGINX_SH" stop "$NGINX_DIR" 2>/dev/null
	[ -n "$NGINX_PID" ] && kill -QUIT "$NGINX_PID" 2>/dev/null
	[ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null
	NGINX_PID= PROXY_PID=
}
finish() {
	cleanup
	trap - EXIT
	t_finish
}
trap cleanup EXIT

W=$NGINX_DIR/www
mkdir -p "$W/sub/deeper" mnt
head -c $((20 << 20)) /dev/urandom >"$W/big.bin"
head -c $((24 << 20)) /dev/urandom >"$W/fault-gone.bin"
head -c $((24 << 20)) /dev/urandom >"$W/fault-stall.bin"
head -c $((24 << 20)) /dev/urandom >"$W/fault-mid.bin"
head -c $((4 << 20)) /dev/urandom >"$W/after.bin"
echo "hello web" >"$W/small.txt"
echo "inner" >"$W/sub/inner.txt"
echo "deep" >"$W/sub/deeper/deep.txt"
echo "spaced" >"$W/with space.txt"
echo "unicode" >"$W/ünïcödé.txt"
: >"$W/empty.bin"
# a dataset of small files whose dates have settled (an hour old), one file just written
mkdir -p "$W/many" "$W/recent"
for i in $(seq -w 0 99); do echo "00$i" >"$W/many/f00$i"; done
echo "twelve bytes" >"$W/many/changed.bin"
touch -d '1 hour ago' "$W/many"/*
echo "just now" >"$W/recent/now.txt"
# a folder a single reader walks: 100 files of 64 KiB
mkdir -p "$W/walk"
for i in $(seq -w 0 99); do head -c 65536 /dev/urandom >"$W/walk/w$i.bin"; done
touch -d '1 hour ago' "$W/walk"/*
# a tree of 12 folders of 3 files, walked by ls -R
for d in $(seq -w 0 11); do
	mkdir -p "$W/tree/c$d"
	for f in 1 2 3; do echo "$d$f" >"$W/tree/c$d/f$f"; done
done
touch -d '1 hour ago' "$W/tree"/*/*

PORT=$(free_port) || { not_ok "a free port"; finish; exit 1; }
NGINX_PID=$("$NGINX_SH" start "$NGINX_DIR" "$PORT") || { not_ok "nginx started"; finish; exit 1; }
ok "nginx started on 127.0.0.1:$PORT (pid $NGINX_PID)"
# A proxy in front of nginx that closes each connection unanswered at its second
# request, as a server closing a kept connection on its idle timer just as a
# request comes; the datastore behind it has retries = 0.
cat >proxy.py <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
from http_proxy import Proxy, serve

class DropSecond(Proxy):
    seen = 0

    def forward(self):
        self.seen += 1
        if self.seen == 2:
            print("DROP", self.command, self.path, flush=True)
            self.close_connection = True
            return
        super().forward()

    do_GET = do_HEAD = forward

serve(DropSecond)
PY
PROXY_PORT=$(free_port) || { not_ok "a free port for the proxy"; finish; exit 1; }
setsid python3 proxy.py "$PROXY_PORT" "$PORT" "$HERE" </dev/null >proxy.log 2>&1 &
PROXY_PID=$!
for _ in $(seq 1 100); do port_free "$PROXY_PORT" || break; sleep 0.05; done

cat >mlfs.conf <<CONF
[mlfs]
state_dir = state
cache_dir = cache
timeout = 2
retries = 1

[datastore web]
type = http
url = http://127.0.0.1:$PORT/

[datastore flaky]
type = http
url = http://127.0.0.1:$PROXY_PORT/
retries = 0

[datastore webjson]
type = http
url = http://127.0.0.1:$PORT/json/

[dataset one]
source = http://127.0.0.1:$PORT/big.bin

[dataset many]
source = web:/many

[dataset recent]
source = web:/recent

[dataset walk]
source = web:/walk

[dataset tree]
source = web:/tree
CONF

check "mlfs check accepts the config" "$MLFS" check mlfs.conf
mount_fg mlfs.conf "$T_DIR/mnt" || { not_ok "mount came up"; finish; exit 1; }
M=$T_DIR/mnt
D=$M/datastores

# --- listings and attributes
listing() { (cd "$1" && find . -mindepth 1 | LC_ALL=C sort); }
same "datastores are listed" "flaky web webjson" "$(ls "$D" | tr '\n' ' ' | sed 's/ $//')"
same "the HTML listing shows the served folder" "$(listing "$W")" "$(listing "$D/web")"
same "the JSON listing shows the served folder" "$(listing "$W")" "$(listing "$D/webjson")"
sizes() { (cd "$1" && find . -mindepth 1 -type f -printf '%p %s\n' | LC_ALL=C sort); }
same "stat sizes match (HTML)" "$(sizes "$W")" "$(sizes "$D/web")"
same "stat sizes match (JSON)" "$(sizes "$W")" "$(sizes "$D/webjson")"
same "folders are folders, files are read-only files" "dr-xr-xr-x -r--r--r--" \
	"$(stat -c %A "$D/web/sub") $(stat -c %A "$D/web/small.txt")"
sleep 6	# past the listing cache: attributes now come from HEAD
same "a HEAD after the cache expired tells a folder" "directory" "$(stat -c %F "$D/web/sub/deeper")"
same "a HEAD gives the size" "$(stat -c %s "$W/big.bin")" "$(stat -c %s "$D/webjson/big.bin")"
same "a HEAD gives the mtime" "$(stat -c %Y "$W/small.txt")" "$(stat -c %Y "$D/web/small.txt")"
same "the I/O size is the cache's block, as S3's" "1048576" "$(stat -c %o "$D/web/small.txt")"

# --- reads
same "a 20 MiB file reads whole and intact (HTML)" "$(sha "$W/big.bin")" "$(sha "$D/web/big.bin")"
same "a 20 MiB file reads whole and intact (JSON)" "$(sha "$W/big.bin")" "$(sha "$D/webjson/big.bin")"
same "a small file" "hello web" "$(cat "$D/web/small.txt")"
same "a file in a subfolder" "deep" "$(cat "$D/web/sub/deeper/deep.txt")"
same "a name with a space" "spaced" "$(cat "$D/web/with space.txt")"
same "a unicode name" "unicode" "$(cat "$D/webjson/ünïcödé.txt")"
same "an empty file" "0:" "$(stat -c %s "$D/web/empty.bin"):$(cat "$D/web/empty.bin")"
ranges_ok() {
	local src=$1 dst=$2 size off len
	size=$(stat -c %s "$src")
	for _ in $(seq 1 25); do
		off=$(((RANDOM * 32768 + RANDOM) % size))
		len=$((1 + RANDOM % 300000))
		if ! cmp -s <(tail -c +$((off + 1)) "$src" | head -c "$len") \
			<(dd if="$dst" iflag=skip_bytes,count_bytes skip="$off" count="$len" bs=65536 2>/dev/null); then
			echo "differs at $off+$len"
			return 1
		fi
	done
}
check "25 reads at random offsets match" ranges_ok "$W/after.bin" "$D/web/after.bin"
same "a read past the end is empty" "" "$(dd if="$D/web/small.txt" iflag=skip_bytes skip=100 bs=10 2>/dev/null)"

# --- the single-file dataset
same "a file URL dataset shows its file" "big.bin" "$(ls "$M/datasets/one")"
same "it reads intact" "$(sha "$W/big.bin")" "$(sha "$M/datasets/one/big.bin")"
fails "nothing else is in it" "No such file or directory" stat "$M/datasets/one/other.bin"

# --- epochs of a dataset of small files (a DataLoader's walk): a file the listing
# dates over two minutes back is opened from the listing with no HEAD and fetched
# with one GET; the second epoch asks nothing
reqs() { stat_of "$M" datastore.web.requests; }
heads() { grep -c "\"HEAD /$1" "$NGINX_DIR/access.log"; }
ls "$M/datasets/many" >/dev/null
before=$(reqs)
first=$(read_epoch "$M/datasets/many" 'f00*')
same "a first epoch of 100 small files reads their bytes" "$(seq -w 0 99 | sed 's/^/00/' | sha256sum)" "$first"
same "... with one request per file" 100 $(($(reqs) - before))
same "... none of them a HEAD" 0 "$(heads many/f)"
before=$(reqs)
same "a second epoch reads the same bytes" "$first" "$(read_epoch "$M/datasets/many" 'f00*')"
same "... with no request" 0 $(($(reqs) - before))
# a kept connection the server closes as a request comes: that request is made again at
# once on a new connection, and is no retry (the datastore has none)
got=""
for i in 01 02 03 04 05 06; do got="$got$(cat "$D/flaky/many/f00$i" 2>&1) "; done
same "reads over kept connections a server closes at their second request succeed" \
	"0001 0002 0003 0004 0005 0006 " "$got"
check "... the server did close some: $(grep -c '^DROP' proxy.log)" grep -q '^DROP' proxy.log
# rewritten on the server after the listing, to another size under the same date
printf 'now twenty-two bytes\n' >"$W/many/changed.bin"
touch -d '1 hour ago' "$W/many/changed.bin"
fails "a listed file whose size changed on the server fails, never mixes versions" \
	"Stale file handle" cat "$M/datasets/many/changed.bin"
# a file written just now may change again within the minute its listing shows: HEADed
ls "$M/datasets/recent" >/dev/null
same "a file dated within two minutes reads" "just now" "$(cat "$M/datasets/recent/now.txt")"
same "... after a HEAD" 1 "$(heads recent/now.txt)"

# --- read-ahead across files: the open of a listed file queues the 32 its folder listed
# next, fetched whole into the cache in the background; a single reader's next files
# are then read with no request
ls "$M/datasets/walk" >/dev/null
before=$(reqs)
pf() { echo $(($(stat_of "$M" datastore.web.prefetched) - pf0)); }
pf0=$(stat_of "$M" datastore.web.prefetched)
same "the walk's first file reads" "$(sha "$W/walk/w00.bin")" "$(sha "$M/datasets/walk/w00.bin")"
for _ in $(seq 1 50); do [ "$(pf)" -ge 32 ] && break; sleep 0.1; done
same "... and the next 32 files are fetched ahead (datastore.web.prefetched)" 32 "$(pf)"
same "... with one GET each, 33 in all" 33 $(($(reqs) - before))
before=$(reqs)
walk() { for i in $(seq -w 1 32); do cat "$1/w$i.bin"; done | sha256sum; }
same "the reader's next 32 files read intact" "$(walk "$W/walk")" "$(walk "$M/datasets/walk")"
for _ in $(seq 1 50); do [ "$(pf)" -ge 64 ] && break; sleep 0.1; done
same "... with no request of their own: 32 GETs, for the files their opens queued" \
	32 $(($(reqs) - before))
sleep 0.3
same "a walk that stops leaves 32 files fetched past it, no more" 64 "$(pf)"

# --- listings read ahead: a trusted folder's listing queues its subfolders to be listed
stat "$M/datasets/tree" >/dev/null
quiet_of "$M"
before=$(reqs)
chmod 000 "$W/tree/c05"		# nginx answers its listing 403 meanwhile
ls "$M/datasets/tree" >/dev/null
quiet_of "$M"
same "listing a tree's top folder lists its 12 folders ahead: 13 requests" 13 $(($(reqs) - before))
chmod 755 "$W/tree/c05"
before=$(reqs)
kept=$(stat_of "$M" datastore.web.listings_remembered)
same "ls -R of the tree shows every file" "$(cd "$W/tree" && ls -R)" "$(cd "$M/datasets/tree" && ls -R)"
same "... and asks the server once: the folder whose listing ahead failed (403), kept nowhere" \
	1 $(($(reqs) - before))
same "... its 11 other folders answered from the listings read ahead" 11 \
	$(($(stat_of "$M" datastore.web.listings_remembered) - kept))

# --- errors
fails "a missing file is ENOENT" "No such file or directory" cat "$D/web/nope.txt"
fails "a missing folder is ENOENT" "No such file or directory" ls "$D/web/nope/"
fails "creating a file is EROFS" "Read-only file system" touch "$D/web/new.txt"
fails "overwriting a file is EROFS" "Read-only file system" sh -c "echo x >'$D/web/small.txt'"
fails "mkdir is EROFS" "Read-only file system" mkdir "$D/web/newdir"
fails "rm is EROFS" "Read-only file system" rm -f "$D/web/small.txt"
fails "a dataset is read-only too" "Read-only file system" touch "$M/datasets/one/x"
fails "mkfifo is EPERM (a web server holds no special file), never ENOSYS" \
	"Operation not permitted" mkfifo "$D/web/fifo"
fails "so is binding a unix socket" "Operation not permitted" \
	python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('$D/web/sock')"
same "the log says it once for the datastore" 1 \
	"$(grep -c "datastore web (http): special files" "$T_DIR/mount.mnt.log")"
fails "mkfifo in a dataset is EROFS, as every change there" "Read-only file system" \
	mkfifo "$M/datasets/one/fifo"
check "df works on a web datastore" df "$D/web"

# --- faults: the server goes away (read files never read before: no cache has them)
stat "$D/web/fault-gone.bin" "$D/web/fault-stall.bin" "$D/web/fault-mid.bin" >/dev/null
"$NGINX_SH" stop "$NGINX_DIR"
NGINX_PID=
start=$SECONDS
fails "a read with the server gone fails with EIO" "Input/output error" cat "$D/web/fault-gone.bin"
check "... within timeout x (retries + 1) + 3 s" test $((SECONDS - start)) -le 7
grep -q "web: .*fault-gone.bin" "$T_DIR/mount.mnt.log" && ok "the failure is logged with the URL" ||
	not_ok "the failure is logged with the URL"

NGINX_PID=$("$NGINX_SH" start "$NGINX_DIR" "$PORT") || not_ok "nginx restarted"
same "after a restart the next read works, no remount" "$(sha "$W/fault-gone.bin")" "$(sha "$D/web/fault-gone.bin")"

# a stalled server: it accepts connections but never answers
kill -STOP "$NGINX_PID" $(pgrep -P "$NGINX_PID")
start=$SECONDS
if cat "$D/web/fault-stall.bin" >/dev/null 2>"$T_DIR/stall.err"; then
	not_ok "a read from a stalled server fails"
elif grep -qE "Input/output error|Connection timed out" "$T_DIR/stall.err"; then
	ok "a read from a stalled server fails ($(cat "$T_DIR/stall.err" | sed 's/.*: //'))"
else
	not_ok "a read from a stalled server fails with EIO or ETIMEDOUT: $(cat "$T_DIR/stall.err")"
fi
check "... within timeout x (retries + 1) + 3 s, no hang" test $((SECONDS - start)) -le 7
kill -CONT $(pgrep -P "$NGINX_PID") "$NGINX_PID"
same "once it runs again the read works" "$(sha "$W/fault-stall.bin")" "$(sha "$D/web/fault-stall.bin")"

# the server dies in the middle of a read
python3 - "$D/web/fault-mid.bin" "$NGINX_SH" "$NGINX_DIR" >"$T_DIR/mid.out" 2>&1 <<'PY'
import errno, subprocess, sys, time
path, script, ndir = sys.argv[1:4]
with open(path, "rb", buffering=0) as f:
    f.read(65536)
    subprocess.run([script, "stop", ndir], check=True)
    t = time.monotonic()
    try:
        f.seek(20 << 20)
        while f.read(1 << 20):
            pass
        print("read succeeded")
    except OSError as e:
        print("errno", errno.errorcode.get(e.errno, e.errno), "after %.1f s" % (time.monotonic() - t))
PY
NGINX_PID=
if grep -qE "^errno EIO after [0-6]\." "$T_DIR/mid.out"; then
	ok "a server stopped mid-read fails the read with EIO in time ($(cat "$T_DIR/mid.out"))"
else
	not_ok "a server stopped mid-read fails the read with EIO in time: $(cat "$T_DIR/mid.out")"
fi
NGINX_PID=$("$NGINX_SH" start "$NGINX_DIR" "$PORT") || not_ok "nginx restarted"
same "and after a restart the file reads whole" "$(sha "$W/fault-mid.bin")" "$(sha "$D/web/fault-mid.bin")"
check "listings work again" test -n "$(ls "$D/webjson")"

# the next job: a new mount lists the dataset's folder and reads its files from the
# cache, named by URL, size and the listing's date, with no request per file
next_job_epoch mlfs.conf "$M" web "$M/datasets/many" 'f00*' "$first"

unmount_fg "$M"
finish
