#!/bin/bash
# azure_test.sh - the azure backend through a real mount over Azurite,
# Microsoft's emulator (scripts/server-azurite.sh), seeded and checked with
# Microsoft's own client (@azure/storage-blob, scripts/azure-blob.js):
# listings with a delimiter and continuation (a folder of 250 blobs in pages
# of list_chunk = 100), stat, whole and ranged reads, Shared Key, a SAS, a wrong key
# (EACCES with Azure's words in the log), an https://ACCOUNT.blob.core.
# windows.net source borrowing a configured datastore's endpoint and key,
# epochs of a dataset (the second and the next job's ask nothing), a blob
# replaced behind the mount (while open too: ESTALE); writes through datastores/ (Put Blob, a block
# blob, append, truncate, touch, mkdir, rmdir, mv of a file and a folder,
# rm, a read-only SAS refused at close), mv through a Copy Blob Azure says
# "pending" (waited for) or "failed" (EIO, the source kept; a proxy says so), a job's output to an Azure URL
# uploaded at mlfs umount, mlfs sync killed -9 midway through a 120 MiB
# block upload and resumed (and started over when the blocks are gone), a
# job's azure input at input/ and its output kept while Azure is down, then
# delivered by mlfs sync;
# a server that is gone fails a read with EIO in time, a restarted one
# serves again.  Usage: azure_test.sh MLFS POSIX_CHECK
set -u
MLFS=$(readlink -f "$1")
POSIX_CHECK=$(readlink -f "$2")	# unused: blobs have no links, modes or owners
TOP=$(cd "$(dirname "$0")/../.." && pwd)
AZ_SH=$TOP/scripts/server-azurite.sh
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1
: "$POSIX_CHECK"

AZ_DIR=$T_DIR/azurite
VIEW_PID= SYNC_PID= PROXY_PID=
t_cleanup() {
	[ -n "$SYNC_PID" ] && kill -KILL "$SYNC_PID" 2>/dev/null
	awk -v d="$T_DIR/" '$3 == "fuse.mlfs" && index($2, d) == 1 { print $2 }' /proc/self/mounts |
		while read -r m; do fusermount3 -u -z "$m" 2>/dev/null; done
	[ -n "$VIEW_PID" ] && kill "$VIEW_PID" 2>/dev/null
	[ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null
	server_cleanup "$AZ_SH" "$AZ_DIR"
}
trap 't_cleanup; rm -rf "$T_DIR"' EXIT

PORT=$(free_port) || { not_ok "a free port"; t_finish; exit 1; }
"$AZ_SH" start "$AZ_DIR" "$PORT" >/dev/null || { not_ok "azurite started"; t_finish; exit 1; }
ok "azurite started on 127.0.0.1:$PORT"
export AZ_ENDPOINT=http://127.0.0.1:$PORT/devstoreaccount1 AZ_ACCOUNT=devstoreaccount1
export AZ_KEY=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==
unset AZURE_STORAGE_ACCOUNT AZURE_STORAGE_KEY AZURE_STORAGE_CONNECTION_STRING AZURE_STORAGE_SAS_TOKEN
blob() { node "$TOP/scripts/azure-blob.js" "$@"; }

# --- seed: the client for the files; 250 tiny blobs in parallel batches
mkdir -p seed mnt
printf 'hello azure\n' >seed/a.txt
head -c 3145739 /dev/urandom >seed/rand.bin
head -c 1234567 /dev/urandom >seed/cold.bin
echo "odd name" >"seed/with space, plus+ and =.txt"
blob mkcontainer data || { not_ok "the client made a container"; t_finish; exit 1; }
blob put data sets/a.txt seed/a.txt &&
	blob put data sets/sub/rand.bin seed/rand.bin &&
	blob put data sets/cold.bin seed/cold.bin &&
	blob put data "sets/with space, plus+ and =.txt" "seed/with space, plus+ and =.txt" ||
	{ not_ok "the client seeded the container"; t_finish; exit 1; }
mkdir -p seed/many
for i in $(seq -w 0 0249); do printf '%s\n' "$i" >"seed/many/f$i"; done
node -e '
const path = require("path"), fs = require("fs");
const { BlobServiceClient, StorageSharedKeyCredential } =
	require(path.join(process.argv[1], "build/tools/azclient/node_modules/@azure/storage-blob"));
const c = new BlobServiceClient(process.env.AZ_ENDPOINT,
	new StorageSharedKeyCredential(process.env.AZ_ACCOUNT, process.env.AZ_KEY)).getContainerClient("data");
const names = fs.readdirSync("seed/many");
(async () => {
	for (let i = 0; i < names.length; i += 50)
		await Promise.all(names.slice(i, i + 50).map((n) =>
			c.getBlockBlobClient("sets/many/" + n).uploadFile("seed/many/" + n)));
})().catch((e) => { console.error(e.message); process.exit(1); });' "$TOP" ||
	{ not_ok "the client seeded 250 blobs"; t_finish; exit 1; }
same "the client lists the 250 seeded blobs" 250 "$(blob ls data sets/many/ | wc -l)"
SAS=$(blob sas data)

# A proxy in front of Azurite, for what Azurite never does: a Copy Blob
# that is still "pending" when it answers (Azurite copies at once).  It
# forwards every request as it came (Shared Key signs no host) and logs it;
# while the file copy-pending holds N, it says "pending" in the answer to
# a Copy Blob and to the next N HEADs of its destination (its progress
# growing by a byte each time); while the file
# copy-failed exists, "pending" to the copy, then "failed" to every HEAD;
# while copy-stalled exists, "pending" to all, progress 0 bytes.  It answers
# an Abort Copy Blob itself (Azurite's copy is long over), logging whether
# it named the copy id Azurite gave.
cat >proxy.py <<'PY'
import os, sys
sys.path.insert(0, sys.argv[3])
from http_proxy import Proxy, serve

copying = [None]
copy_id = [None]

def pending_heads():
    try:
        with open("copy-pending") as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0

class CopyStates(Proxy):
    status = None

    def note(self):
        """Decides the x-ms-copy-status to say instead of Azurite's (None: Azurite's)."""
        self.status = self.progress = None	# one handler serves each request of a kept connection
        if self.headers.get("x-ms-copy-action") == "abort":
            named = "copyid=%s" % copy_id[0] in self.path.split("?", 1)[-1].split("&")
            return "abort of the copy it started" if named else "abort of another copy"
        if self.headers.get("x-ms-copy-source"):
            copying[0] = self.path.split("?")[0]
            if pending_heads() or os.path.exists("copy-failed") or os.path.exists("copy-stalled"):
                self.status = "pending"
        elif self.command == "HEAD" and self.path.split("?")[0] == copying[0]:
            n = pending_heads()
            if os.path.exists("copy-failed"):
                self.status = "failed"
            elif os.path.exists("copy-stalled"):
                self.status = "pending"
            elif n:
                with open("copy-pending", "w") as f:
                    f.write("%d\n" % (n - 1))
                self.status = "pending"
                self.progress = "%d/3145739" % (100 - n)
        return self.status or ""

    def answer_instead(self, body):
        if self.headers.get("x-ms-copy-action") == "abort":
            return (204, b"")
        return None

    def rewrite(self, headers):
        for n, v in headers:
            if n.lower() == "x-ms-copy-id" and self.headers.get("x-ms-copy-source"):
                copy_id[0] = v
        if not self.status:
            return headers
        progress = "0/3145739" if os.path.exists("copy-stalled") else self.progress
        out = [(n, v) for n, v in headers if not n.lower().startswith("x-ms-copy-status")
               and not (progress and n.lower() == "x-ms-copy-progress")]
        out.append(("x-ms-copy-status", self.status))
        if progress:
            out.append(("x-ms-copy-progress", progress))
        if self.status == "failed":
            out.append(("x-ms-copy-status-description", "500 InternalError: copy broke"))
        return out

serve(CopyStates)
PY
PROXY_PORT=$(free_port) || { not_ok "a free port for the proxy"; t_finish; exit 1; }
setsid python3 proxy.py "$PROXY_PORT" "$PORT" "$TOP/tests/integration" </dev/null >>proxy.log 2>&1 &
PROXY_PID=$!
for _ in $(seq 1 100); do port_free "$PROXY_PORT" || break; sleep 0.05; done

cat >mlfs.conf <<CONF
[mlfs]
state_dir = state
cache_dir = cache
timeout = 2
retries = 1
read_ahead_files = 0

[datastore az]
type = azure
endpoint = $AZ_ENDPOINT
account = devstoreaccount1
key = $AZ_KEY
container = data
# what a listing said is used 2 s, not 5: a shorter wait past it below
metadata_ttl = 2
# pages of 100 names (not 5,000): a listing's continuation without seeding 5,000 blobs
list_chunk = 100

[datastore viasas]
type = azure
endpoint = $AZ_ENDPOINT
account = devstoreaccount1
sas = $SAS
container = data
root = /sets/sub

[datastore viaproxy]
type = azure
endpoint = http://127.0.0.1:$PROXY_PORT/devstoreaccount1
account = devstoreaccount1
key = $AZ_KEY
container = data

[datastore bad]
type = azure
endpoint = $AZ_ENDPOINT
account = devstoreaccount1
key = AAAAvdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==
container = data

[dataset many]
source = https://devstoreaccount1.blob.core.windows.net/data/sets/many/
CONF

check "mlfs check accepts the config" "$MLFS" check mlfs.conf
mount_fg mlfs.conf "$T_DIR/mnt" || { not_ok "mount came up"; t_finish; exit 1; }
M=$T_DIR/mnt
A=$M/datastores/az
LOG=$T_DIR/mount.mnt.log

# --- listing and reading
same "ls shows the container's top folder" "sets" "$(ls "$A" | xargs)"
same "ls shows blobs and prefixes" "a.txt cold.bin many sub with space, plus+ and =.txt" \
	"$(ls "$A/sets" | tr '\n' ' ' | sed 's/ $//')"
same "stat shows a blob's size" 3145739 "$(stat -c %s "$A/sets/sub/rand.bin")"
check "a prefix is a folder" test -d "$A/sets/sub"
same "cat reads a blob" "hello azure" "$(cat "$A/sets/a.txt")"
same "a name with spaces, + and = reads" "odd name" "$(cat "$A/sets/with space, plus+ and =.txt")"
same "a whole read is the seeded file" "$(sha seed/rand.bin)" "$(sha "$A/sets/sub/rand.bin")"
same_at_offsets "reads at random offsets (signed ranges) return the seeded bytes" seed/rand.bin \
	"$A/sets/sub/rand.bin"
fails "a missing blob is ENOENT" "No such file" stat "$A/sets/nope"
fails "a blob is not a folder (ENOTDIR)" "Not a directory" ls "$A/sets/a.txt/x"
before=$(stat_of "$M" datastore.az.requests)
n=$(ls "$A/sets/many" | wc -l)
same "a folder of 250 blobs lists completely (past two pages of list_chunk = 100)" 250 "$n"
same "... in three listings" 3 $(($(stat_of "$M" datastore.az.requests) - before))
same "... every one of them, by name" "$(ls seed/many | sort | sha256sum)" \
	"$(ls "$A/sets/many" | sort | sha256sum)"

# --- a blob replaced while open: a read past what was fetched fails ESTALE, never mixes versions
head -c $((128 << 20)) /dev/urandom >seed/open.bin
head -c $((128 << 20)) /dev/urandom >seed/open2.bin
blob put data sets/open.bin seed/open.bin
got=$(python3 - "$A/sets/open.bin" "$TOP/scripts/azure-blob.js" <<'PY'
import errno, subprocess, sys
f = open(sys.argv[1], "rb", buffering=0)
f.read(1 << 20)
subprocess.run(["node", sys.argv[2], "put", "data", "sets/open.bin", "seed/open2.bin"], check=True)
f.seek(100 << 20)	# past the read-ahead (32 MiB at most): fetched now, If-Match the old ETag
try:
    f.read(1 << 20)
    print("read")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
PY
)
same "a blob replaced while open fails the next fetch with ESTALE (no mix of versions)" ESTALE "$got"
same "... and the next open reads the new blob" "$(sha seed/open2.bin)" "$(sha "$A/sets/open.bin")"
blob put data sets/open.bin seed/a.txt
rm -f seed/open.bin seed/open2.bin

# --- writes: Put Blob, blocks, folders, rename, delete; the client checks each
W=$A/w
wls() { blob ls data w/ | xargs; }
check "mkdir makes a folder" mkdir "$W"
same "... as a marker blob the client sees" "w/ 0" "$(wls)"
same "an empty folder lists empty" "" "$(ls -A "$W" 2>&1)"
check "cp writes a small file (Put Blob)" cp seed/a.txt "$W/small.txt"
same "... the client reads it back" "hello azure" "$(blob get data w/small.txt)"
head -c 20971529 /dev/urandom >seed/big.bin
check "cp writes a 20 MiB file" cp seed/big.bin "$W/big.bin"
same "... the client reads the same bytes" "$(sha seed/big.bin)" \
	"$(blob get data w/big.bin | sha256sum | cut -d' ' -f1)"
same "... committed as a block blob of 8 MiB blocks" "8388608 8388608 4194313" \
	"$(blob blocks data w/big.bin committed | awk '{print $2}' | xargs)"
same "... and the mount reads it back" "$(sha seed/big.bin)" "$(sha "$W/big.bin")"
check "an append (>>) rewrites the blob" sh -c "printf 'more\n' >>'$W/small.txt'"
same "... the client sees both lines" "hello azure more" "$(blob get data w/small.txt | xargs)"
check "truncate shortens a blob" truncate -s 5 "$W/small.txt"
same "... the client sees 5 bytes" "hello" "$(blob get data w/small.txt)"
check "touch makes an empty blob" touch "$W/empty"
same "... that stat shows writable" "-rw-r--r-- 0" "$(stat -c '%A %s' "$W/empty")"
check "mv renames a blob (Copy Blob, then Delete Blob)" mv "$W/big.bin" "$W/moved.bin"
same "... the client finds it under the new name only" \
	"w/ 0 w/empty 0 w/moved.bin 20971529 w/small.txt 5" "$(wls)"
same "... with its bytes" "$(sha seed/big.bin)" "$(sha "$W/moved.bin")"
mkdir "$W/sub" && echo sub >"$W/sub/f"
check "mv of a folder works (EXDEV: mv copies it and removes the old)" mv "$W/sub" "$W/sub2"
same "... the client sees the new folder only" "sub" "$(blob get data w/sub2/f; blob ls data w/sub/)"
fails "rmdir of a folder with files is ENOTEMPTY" "not empty" rmdir "$W"
fails "ln: EPERM (a container holds no links), not EROFS" "Operation not permitted" \
	ln "$W/small.txt" "$W/hard.txt"
fails "ln -s: EPERM" "Operation not permitted" ln -s small.txt "$W/soft.txt"
# a blob "a" and blobs under "a/" alike: a folder shows one entry of a name (S3's rule)
: >seed/empty0
echo bytes >seed/bytes.txt
blob put data twins/marker seed/empty0 && blob put data twins/marker/in.txt seed/a.txt &&
	blob put data twins/real seed/bytes.txt && blob put data twins/real/in.txt seed/a.txt ||
	not_ok "the twins were put"
same "a blob and a folder of one name are listed once each" "marker real" "$(echo $(ls "$A/twins"))"
check "... a folder hides an empty blob of its name" test -d "$A/twins/marker"
check "... a blob with bytes hides the folder" test -f "$A/twins/real"
sleep 2.2	# past what the listing said (metadata_ttl): a HEAD, then a look beneath
check "... and a stat from the server says the same" sh -c "test -d '$A/twins/marker' && test -f '$A/twins/real'"
check "rm deletes a blob" rm "$W/empty"
fails "... which is gone" "No such file" stat "$W/empty"
# a blob being written is committed at its close: rm of it meanwhile means it never is,
# and a rename from it (which the close would undo) is EBUSY
exec 7>"$W/writing"
echo "never committed" >&7
same "ls -l shows a blob being written, at its staged size" "writing 16" \
	"$(ls -l "$W" | awk '$NF == "writing" {print $NF, $5}')"
fails "mv of a blob being written is EBUSY" "Device or resource busy" mv "$W/writing" "$W/moved2"
check "rm of a blob being written" rm "$W/writing"
exec 7>&-
same "its close commits nothing: the client lists no such blob" "" \
	"$(blob ls data w/writing | cut -d' ' -f1)"
mkdir "$W/wdir" && exec 7>"$W/wdir/f"
fails "rmdir of a folder whose only blob is being written is ENOTEMPTY" "Directory not empty" \
	rmdir "$W/wdir"
exec 7>&-
check "once closed and removed, the folder goes" bash -c "rm '$W/wdir/f' && rmdir '$W/wdir'"
# every open of a blob shares one staged copy: two writers and a reader see each other's
# bytes, and neither's commit replaces the other's
same "two writers and a reader of one blob see each other's bytes" ok \
	"$(python3 "$TOP/tests/integration/two_writers.py" "$W/two")"
same "... and the client gets what both wrote" "$(printf 'A%.0s' {1..1000}; printf 'B%.0s' {1..1000}; printf 'CCCCCCCCCC')" \
	"$(blob get data w/two 2>/dev/null)"
# Azure stores a '\' in a blob's name as '/': such a name would land elsewhere, so it is refused
fails "a file named with a backslash is refused (Azure would make it a folder)" \
	"Invalid argument" sh -c "echo x > '$W/a\\b'"
fails "... as is mkdir of one" "Invalid argument" mkdir "$W/d\\e"
fails "... and a rename to one" "Invalid argument" python3 -c "import os; os.rename('$W/two', '$W/t\\\\wo')"
same "... and nothing was made" "" "$(blob ls data w/a | cut -d' ' -f1; blob ls data w/d | cut -d' ' -f1)"
fails "w\\two does not alias w/two" "No such file" stat "$A/w\\two"
fails "a write with a read-only SAS fails at close with EACCES" "Permission denied" \
	cp seed/a.txt "$M/datastores/viasas/x.txt"
check "rm -r empties the folder" rm -r "$W"
same "... the client lists nothing under w/" "" "$(wls)"

# --- a Copy Blob that Azure answers "pending": mv waits for it; one that fails loses nothing
P=$M/datastores/viaproxy
blob put data cp/a.bin seed/rand.bin
echo 14 >copy-pending
: >proxy.log
started=$(date +%s)
check "mv through a copy still pending when Azure answers it works" timeout 60 mv "$P/cp/a.bin" "$P/cp/b.bin"
took=$(($(date +%s) - started))
check "... after asking while it was pending (14 HEADs said so)" \
	test "$(grep -c '^HEAD /devstoreaccount1/data/cp/b.bin pending$' proxy.log)" -eq 14
check "... past 5 timeouts (10 s), as its progress moved (took ${took} s)" test "$took" -ge 11
check "... and then once more (success)" grep -q '^HEAD /devstoreaccount1/data/cp/b.bin$' proxy.log
same "... the client finds the new name only, with the bytes" "cp/b.bin 3145739 $(sha seed/rand.bin)" \
	"$(blob ls data cp/ | xargs) $(blob get data cp/b.bin | sha256sum | cut -d' ' -f1)"
rm -f copy-pending
touch copy-failed
fails "mv through a copy Azure says failed is EIO" "Input/output error" timeout 60 mv "$P/cp/b.bin" "$P/cp/c.bin"
check "... the log says the copy failed, Azure's words, and that the source is kept" grep -q \
	"datastore viaproxy: copy of cp/b.bin to cp/c.bin: Azure says failed (500 InternalError: copy broke); cp/b.bin is kept" \
	"$LOG"
rm -f copy-failed
same "... the source is still there, whole, and the failed copy is deleted" \
	"cp/b.bin 3145739 $(sha seed/rand.bin)" \
	"$(blob ls data cp/ | xargs) $(blob get data cp/b.bin | sha256sum | cut -d' ' -f1)"
same "... the mount shows the same" "b.bin" "$(ls "$P/cp")"
touch copy-stalled
: >proxy.log
started=$(date +%s)
fails "mv through a copy pending without progress gives up: ETIMEDOUT" "Connection timed out" \
	timeout 60 mv "$P/cp/b.bin" "$P/cp/d.bin"
took=$(($(date +%s) - started))
rm -f copy-stalled
check "... after 5 timeouts (10 s) without progress, not 10 minutes (took ${took} s)" \
	test "$took" -ge 9 -a "$took" -le 20
heads=$(grep -c '^HEAD /devstoreaccount1/data/cp/d.bin pending$' proxy.log)
check "... asking less and less often: at most once a second ($heads HEADs)" \
	test "$heads" -ge 8 -a "$heads" -le 20
check "... then aborts the copy it started (Abort Copy Blob with its copy id)" grep -q \
	'^PUT /devstoreaccount1/data/cp/d.bin?comp=copy&copyid=.* abort of the copy it started$' \
	proxy.log
check "... the log says so, with the progress seen" grep -q \
	"datastore viaproxy: copy of cp/b.bin to cp/d.bin: still pending after 10 s without progress (0/3145739 bytes copied): aborted; cp/b.bin is kept" \
	"$LOG"
same "... the source is still there, whole, and what the copy left is deleted" \
	"cp/b.bin 3145739 $(sha seed/rand.bin)" \
	"$(blob ls data cp/ | xargs) $(blob get data cp/b.bin | sha256sum | cut -d' ' -f1)"
same "... the mount shows the same" "b.bin" "$(ls "$P/cp")"
blob rm data cp/b.bin

# --- credentials
same "a SAS datastore lists and reads" "$(sha seed/rand.bin)" "$(sha "$M/datastores/viasas/rand.bin")"
fails "a wrong key is EACCES" "Permission denied" ls "$M/datastores/bad"
check "... the log says Azure's code and message" \
	grep -q "datastore bad: list /: AuthorizationFailure: Server failed to authenticate" "$LOG"
check "... and no key is in the log" bash -c "! grep -q 'Eby8vd\|AAAAvd' '$LOG'"

# --- a dataset from an https://ACCOUNT.blob.core.windows.net URL: epochs
D=$M/datasets/many
check "the URL borrowed the configured datastore's endpoint and key" \
	grep -q "datastore dataset:many: azure container data at $AZ_ENDPOINT, Shared Key" "$LOG"
want=$(seq -w 0 99 | sed 's/^/00/' | sha256sum)
same "a first epoch of 100 small blobs reads their bytes" "$want" "$(read_epoch "$D" 'f00*')"
before=$(stat_of "$M" datastore.dataset:many.requests)
sleep 1.2
same "the second epoch reads the same bytes" "$want" "$(read_epoch "$D" 'f00*')"
same "... and asks the server nothing" "$before" "$(stat_of "$M" datastore.dataset:many.requests)"

# --- a blob replaced behind the mount: a new open reads the new one
printf 'new azure\n' >seed/new.txt
cat "$A/sets/a.txt" >/dev/null
blob put data sets/a.txt seed/new.txt
sleep 2.2	# past what was listed (metadata_ttl)
same "a blob replaced on the server reads new at the next open" "new azure" "$(cat "$A/sets/a.txt")"

# --- a proxiML job's output to an Azure URL: uploaded at mlfs umount
# view NAME SPEC: worker 1's view of SPEC at $T_DIR/NAME, in the background.
view() {
	mkdir -p "$T_DIR/$1"
	"$MLFS" job -f mlfs.conf "$2" "$T_DIR/$1" --worker 1 2>"$T_DIR/view.$1.log" &
	VIEW_PID=$!
	for _ in $(seq 1 400); do
		is_mounted "$T_DIR/$1" && return 0
		kill -0 "$VIEW_PID" 2>/dev/null || break
		sleep 0.05
	done
	sed 's/^/#   /' "$T_DIR/view.$1.log"
	return 1
}
OUT_URL=https://devstoreaccount1.blob.core.windows.net/data/out
cat >azout.json <<JSON
{"name": "azout", "workers": [{"command": "true"}],
 "data": {"output": {"type": "azure", "path": "$OUT_URL/small/", "archive": false}}}
JSON
if view v1 azout.json; then
	printf 'azure 0.97\n' >"$T_DIR/v1/output/score.txt"
	check "mlfs umount uploads the output and exits 0" timeout 120 "$MLFS" umount "$T_DIR/v1"
	wait "$VIEW_PID"
	same "the client reads out/small/score.txt" "azure 0.97" "$(blob get data out/small/score.txt)"
else
	not_ok "the view with an azure output came up"
fi

# --- a 120 MiB output: mlfs sync killed -9 midway, then resumed
BIG=$((120 << 20))
head -c $BIG /dev/urandom >huge.bin
# killed_sync NAME: worker 1 of a job writing huge.bin to $OUT_URL/NAME/,
# its view unmounted with nothing uploaded, then an mlfs sync killed -9
# once it saved a resume token; the token in $token, its bytes in $done1.
killed_sync() {
	sed "s#$OUT_URL/small/#$OUT_URL/$1/#" azout.json >"$1.json"
	token= done1=
	view "$1" "$1.json" || { not_ok "the view with a 120 MiB azure output came up"; return 1; }
	check "a 120 MiB file is written to output/" timeout 120 cp huge.bin "$T_DIR/$1/output/huge.bin"
	staged=$(sed -n 's/^output_dir=//p' "$T_DIR/$1/.mlfs/mount")
	check "plain fusermount3 -u unmounts the view (nothing uploaded)" fusermount3 -u "$T_DIR/$1"
	wait "$VIEW_PID"
	"$MLFS" sync mlfs.conf >"sync1.$1.log" 2>&1 &
	SYNC_PID=$!
	st=0
	kill_once_saved "$SYNC_PID" "$staged/resume.json" || st=$?
	same "the first mlfs sync was killed midway" 137 "$st"
	SYNC_PID=
	token=$(jq -r .token "$staged/resume.json" 2>/dev/null)
	done1=$(jq -r .done "$staged/resume.json" 2>/dev/null)
	echo "# killed with done=$done1 of $BIG, token: $(printf '%s' "$token" | tr '\n' ' ')"
	check "... after saving a token with some blocks, not all" \
		test "${done1:-0}" -gt 0 -a "${done1:-0}" -lt "$BIG"
	same "... and no blob is committed yet" "" "$(blob ls data "out/$1/")"
}
# resumed_sync NAME: a second mlfs sync, its stderr in sync2.NAME.log; 0 when it delivered huge.bin.
resumed_sync() {
	local st=0
	timeout 300 "$MLFS" sync mlfs.conf 2>"sync2.$1.log" || st=$?
	same "a second mlfs sync exits 0" 0 "$st"
	same "... and the blob is byte-identical" "$(sha huge.bin)" \
		"$(blob get data "out/$1/huge.bin" | sha256sum | cut -d' ' -f1)"
}
nonce_of() { printf '%s\n' "$1" | sed -n 's/^nonce=//p'; }
# the committed blocks of out/NAME/huge.bin by the first 20 bytes of their ids: "COUNT mlfsNONCE"
blocks_of() { blob blocks data "out/$1/huge.bin" committed | cut -c1-20 | sort | uniq -c | xargs; }

if killed_sync huge; then
	nonce=$(nonce_of "$token")
	resumed_sync huge
	first=$(grep -m1 -o "uploading to azure $OUT_URL/huge/: [0-9.]* of" sync2.huge.log |
		awk '{print $5}')
	echo "# first progress line of the resumed run: $(grep -m1 uploading sync2.huge.log)"
	check "... its progress starts where the killed run stopped ($((done1 >> 20)) MiB)" \
		awk -v f="${first:-0}" -v d="$((done1 >> 20))" 'BEGIN { exit !(f >= d && f > 0) }'
	same "... committed from the killed upload's blocks (one nonce)" "15 mlfs$nonce" \
		"$(blocks_of huge)"
fi
# Blocks Azure no longer holds (it drops uncommitted blocks after a week;
# Azurite keeps them, so the token is made to name blocks never sent): the
# resumed upload's commit is refused, and it starts over once.
if killed_sync gone; then
	nonce=0000000000000000
	sed -i "s/nonce=[0-9a-f]*/nonce=$nonce/" "$staged/resume.json"
	resumed_sync gone
	check "... after saying the blocks were gone and starting over" \
		grep -q "no longer holds its blocks; starting over" sync2.gone.log
	blocks=$(blocks_of gone)
	check "... with blocks of a new nonce ($blocks)" \
		test "${blocks#15 mlfs}" != "$nonce" -a "${blocks%% *}" = 15
fi
rm -f huge.bin

# --- a job reading an azure input and writing an azure output while the server is gone:
# mlfs umount says it is not uploaded and keeps it; mlfs sync delivers it once it is back
cat >down.json <<JSON
{"name": "down", "type": "inference", "workers": [{"command": "true"}],
 "data": {"input": {"type": "azure",
                    "path": "https://devstoreaccount1.blob.core.windows.net/data/sets/sub/"},
          "output": {"type": "azure", "path": "$OUT_URL/down/", "archive": false}}}
JSON
if view v4 down.json; then
	same "an azure input shows at input/" "$(sha seed/rand.bin)" "$(sha "$T_DIR/v4/input/rand.bin")"
	printf 'kept\n' >"$T_DIR/v4/output/kept.txt"
	"$AZ_SH" stop "$AZ_DIR"
	st=0
	timeout 120 "$MLFS" umount "$T_DIR/v4" 2>umount.v4.log || st=$?
	wait "$VIEW_PID"
	check "with Azure down, mlfs umount exits non-zero" test "$st" -ne 0
	check "... saying it is not uploaded" grep -q "not uploaded to https://devstoreaccount1.blob.core.windows.net/data/out/down/" umount.v4.log
	"$AZ_SH" start "$AZ_DIR" "$PORT" >/dev/null || not_ok "azurite restarted"
	check "mlfs sync delivers it once Azure is back" timeout 120 "$MLFS" sync mlfs.conf
	same "... the client reads it" "kept" "$(blob get data out/down/kept.txt)"
else
	not_ok "the view with an azure input and output came up"
fi

# --- faults: the server gone, then back
stat "$A/sets/cold.bin" >/dev/null
"$AZ_SH" stop "$AZ_DIR"
start=$SECONDS
fails "a read with the server gone fails with EIO" "Input/output error" cat "$A/sets/cold.bin"
check "... within timeout x (retries + 1) + 3 s" test $((SECONDS - start)) -le 7
"$AZ_SH" start "$AZ_DIR" "$PORT" >/dev/null || not_ok "azurite restarted"
same "after a restart the read works, no remount" "$(sha seed/cold.bin)" "$(sha "$A/sets/cold.bin")"

next_job_epoch mlfs.conf "$M" dataset:many "$D" 'f00*' "$want"
unmount_fg "$M"
t_finish
