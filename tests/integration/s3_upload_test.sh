#!/bin/bash
# s3_upload_test.sh - the S3 backend's resumable upload (backend_upload)
# against a real S3 server (@20minutes/s3rver 5), driven by upload_check
# and cross-checked with awscli: one PUT below 8 MiB; 100 MiB in 13 parts;
# a run killed after 3 saved parts, then resumed: only the 10 missing parts
# go up, into the same upload; a save that fails, or a part the server
# keeps failing, leaves the upload resumable (never aborted), as does a
# completion the server answers 200 but does not keep (a HEAD checks); tokens that are garbage, of another size, "done", or name an
# upload S3 no longer knows (404 NoSuchUpload on a part, then on the
# completion).  s3rver never answers NoSuchUpload (it accepts parts of any
# id), so those two go through a small proxy that answers for one id as S3
# would.  Usage: s3_upload_test.sh UPLOAD_CHECK
set -u
UPLOAD_CHECK=$1
TOP=$(cd "$(dirname "$0")/../.." && pwd)
UPLOAD_CHECK=$(cd "$(dirname "$UPLOAD_CHECK")" && pwd)/${UPLOAD_CHECK##*/}
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1

SERVER=$TOP/scripts/server-s3rver.sh
PORT=${S3_TEST_PORT:-$(free_port)}
PROXY_PORT=$(free_port)
EP=http://127.0.0.1:$PORT
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL
aws() { env -u AWS_CA_BUNDLE aws --endpoint-url "$EP" "$@"; }
PROXY_PID=

s3_cleanup() {
	[ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null
	PROXY_PID=
	server_cleanup "$SERVER" "$T_DIR/s3"
}
t_cleanup() { s3_cleanup; }
trap 's3_cleanup; rm -rf "$T_DIR"' EXIT

if ! port_free "$PORT"; then
	not_ok "port $PORT is free (set S3_TEST_PORT)"
	t_finish
	exit 1
fi
"$SERVER" start s3 "$PORT" >/dev/null || { not_ok "s3rver started"; t_finish; exit 1; }
LOG=$T_DIR/s3/s3rver.log

# The proxy: forwards every request to s3rver as it came (the Host header
# too, so SigV4 signatures still hold), and logs it, but answers 404
# NoSuchUpload, as S3 does, to any request for the upload id
# "stale-upload", 500 to the part named in the file fail-part while that
# file exists, and, while the file lie-complete exists, 200 to a
# completion that it never passes on (a server that says "complete" and
# does not serve the object).
cat >proxy.py <<'PY'
import os, sys
sys.path.insert(0, sys.argv[3])
from http_proxy import Proxy, serve

GONE = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchUpload</Code>'
        b'<Message>The specified upload does not exist.</Message></Error>')
DONE = (b'<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult>'
        b'<ETag>"0123456789abcdef0123456789abcdef-13"</ETag></CompleteMultipartUploadResult>')

class S3Faults(Proxy):
    def answer_instead(self, body):
        if os.path.exists("fail-part"):
            with open("fail-part") as f:
                if "partNumber=%s&" % f.read().strip() in self.path:
                    return 500, b""
        if os.path.exists("lie-complete") and self.command == "POST" and "uploadId=" in self.path:
            return 200, DONE
        if "uploadId=stale-upload" in self.path:
            return 404, GONE
        return None

serve(S3Faults)
PY
# appended to (O_APPEND), so `: >proxy.log` below empties it for good
setsid python3 proxy.py "$PROXY_PORT" "$PORT" "$TOP/tests/integration" </dev/null >>proxy.log 2>&1 &
PROXY_PID=$!
for _ in $(seq 1 100); do port_free "$PROXY_PORT" || break; sleep 0.05; done

cat >mlfs.conf <<CONF
[mlfs]
state_dir = state
cache_dir = cache
timeout = 5
retries = 1

[datastore b]
type = s3
endpoint = $EP
bucket = testbucket
access_key_id = S3RVER
secret_access_key = S3RVER

[datastore viaproxy]
type = s3
endpoint = http://127.0.0.1:$PROXY_PORT
bucket = testbucket
access_key_id = S3RVER
secret_access_key = S3RVER
CONF

MIB=$((1 << 20))
PART=$((8 * MIB))
head -c $((3 * MIB + 12345)) /dev/urandom >small.bin
head -c $((100 * MIB)) /dev/urandom >big.bin
head -c $((60 * MIB + 7)) /dev/urandom >other.bin

# up [OPTS] DATASTORE FILE KEY TOKEN: one upload_check run, its output in
# run.out (stderr in run.err, and added to all.err), its status in $RC,
# the s3rver log lines it caused in run.log.
up() {
	local n0
	n0=$(wc -l <"$LOG")
	"$UPLOAD_CHECK" "${@:1:$#-4}" mlfs.conf "${@: -4}" >run.out 2>run.err
	RC=$?
	cat run.err >>all.err
	sleep 0.2	# s3rver writes its log lines as it answers
	tail -n +$((n0 + 1)) "$LOG" >run.log
	sed 's/^/#   /' run.out run.err | grep -v "credentials from config" | head -30
}
# parts_sent: parts the last run stored; parts_sent_to ID: of that upload only.
parts_sent() { grep -c "Stored part " run.log; }
parts_sent_to() { grep -c "Stored part [0-9]* of $1 " run.log; }
token_id() { sed -n 's/^id=//p' "$1"; }
token_parts() { grep -c '^[1-9][0-9]*=' "$1"; }
# same_object KEY FILE: awscli's copy of KEY is FILE, byte for byte.
same_object() {
	rm -f got.bin
	aws s3 cp --quiet "s3://testbucket/$1" got.bin && cmp got.bin "$2"
}
size_of() { aws s3api head-object --bucket testbucket --key "$1" --query ContentLength; }
first_done() { sed -n 's/^save 1 done=\([0-9]*\) .*/\1/p' run.out; }

# --- below 8 MiB: one PUT
rm -f tok
up b small.bin out/small.bin tok
same "a 3 MiB file uploads" 0 "$RC"
same "... with one save, 'done', of all its bytes" "save 1 done=$((3 * MIB + 12345)) parts=done" \
	"$(grep '^save' run.out)"
check "... in one PUT, no multipart upload" bash -c "! grep -q 'uploadId=' run.log"
check "... byte for byte" same_object out/small.bin small.bin
same "the token left is 'done'" done "$(cat tok)"

# --- 100 MiB: 13 parts of 8 MiB, the last 4 MiB
rm -f tok
start=$(date +%s.%N)
up b big.bin out/big.bin tok
echo "# 100 MiB uploaded in $(echo "$(date +%s.%N) - $start" | bc) s"
same "a 100 MiB file uploads" 0 "$RC"
same "... in 13 parts" 13 "$(parts_sent)"
same "... with a save after each part, then 'done'" 14 "$(grep -c '^save' run.out)"
same "... the 13th save names every part and all the bytes" "save 13 done=$((100 * MIB)) parts=13" \
	"$(grep '^save 13 ' run.out)"
same "awscli sees 100 MiB" $((100 * MIB)) "$(size_of out/big.bin)"
check "... byte for byte" same_object out/big.bin big.bin
same "the token left is 'done'" done "$(cat tok)"

# --- killed after 3 saved parts, then resumed
rm -f tok
up -x 3 b big.bin out/resumed.bin tok
same "the interrupted run died as killed, after its third save" 9 "$RC"
same "its token lists 3 parts" 3 "$(token_parts tok)"
check "its token is the format's" grep -qx 'mpu 1' tok
check "... of 8 MiB parts" grep -qx "part_size=$PART" tok
check "... of the whole size" grep -qx "size=$((100 * MIB))" tok
fails "no object yet: the upload was not completed" "Not Found" \
	aws s3api head-object --bucket testbucket --key out/resumed.bin
id=$(token_id tok)
cp tok tok.interrupted
up b big.bin out/resumed.bin tok
same "the resumed run succeeds" 0 "$RC"
same "... sending only the 10 parts the token did not list" 10 "$(parts_sent)"
same "... into the token's upload" 10 "$(parts_sent_to "$id")"
check "... its first save already counts the 3 parts sent before, and one more" \
	test "$(first_done)" -gt $((3 * PART))
same "... its first save lists 4 parts" 4 "$(sed -n 's/^save 1 .*parts=//p' run.out)"
check "... byte for byte" same_object out/resumed.bin big.bin

# --- a save that fails ends the upload, which stays resumable
rm -f tok
up -f 3 b big.bin out/savefail.bin tok
same "a failing save ends the upload with its error" "upload: -5 (Input/output error)" \
	"$(grep '^upload:' run.out)"
same "... at once: no completion" 0 "$(grep -c 'Stored object' run.log)"
same "... the token keeps the 2 parts saved" 2 "$(token_parts tok)"
id=$(token_id tok)
up b big.bin out/savefail.bin tok
same "the next run resumes it" 0 "$RC"
same "... sending the 11 parts not saved" 11 "$(parts_sent)"
same "... into the same upload (it was not aborted)" 11 "$(parts_sent_to "$id")"
check "... byte for byte" same_object out/savefail.bin big.bin

# --- a part that keeps failing (HTTP 500) ends the upload, which stays resumable
rm -f tok
echo 5 >fail-part
: >proxy.log
up viaproxy big.bin out/netfail.bin tok
same "a part the server keeps failing ends the upload with EIO" "upload: -5 (Input/output error)" \
	"$(grep '^upload:' run.out)"
check "... after retrying it" test "$(grep -c 'PUT .*partNumber=5&' proxy.log)" -ge 2
check "... without aborting the upload" bash -c "! grep -q '^DELETE' proxy.log"
check "... the token lists the parts that went up, not part 5" \
	bash -c "[ $(token_parts tok) -ge 1 ] && ! grep -q '^5=' tok"
id=$(token_id tok)
left=$((13 - $(token_parts tok)))
rm -f fail-part
up viaproxy big.bin out/netfail.bin tok
same "once the server is well, the next run resumes it" 0 "$RC"
same "... sending the $left parts not saved, into the same upload" "$left $left" \
	"$(parts_sent) $(parts_sent_to "$id")"
check "... byte for byte" same_object out/netfail.bin big.bin

# --- a completion the server answers 200 but does not keep: not done, and resumable
rm -f tok
touch lie-complete
up viaproxy big.bin out/lied.bin tok
rm -f lie-complete
same "a completion the server does not keep fails the upload" "upload: -5 (Input/output error)" \
	"$(grep '^upload:' run.out)"
check "... saying the object is not served whole" \
	grep -q "is complete, but it does not serve an object of $((100 * MIB)) bytes there" run.err
same "... the token keeps all 13 parts (resumable, not 'done')" 13 "$(token_parts tok)"
id=$(token_id tok)
up viaproxy big.bin out/lied.bin tok
same "once the server keeps it, the next run completes the same upload" 0 "$RC"
same "... sending no part again" 0 "$(parts_sent)"
same "... completing upload $id" 1 "$(grep -c "Stored object" run.log)"
check "... byte for byte" same_object out/lied.bin big.bin

# --- tokens that cannot be resumed: start afresh
printf 'not a token\n' >tok
up b big.bin out/garbage.bin tok
same "a garbage token: the upload starts afresh and succeeds" 0 "$RC"
same "... sending all 13 parts" 13 "$(parts_sent)"
check "... byte for byte" same_object out/garbage.bin big.bin

cp tok.interrupted tok
up b other.bin out/other.bin tok
same "a token of another size: the upload starts afresh and succeeds" 0 "$RC"
same "... sending all 8 parts" 8 "$(parts_sent)"
check "... none into the token's upload" bash -c "! grep -q 'of $(token_id tok.interrupted) ' run.log"
check "... byte for byte" same_object out/other.bin other.bin

printf done >tok
up b big.bin out/big.bin tok
same "a 'done' token of an object in place: nothing is sent" 0 "$(parts_sent)"
same "... and 'done' is saved again" "save 1 done=$((100 * MIB)) parts=done" "$(grep '^save' run.out)"
printf done >tok
up b big.bin out/nothere.bin tok
same "a 'done' token of no object: the file is sent" 13 "$(parts_sent)"
check "... byte for byte" same_object out/nothere.bin big.bin

# --- an upload S3 no longer knows (NoSuchUpload): one new upload from the start
sed 's/^id=.*/id=stale-upload/' tok.interrupted >tok
up viaproxy big.bin out/stale.bin tok
same "a token whose upload is gone (404 on its parts): the upload succeeds" 0 "$RC"
check "... saying it starts over" grep -q "is gone.*starting over" run.err
same "... with all 13 parts, into a new upload" 13 "$(parts_sent)"
check "... byte for byte" same_object out/stale.bin big.bin

{
	printf 'mpu 1\nid=stale-upload\npart_size=%s\nsize=%s\n' "$PART" $((100 * MIB))
	for i in $(seq 1 13); do printf '%s="0123456789abcdef0123456789abcdef"\n' "$i"; done
} >tok
up viaproxy big.bin out/stale2.bin tok
same "a token of every part whose upload is gone (404 on the completion): succeeds" 0 "$RC"
same "... with all 13 parts, into a new upload" 13 "$(parts_sent)"
check "... byte for byte" same_object out/stale2.bin big.bin

# (in the sanitizer build: the runs that were meant to fail too)
check "no run had a sanitizer report" bash -c "! grep -E 'AddressSanitizer|runtime error|LeakSanitizer' all.err"

s3_cleanup
trap - EXIT
t_finish
