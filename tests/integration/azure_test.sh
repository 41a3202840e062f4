#!/bin/bash
# azure_test.sh - the azure backend through a real mount over Azurite,
# Microsoft's emulator (scripts/server-azurite.sh), seeded and checked with
# Microsoft's own client (@azure/storage-blob, scripts/azure-blob.js):
# listings with a delimiter and continuation (a folder of 5,050 blobs, past
# one page), stat, whole and ranged reads, Shared Key, a SAS, a wrong key
# (EACCES with Azure's words in the log), an https://ACCOUNT.blob.core.
# windows.net source borrowing a configured datastore's endpoint and key,
# epochs of a dataset (the second and the next job's ask nothing), a blob
# replaced behind the mount, and a server that is gone fails a read with
# EIO in time, a restarted one serves again.  Usage: azure_test.sh MLFS POSIX_CHECK
set -u
MLFS=$(readlink -f "$1")
POSIX_CHECK=$(readlink -f "$2")	# unused: the backend is read-only for now
TOP=$(cd "$(dirname "$0")/../.." && pwd)
AZ_SH=$TOP/scripts/server-azurite.sh
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1
: "$POSIX_CHECK"

AZ_DIR=$T_DIR/azurite
t_cleanup() { server_cleanup "$AZ_SH" "$AZ_DIR"; }
trap 't_cleanup; rm -rf "$T_DIR"' EXIT

PORT=$(free_port) || { not_ok "a free port"; t_finish; exit 1; }
"$AZ_SH" start "$AZ_DIR" "$PORT" >/dev/null || { not_ok "azurite started"; t_finish; exit 1; }
ok "azurite started on 127.0.0.1:$PORT"
export AZ_ENDPOINT=http://127.0.0.1:$PORT/devstoreaccount1 AZ_ACCOUNT=devstoreaccount1
export AZ_KEY=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==
unset AZURE_STORAGE_ACCOUNT AZURE_STORAGE_KEY AZURE_STORAGE_CONNECTION_STRING AZURE_STORAGE_SAS_TOKEN
blob() { node "$TOP/scripts/azure-blob.js" "$@"; }

# --- seed: the client for the files; 5,050 tiny blobs in parallel batches
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
for i in $(seq -w 0 5049); do printf '%s\n' "$i" >"seed/many/f$i"; done
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
	{ not_ok "the client seeded 5,050 blobs"; t_finish; exit 1; }
same "the client lists the 5,050 seeded blobs" 5050 "$(blob ls data sets/many/ | wc -l)"
SAS=$(blob sas data)

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

[datastore viasas]
type = azure
endpoint = $AZ_ENDPOINT
account = devstoreaccount1
sas = $SAS
container = data
root = /sets/sub

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
fails "a write is refused for now: read-only (EROFS)" "Read-only file system" touch "$A/new.txt"
n=$(ls "$A/sets/many" | wc -l)
same "a folder of 5,050 blobs lists completely (past one page of 5,000)" 5050 "$n"
same "... every one of them, by name" "$(ls seed/many | sort | sha256sum)" \
	"$(ls "$A/sets/many" | sort | sha256sum)"

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
sleep 5.2	# past what was listed
same "a blob replaced on the server reads new at the next open" "new azure" "$(cat "$A/sets/a.txt")"

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
