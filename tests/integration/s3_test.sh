#!/bin/bash
# s3_test.sh - a real gateway over a real S3 server (@20minutes/s3rver 5,
# which checks SigV4), seeded and cross-checked with awscli: listings (one
# of 10,000 objects), stat, whole and ranged reads, writes small and
# multipart, rm, mv, mkdir, rmdir, touch; wrong credentials, a dead server
# and an object changed behind the mount.  posix_check is not run here: S3
# has no links, modes or open-unlinked files, and says so with errors.
# Usage: s3_test.sh MLFS POSIX_CHECK
set -u
MLFS=$1
POSIX_CHECK=$2
TOP=$(cd "$(dirname "$0")/../.." && pwd)
MLFS=$(cd "$(dirname "$MLFS")" && pwd)/${MLFS##*/}
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1
: "$POSIX_CHECK"

SERVER=$TOP/scripts/server-s3rver.sh
PORT=${S3_TEST_PORT:-$(free_port)}
EP=http://127.0.0.1:$PORT
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL
aws() { env -u AWS_CA_BUNDLE aws --endpoint-url "$EP" "$@"; }

s3_cleanup() { server_cleanup "$SERVER" "$T_DIR/s3"; }
t_cleanup() { s3_cleanup; }
trap 's3_cleanup; rm -rf "$T_DIR"' EXIT

if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
	not_ok "port $PORT is free (set S3_TEST_PORT)"
	t_finish
	exit 1
fi
"$SERVER" start s3 "$PORT" >/dev/null || { not_ok "s3rver started"; t_finish; exit 1; }

# --- seed: awscli for the files, s3rver's own store for 10,000 tiny objects
mkdir -p seed/data/sub mnt
printf 'hello s3\n' >seed/data/a.txt
head -c 3145739 /dev/urandom >seed/data/sub/rand.bin
head -c 1234567 /dev/urandom >seed/data/cold.bin
echo "odd name" >"seed/data/with space, plus+ and =.txt"
printf 'hello s3\n' >seed/data/sub/same-size.txt
aws s3 cp --recursive --quiet seed s3://testbucket/ ||
	{ not_ok "awscli seeded the bucket"; t_finish; exit 1; }
# s3rver 5 keeps KEY as DATA/BUCKET/KEY._S3rver_object (+ .md5 and metadata it
# makes itself when missing): the fast way to a big prefix, checked below
# against awscli's own listing.
start=$(date +%s.%N)
mkdir -p s3/data/testbucket/data/many
(cd s3/data/testbucket/data/many && for i in $(seq -w 0 9999); do
	printf '%s\n' "$i" >"f$i._S3rver_object"
done)
seeded=$(date +%s.%N)
echo "# 10,000 objects written into the store in $(echo "$seeded - $start" | bc) s"
same "awscli lists the 10,000 seeded objects" 10000 "$(aws s3 ls s3://testbucket/data/many/ | wc -l)"

cat >mlfs.conf <<CONF
[mlfs]
# exact request counts below: no read-ahead past the epoch's files
read_ahead_files = 0
state_dir = state
cache_dir = cache
timeout = 2
retries = 1

[datastore b]
type = s3
endpoint = $EP
bucket = testbucket
access_key_id = S3RVER
secret_access_key = S3RVER
# what a listing said is used for 3 s, not 5 (the waits past it below are shorter)
metadata_ttl = 3

# ... and never: every open asks the server
[datastore fresh]
type = s3
endpoint = $EP
bucket = testbucket
access_key_id = S3RVER
secret_access_key = S3RVER
metadata_ttl = 0

[datastore bad]
type = s3
endpoint = $EP
bucket = testbucket
access_key_id = S3RVER
secret_access_key = not-the-secret

[dataset d]
source = s3://testbucket/data/

# a dataset its server refuses: still listed in datasets/
[dataset locked]
source = bad:/data

# Google Cloud Storage's XML API, with the local S3 server standing in for
# storage.googleapis.com (the endpoint overridden, as config.md says)
[datastore g]
type = gcs
endpoint = $EP
bucket = testbucket
root = /data
access_key_id = S3RVER
secret_access_key = S3RVER

[dataset gs]
source = gs://testbucket/data/sub/

[datastore gbad]
type = gcs
endpoint = $EP
bucket = testbucket
access_key_id = S3RVER
secret_access_key = not-the-secret
CONF

check "mlfs check accepts the config" "$MLFS" check mlfs.conf
mount_fg mlfs.conf "$T_DIR/mnt" || { not_ok "mount came up"; t_finish; exit 1; }
M=$T_DIR/mnt
B=$M/datastores/b
D=$M/datasets/d
LOG=$T_DIR/mount.mnt.log

# --- reading
same "ls shows the bucket's top folder" "data" "$(ls "$B")"
same "ls shows a dataset from an s3:// URL" "a.txt cold.bin many sub with space, plus+ and =.txt" \
	"$(ls "$D" | tr '\n' ' ' | sed 's/ $//')"
same "stat shows an object's size" 3145739 "$(stat -c %s "$B/data/sub/rand.bin")"
same "stat of a listed object's size" 9 "$(ls -l "$D" | awk '$NF == "a.txt" {print $5}')"
check "a prefix is a folder" test -d "$B/data/sub"
same "cat reads a small object" "hello s3" "$(cat "$D/a.txt")"
# (not '&': s3rver 5 escapes it twice in listings, "&amp;amp;")
same "a name with spaces, + and = reads back" "odd name" "$(cat "$D/with space, plus+ and =.txt")"
same_at_offsets "reads at random offsets return the seeded bytes" seed/data/sub/rand.bin "$B/data/sub/rand.bin"
same "a whole read is the seeded file" "$(sha seed/data/sub/rand.bin)" "$(sha "$B/data/sub/rand.bin")"
same "a whole read through the dataset too" "$(sha seed/data/sub/rand.bin)" "$(sha "$D/sub/rand.bin")"

# --- gcs: the s3 backend with GCS's conventions, at the same server
G=$M/datastores/g
same "a gcs datastore lists its root prefix" "a.txt cold.bin many sub with space, plus+ and =.txt" \
	"$(ls "$G" | tr '\n' ' ' | sed 's/ $//')"
same "... and reads an object" "hello s3" "$(cat "$G/a.txt")"
same "a gs:// dataset borrows the gcs datastore of its bucket" \
	"$(sha seed/data/sub/rand.bin)" "$(sha "$M/datasets/gs/rand.bin")"
head -c 9437300 /dev/urandom >gcs-up.bin
check "a file written through a gcs datastore is uploaded at close (multipart)" \
	cp gcs-up.bin "$G/sub/gcs-up.bin"
same "... awscli reads it back from the bucket" "$(sha gcs-up.bin)" \
	"$(aws s3 cp --quiet s3://testbucket/data/sub/gcs-up.bin - | sha256sum | cut -c1-64)"
check "... and counts its requests under its own name" \
	test "$(stat_of "$M" datastore.g.requests)" -gt 0
check "the log names the gcs bucket and where its keys came from" \
	grep -q "datastore g: gcs bucket testbucket at $EP, path-style, credentials from config" \
	"$LOG"
rm -f "$G/sub/gcs-up.bin"
fails "a gcs datastore with a wrong HMAC secret is EACCES" "Permission denied" \
	ls "$M/datastores/gbad"
check "... the log names the server's code" grep -q "datastore gbad: .*SignatureDoesNotMatch" "$LOG"
fails "a missing object is ENOENT" "No such file" stat "$B/data/nope"
start=$(date +%s.%N)
n=$(ls "$D/many" | wc -l)
echo "# listing 10,000 objects took $(echo "$(date +%s.%N) - $start" | bc) s"
same "a prefix of 10,000 objects lists completely" 10000 "$n"
same "every one of them, by name" "$(seq -w 0 9999 | sed 's/^/f/' | sha256sum)" \
	"$(ls "$D/many" | sort | sha256sum)"
same "a listed tiny object reads back" "4321" "$(cat "$D/many/f4321")"
# epochs over listed objects: the second, past the kernel's second of freshness, looks up,
# opens and reads each from the cache and asks the server nothing (what the listing said is
# trusted under datasets/)
first=$(read_epoch "$D/many" 'f00*')
same "a first epoch of 100 tiny objects reads their bytes" "$(seq -w 0 99 | sed 's/^/00/' | sha256sum)" "$first"
quiet_of "$M"	# the read-ahead of the files after the epoch's
before=$(stat_of "$M" datastore.dataset:d.requests)
sleep 1.2
same "a second epoch reads the same bytes" "$first" "$(read_epoch "$D/many" 'f00*')"
same "... with no request to the server (datastore.dataset:d.requests)" "$before" \
	"$(stat_of "$M" datastore.dataset:d.requests)"
# the kernel may forget a trusted folder's listing (an epoch of a big dataset pushes it out
# of the page cache; here drop_caches does): listed again, it comes from what the mount kept,
# a small folder and one of 10,000 (listed by a lister thread past the first window) alike
listed=$(ls -l "$D/sub")
before=$(stat_of "$M" datastore.dataset:d.requests)
kept=$(stat_of "$M" datastore.dataset:d.listings_remembered)
sync
echo 3 >/proc/sys/vm/drop_caches
same "a trusted folder the kernel forgot lists the same again" "$listed" "$(ls -l "$D/sub")"
same "... and so does one of 10,000 objects" "$(seq -w 0 9999 | sed 's/^/f/' | sha256sum)" \
	"$(ls "$D/many" | sort | sha256sum)"
same "... with no request to the server" "$before" "$(stat_of "$M" datastore.dataset:d.requests)"
check "... answered from the listings the mount kept (listings_remembered)" \
	test "$(stat_of "$M" datastore.dataset:d.listings_remembered)" -ge $((kept + 2))

# --- writing
head -c 1000003 /dev/urandom >small.bin
head -c $((40 << 20)) /dev/urandom >big.bin
check "cp writes a new object" cp small.bin "$B/data/out.bin"
same "it reads back through the mount" "$(sha small.bin)" "$(sha "$B/data/out.bin")"
same "awscli sees what mlfs wrote" "$(sha small.bin)" "$(aws s3 cp s3://testbucket/data/out.bin - | sha256sum | cut -d' ' -f1)"
start=$(date +%s.%N)
check "cp writes a 40 MiB object" cp big.bin "$B/data/big.bin"
echo "# 40 MiB written in $(echo "$(date +%s.%N) - $start" | bc) s"
check "the 40 MiB object went up in parts (multipart upload)" \
	grep -q "uploadId=" s3/s3rver.log
same "awscli sees all 40 MiB" $((40 << 20)) \
	"$(aws s3api head-object --bucket testbucket --key data/big.bin --query ContentLength)"
same "the 40 MiB object reads back identical" "$(sha big.bin)" "$(sha "$B/data/big.bin")"
same "and identical through awscli" "$(sha big.bin)" "$(aws s3 cp s3://testbucket/data/big.bin - | sha256sum | cut -d' ' -f1)"
printf 'appended\n' >>"$B/data/a.txt"
same "appending to an object rewrites it whole" "$(printf 'hello s3\nappended')" \
	"$(aws s3 cp s3://testbucket/data/a.txt -)"
check "truncate shrinks an object" truncate -s 5 "$B/data/a.txt"
same "awscli sees the truncated object" "hello" "$(aws s3 cp s3://testbucket/data/a.txt -)"
check "touch creates an object" touch "$B/data/empty"
same "the touched object is empty" 0 \
	"$(aws s3api head-object --bucket testbucket --key data/empty --query ContentLength)"
check "rm removes an object" rm "$B/data/out.bin"
fails "awscli no longer sees it" "Not Found" aws s3api head-object --bucket testbucket --key data/out.bin
fails "rm of a missing object fails" "No such file" rm "$B/data/out.bin"
check "mv renames an object" mv "$B/data/empty" "$B/data/renamed"
check "mv: awscli sees the new name" aws s3api head-object --bucket testbucket --key data/renamed
fails "mv: and not the old one" "Not Found" aws s3api head-object --bucket testbucket --key data/empty
cp small.bin "$B/data/t1" && echo t2 >"$B/data/t2"
check "mv of a file onto an existing one" mv "$B/data/t1" "$B/data/t2"
same "replaces it" "$(sha small.bin)" "$(sha "$B/data/t2")"
# a file being written is uploaded at its close: rm of it meanwhile means it never is, and
# a rename from or onto it (which the upload would undo) is EBUSY
exec 7>"$B/data/writing"
echo "never uploaded" >&7
same "ls -l shows a file being written, at its staged size" "writing 15" \
	"$(ls -l "$B/data" | awk '$NF == "writing" {print $NF, $5}')"
fails "mv of a file being written is EBUSY" "Device or resource busy" \
	mv "$B/data/writing" "$B/data/moved"
fails "mv onto a file being written is EBUSY" "Device or resource busy" \
	mv "$B/data/t2" "$B/data/writing"
check "rm of a file being written" rm "$B/data/writing"
check "it is gone at once" bash -c "! test -e '$B/data/writing'"
exec 7>&-
fails "its close uploads nothing: awscli finds no object" "Not Found" \
	aws s3api head-object --bucket testbucket --key data/writing
check "nor does the mount" bash -c "! test -e '$B/data/writing'"
mkdir "$B/wdir" && exec 7>"$B/wdir/f"
fails "rmdir of a folder whose only file is being written is ENOTEMPTY" "Directory not empty" \
	rmdir "$B/wdir"
exec 7>&-
check "once closed and removed, the folder goes" bash -c "rm '$B/wdir/f' && rmdir '$B/wdir'"
# every open of a file shares one staged copy: two writers and a reader see each other's
# bytes, and neither's close uploads the other's away
same "two writers and a reader of one file see each other's bytes" ok \
	"$(python3 "$TOP/tests/integration/two_writers.py" "$B/data/two")"
aws s3 cp s3://testbucket/data/two two.got >/dev/null 2>&1
same "... and awscli gets what both wrote" "$(printf 'A%.0s' {1..1000}; printf 'B%.0s' {1..1000}; printf 'CCCCCCCCCC')" \
	"$(cat two.got 2>/dev/null)"
check "mkdir makes a folder" mkdir "$B/newdir"
check "awscli sees the folder's marker" aws s3api head-object --bucket testbucket --key newdir/
check "the new folder is a folder" test -d "$B/newdir"
check "a file inside it" cp small.bin "$B/newdir/f"
fails "rmdir of a non-empty folder fails" "Directory not empty" rmdir "$B/newdir"
check "rm the file" rm "$B/newdir/f"
check "rmdir of the empty folder" rmdir "$B/newdir"
check "the folder is gone" bash -c "! test -e '$B/newdir'"
fails "mv of a folder is refused with EXDEV" "Invalid cross-device link" python3 -c "import os; os.rename('$B/data/sub', '$B/data/sub2')"
# S3 holds no links: EPERM as vfat says it, not EROFS (the datastore is writable)
fails "ln: EPERM, the filesystem has no hard links" "Operation not permitted" ln "$B/data/t2" "$B/data/t3"
fails "ln -s: EPERM, the filesystem has no symbolic links" "Operation not permitted" ln -s t2 "$B/data/t4"
# (awscli itself: a bash -c has no aws() and asked AWS, which is not there, so it could not fail)
same "neither made an object (404 to each)" "404 404" \
	"$(for k in data/t3 data/t4; do aws s3api head-object --bucket testbucket --key "$k" 2>&1 |
		grep -o '(404)' | tr -d '()'; done | xargs)"
# S3 holds an object "a" and keys under "a/" alike; a folder shows one entry of a name
: >empty0
aws s3 cp --quiet empty0 s3://testbucket/twins/marker
echo x | aws s3 cp --quiet - s3://testbucket/twins/marker/in.txt
echo bytes | aws s3 cp --quiet - s3://testbucket/twins/real
echo y | aws s3 cp --quiet - s3://testbucket/twins/real/in.txt
same "an object and a folder of one name are listed once each" "marker real" "$(echo $(ls "$B/twins"))"
check "... a folder hides an empty object of its name" test -d "$B/twins/marker"
same "... and is read through" "x" "$(cat "$B/twins/marker/in.txt")"
check "... an object with bytes hides the folder" test -f "$B/twins/real"
# a stat from the server (metadata_ttl = 0: a HEAD, then a look beneath) says the same
check "... and a stat from the server says the same" \
	sh -c "test -d '$M/datastores/fresh/twins/marker' && test -f '$M/datastores/fresh/twins/real'"

# --- faults
fails "wrong credentials: ls fails with EACCES" "Permission denied" ls "$M/datastores/bad/data"
check "the log names the datastore and tells to check the credentials" \
	grep -E "datastore bad: .*SignatureDoesNotMatch.*check the credentials" "$LOG"
check "the secret is never logged" bash -c "! grep -q not-the-secret '$LOG'"
# readdir(3) skips an entry of inode 0: such a dataset was missing from ls
same "ls datasets/ lists the dataset its server refuses" "d gs locked" "$(echo $(ls "$M/datasets"))"
fails "... and using it says why (EACCES)" "Permission denied" stat "$M/datasets/locked"

printf 'HELLO S3\n' >changed.txt
same "an object reads before it changes" "hello s3" "$(cat "$B/data/sub/same-size.txt")"
sleep 1.1
aws s3 cp --quiet changed.txt s3://testbucket/data/sub/same-size.txt
sleep 3.1	# past the 3 s (metadata_ttl) in which an open takes what the mount learned
same "an object changed behind the mount (same size) reads fresh after reopening" \
	"HELLO S3" "$(cat "$B/data/sub/same-size.txt")"

# Under datastores/, an open takes what a listing said in the last metadata_ttl seconds: a walk's
# reads are one GET each, no HEAD.  An object replaced within those seconds fails
# its read (If-Match), and the next open asks again.
# (from a folder of their own: awscli walks the whole source folder before it filters)
mkdir -p win
for i in 1 2 3; do echo "window $i" >"win/win$i.txt"; done
aws s3 cp --quiet --recursive win s3://testbucket/data/win/
ls "$B/data/win" >/dev/null
sleep 1.2	# past the kernel's second: the open looks the file up again, as a long walk's do
before=$(stat_of "$M" datastore.b.requests)
same "a listed object reads" "window 1" "$(cat "$B/data/win/win1.txt")"
same "... with one request, its GET (no HEAD at its lookup or open), when listed less than metadata_ttl (3 s) ago" 1 \
	$(($(stat_of "$M" datastore.b.requests) - before))
# listed, replaced by botocore (awscli's library) and opened within a second
env -u AWS_CA_BUNDLE python3 - "$EP" "$B/data/win" >replaced.out 2>&1 <<'PY'
import errno, os, sys
import botocore.session
ep, folder = sys.argv[1:3]
s3 = botocore.session.get_session().create_client("s3", endpoint_url=ep)
os.listdir(folder)
s3.put_object(Bucket="testbucket", Key="data/win/win2.txt", Body=b"replaced\n")
try:
    with open(os.path.join(folder, "win2.txt"), "rb") as f:
        print("read", f.read())
except OSError as e:
    print("errno", errno.errorcode[e.errno])
PY
same "an object replaced since the listing fails its read, never mixes versions" \
	"errno ESTALE" "$(cat replaced.out)"
same "... and the next open reads the new one" "replaced" "$(cat "$B/data/win/win2.txt")"
sleep 3.1
before=$(stat_of "$M" datastore.b.requests)
same "past metadata_ttl an open asks again" "window 3" "$(cat "$B/data/win/win3.txt")"
check "... the server (a HEAD) before its GET" test $(($(stat_of "$M" datastore.b.requests) - before)) -ge 2
ls "$M/datastores/fresh/data/win" >/dev/null
before=$(stat_of "$M" datastore.fresh.requests)
same "with metadata_ttl = 0 a listed object reads" "window 1" "$(cat "$M/datastores/fresh/data/win/win1.txt")"
# (its bytes are in the cache already, from b's read above: the HEAD is the one request)
same "... asking the server (a HEAD), however recent the listing" 1 \
	$(($(stat_of "$M" datastore.fresh.requests) - before))

# The server goes away while a file is open for writing: its close reports
# it.  The writer must not fork meanwhile (a child's exec closes the fd too,
# and that close is a flush that uploads), so the shell stops the server
# between the writer's "written" and "go" files.
python3 -c '
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"x" * 100000)
open("written", "w").close()
while not os.path.exists("go"):
    time.sleep(0.05)
try:
    os.close(fd)
    print("close succeeded")
except OSError as e:
    print("close:", e.errno, e.strerror)
' "$B/data/late.bin" >closed.txt 2>&1 &
writer=$!
for _ in $(seq 1 200); do [ -e written ] && break; sleep 0.05; done
"$SERVER" stop s3
touch go
wait "$writer"
same "close(2) fails with EIO when the upload at close fails" "close: 5 Input/output error" \
	"$(cat closed.txt)"
start=$(date +%s.%N)
fails "a dead server gives EIO" "Input/output error" cat "$B/data/cold.bin"
took=$(echo "$(date +%s.%N) - $start" | bc)
echo "# the failed read took $took s"
check "... within timeout x (retries + 1) + a few seconds" \
	bash -c "[ \$(echo '$took < 2 * 2 + 6' | bc) = 1 ]"
"$SERVER" start s3 "$PORT" >/dev/null || not_ok "s3rver restarted"
same "after a restart the next read works, no remount" "$(sha seed/data/cold.bin)" \
	"$(sha "$B/data/cold.bin")"

# --- the next job: a new mount over the same cache lists the prefix once (10,000 objects:
# ten LIST pages), then reads the epoch's objects from the cache: the ETags of the listing
# name them
next_job_epoch mlfs.conf "$M" dataset:d "$D/many" 'f00*' "$first"
unmount_fg "$M"
"$SERVER" stop s3
trap - EXIT
t_finish
