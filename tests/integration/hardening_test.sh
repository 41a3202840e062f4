#!/bin/bash
# hardening_test.sh - limits, hostile paths, secrets and privilege through a
# real mount (issue 9): max_jobs per user, log_size rotation of a worker's
# log and its cap in the job's log, a daemon out of file descriptors, names
# too long and trees too deep, links that point out of a datastore, a sweep
# of everything mlfs shows or writes for the secrets it was given, and what
# one user's worker can reach of another's.
# Usage: hardening_test.sh MLFS
set -u
MLFS=$1
. "$(dirname "$0")/lib.sh"
TOP=$(cd "$(dirname "$0")/../.." && pwd)
# the smb datastore below: leaks inside Samba's own libraries are theirs (tests/lsan.supp)
[ -f "$TOP/tests/lsan.supp" ] && export LSAN_OPTIONS="suppressions=$TOP/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
t_setup
cd "$T_DIR" || exit 1
mkdir -p data mnt outside
M=$T_DIR/mnt
J=$M/jobs
S3_SECRET='s3cret-KEY-never-shown-1234'
SMB_SECRET='smb-PASS-never-shown-5678'
ENV_SECRET='env-TOKEN-never-shown-9012'
NGINX_SH=$TOP/scripts/server-nginx.sh
HTTP_PORT=$(free_port)
t_cleanup() { "$NGINX_SH" stop "$T_DIR/http" >/dev/null 2>&1; }
trap 't_cleanup; chmod 600 /dev/fuse' EXIT
# an index page a hostile server might send: links out of the folder, names
# with an encoded '/' or NUL, absolute paths and other hosts
mkdir -p http/www/hostile/sub
echo fine >http/www/hostile/ok.txt
cat >http/www/hostile/index.html <<'HTML'
<html><body><h1>Index of /hostile/</h1><pre>
<a href="../">../</a>
<a href="..%2F..%2Fetc%2Fpasswd">..%2F..%2Fetc%2Fpasswd</a>
<a href="%2e%2e/">%2e%2e/</a>
<a href="a%2Fb.txt">a%2Fb.txt</a>
<a href="x%00y.txt">x%00y.txt</a>
<a href="/etc/passwd">/etc/passwd</a>
<a href="http://evil.example/x.txt">x.txt</a>
<a href="./">./</a>
<a href="sub/">sub/</a>
<a href="ok.txt">ok.txt</a>
</pre></body></html>
HTML
"$NGINX_SH" start "$T_DIR/http" "$HTTP_PORT" >/dev/null || { not_ok "nginx started"; t_finish; exit 1; }
printf '%s\n' "$SMB_SECRET" >smb.pass
chmod 600 smb.pass
cat >h.conf <<CONF
[mlfs]
state_dir = $T_DIR/state
cache_dir = $T_DIR/cache
max_jobs = 2
log_size = 64K
[node]
gpus = 0
cpus = 64
memory_gb = 64
# the formats' rules on the node itself; containers_test.sh runs their images
[containers]
runtime = none
fallback = host
[datastore d]
type = local
root = $T_DIR/data
[datastore bucket]
type = s3
endpoint = http://127.0.0.1:1
bucket = b
access_key_id = AKIDHARDENINGTEST
secret_access_key = $S3_SECRET
timeout = 2
retries = 0
[datastore share]
type = smb
address = 127.0.0.1:1
share = s
username = u
password_file = $T_DIR/smb.pass
timeout = 2
retries = 0
[datastore web]
type = http
url = http://127.0.0.1:$HTTP_PORT/hostile/
timeout = 5
[dataset mnist]
source = d:/
[dataset slip]
source = d:/slip.tar
CONF
printf 'hello\n' >data/a.txt
chmod 755 data
# a tar whose symlink member points out, with a member "through" it, and a
# member whose name climbs out
python3 - data/slip.tar <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    link = tarfile.TarInfo("up"); link.type = tarfile.SYMTYPE; link.linkname = "/etc"
    t.addfile(link)
    for name, body in (("up/planted", b"through the link\n"), ("../escaped", b"out\n"),
                       ("ok.txt", b"fine\n")):
        i = tarfile.TarInfo(name); i.size = len(body); t.addfile(i, io.BytesIO(body))
PY

spec() { printf '{"name": "%s", "workers": [{"command": "%s"}]%s}\n' "$1" "$2" "${3:+, $3}"; }
state() { cat "$J/$1/state" 2>/dev/null; }
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

chmod 666 /dev/fuse
mount_fg h.conf "$M" || { t_finish; exit 1; }

# --- paths: links out of a datastore or an archive, long names, deep trees
D=$M/datastores/d
mkdir -p data/sub
echo inside >data/sub/passwd
check "a folder of the datastore is looked up" test -f "$D/sub/passwd"
# swap the looked-up folder for a link to /etc behind the mount's back
mv data/sub data/sub.real && ln -s /etc data/sub
got=$(cat "$D/sub/passwd" 2>&1)
check "a folder swapped for a link out is never followed by mlfs" sh -c "! printf '%s' '$got' | grep -q '^root:'"
rm data/sub && mv data/sub.real data/sub
ln -s ../../outside data/up
echo "outside the root" >outside/o.txt
fails "a relative link climbing out resolves inside the mount, not above the root" "No such file" cat "$D/up/o.txt"
same "the tar: only its safe members are listed" "ok.txt up" "$(ls "$M/datasets/slip" | xargs)"
same "... its symlink member is a link, as stored" /etc "$(readlink "$M/datasets/slip/up")"
check "... no member reached through it or above it was written anywhere" sh -c "test ! -e /etc/planted && test ! -e '$T_DIR/escaped' && test ! -e '$T_DIR/data/escaped'"
check "... and the log says why each was skipped" sh -c "grep -q 'up/planted' '$T_DIR/mount.mnt.log' && grep -q '../escaped' '$T_DIR/mount.mnt.log'"
same "a hostile index page: only the names inside the folder are listed" "ok.txt sub" "$(ls "$M/datastores/web" | xargs)"
same "... and read" fine "$(cat "$M/datastores/web/ok.txt")"
fails "an encoded path out of the folder is not a name" "No such file" cat "$M/datastores/web/..%2F..%2Fetc%2Fpasswd"
check "nginx was asked for nothing outside /hostile/" sh -c "! grep -v '\"[A-Z]* /hostile/' '$T_DIR/http/access.log' | grep -q ."
n255=$(printf 'n%.0s' $(seq 1 255))
check "a name of 255 bytes is created through the mount" sh -c "echo long >'$D/$n255'"
same "... and read back" long "$(cat "$D/$n255")"
fails "256 bytes: ENAMETOOLONG" "File name too long" sh -c "echo x >'$D/${n255}x'"
# 150 levels of 30-byte names: 4,650 bytes, past PATH_MAX from the datastore's root
deep() {
	cd "$D" || return 1
	for i in $(seq 1 150); do
		err=$(mkdir "level-$(printf '%03d' "$i")-xxxxxxxxxxxxxxxxxxxxxx" 2>&1) ||
			{ echo "mkdir $i: ${err##*: }"; return 0; }
		cd "level-$(printf '%03d' "$i")-xxxxxxxxxxxxxxxxxxxxxx" || { echo "cd $i"; return 0; }
	done
	echo "all 150"
}
got=$(deep 2>&1)
check "a deep tree stops cleanly where the datastore's path would pass PATH_MAX: $got" \
	sh -c "case '$got' in 'mkdir '*': File name too long') exit 0;; esac; exit 1"
levels=$(find data -type d -name 'level-*' | wc -l)
failed_at=${got#mkdir }
same "... every level made before it is really there" "$((${failed_at%%:*} - 1))" "$levels"
check "the mount still answers" test -f "$D/a.txt"
rm -rf data/level-001-* 2>/dev/null

# --- a long listing is streamed: an open folder holds 4096 entries at most
mkdir data/big
python3 -c "
import os
for i in range(30000): open('data/big/f%05d' % i, 'w').close()"
held() { awk -v k="mount.dir_entries_held${1:-}" '$1 == k { print $2 }' "$M/.mlfs/stats"; }
peak0=$(held _peak)
same "ls of a folder of 30,000 files lists them all, once each" 30000 "$(ls "$D/big" | sort -u | wc -l)"
check "... holding 4096 entries at most meanwhile (peak was $(held _peak))" test "$(held _peak)" -le 4096
check "... more than before it, so the counter counts ($peak0 before)" test "$(held _peak)" -gt "$peak0"
same "rewinddir after the end lists it all again" "30000 30000 True" "$(python3 -c "
import os
fd = os.open('$D/big', os.O_RDONLY)
a = os.listdir(fd); b = os.listdir(fd)	# listdir(fd) rewinds
print(len(a), len(b), sorted(a) == sorted(b))")"
same "a reader that stops early: the first entries" ". .." "$(ls -f "$D/big" | head -2 | xargs)"
for _ in $(seq 1 50); do [ "$(held)" = 0 ] && break; sleep 0.1; done
same "... and once every folder is closed nothing is held" 0 "$(held)"
rm -rf data/big

# --- max_jobs: unfinished jobs per user
spec hold1 'sleep 60' >hold1.json
spec hold2 'sleep 60' >hold2.json
spec hold3 'sleep 60' >hold3.json
spec rootjob 'true' >rootjob.json
chmod 644 ./*.json
check "nobody's first job is accepted" as_other cp hold1.json "$J/"
check "nobody's second job is accepted" as_other cp hold2.json "$J/"
fails "the third, past max_jobs = 2: EAGAIN" "Resource temporarily unavailable" as_other cp hold3.json "$J/"
check "its .error says why" grep -q "has 2 jobs that have not ended, the most max_jobs allows" "$J/hold3.json.error"
check "another user is not held back by nobody's jobs" cp rootjob.json "$J/"
check "cancel one of nobody's jobs" as_other sh -c "echo cancel >'$J/hold1/ctl'"
check "hold1 is cancelled" job_state_in "$J" hold1 CANCELLED
check "then nobody's third job is accepted" as_other cp hold3.json "$J/"
as_other sh -c "echo cancel >'$J/hold2/ctl'; echo cancel >'$J/hold3/ctl'"
rm -f "$J/hold3.json.error"

# --- log_size: a worker's log rotates, the job's log is capped
# 200,000 bytes of numbered lines: "line 000001" .. (12 bytes each)
spec chatty "seq -f 'line %06g' 1 16667" >chatty.json
check "a job that writes 200 KB of output" cp chatty.json "$J/"
check "it succeeds" job_state_in "$J" chatty SUCCEEDED
check "its worker's folder shows log.1 once rotated" sh -c "ls '$J/chatty/workers/1' | grep -qx log.1"
check "log is at most log_size" test "$(stat -c %s "$J/chatty/workers/1/log")" -le 65536
check "log.1 is log_size" test "$(stat -c %s "$J/chatty/workers/1/log.1")" -eq 65536
check "log starts with the rotation note" sh -c "head -1 '$J/chatty/workers/1/log' | grep -q 'reached log_size (65536 bytes): the output before this line is in log.1'"
check "log.1 then log (less the note) are the output's end, nothing in between lost" python3 - "$J/chatty/workers/1" <<'PY'
import sys
d = sys.argv[1]
def body(f):	# a log less its first line when that is mlfs's rotation note
    text = open(f).read()
    return text.split("\n", 1)[1] if text.startswith("mlfs: this log reached") else text
old, new = body(d + "/log.1"), body(d + "/log")
assert open(d + "/log").read().startswith("mlfs: this log reached")
full = "".join("line %06d\n" % i for i in range(1, 16668))
both = old + new
assert full.endswith(both), "not a suffix"
assert len(both) > 65536
PY
check "the job's log stops at log_size with a note" sh -c "test \$(stat -c %s '$J/chatty/log') -le $((65536 + 200)) && tail -1 '$J/chatty/log' | grep -q 'worker 1 wrote log_size (65536 bytes) into this log: the rest of its output is only in workers/1/log'"
check "the job's log holds the first lines whole" sh -c "head -1 '$J/chatty/log' | grep -qx '\[1\] line 000001'"
check "a worker that never filled its log shows no log.1" sh -c "! ls '$J/rootjob/workers/1' | grep -qx log.1"
fails "and log.1 of it is not found" "No such file" cat "$J/rootjob/workers/1/log.1"

# --- secrets: never in the tree, the journal others can read, logs or messages
cat >sec.json <<SPEC
{"name": "sec", "workers": [{"command": "printf %s \\"\$WANDB_API_KEY\\" | sha256sum"}],
 "environment": {"variables": {"WANDB_API_KEY": "$ENV_SECRET", "DB_PASSWD": "$ENV_SECRET",
  "HF_AUTH": "$ENV_SECRET", "PLAIN": "shown", "DATA_URL": "https://me:$ENV_SECRET@data.example.org/x"}}}
SPEC
cat >sec-bad.json <<SPEC
{"name": "secbad", "workers": [{"command": "true"}], "retry_count": -1,
 "environment": {"variables": {"WANDB_API_KEY": "$ENV_SECRET"}}}
SPEC
cat >sec-gl.json <<SPEC
{"name": "secgl", "request": {"resources": {"gpus": 0, "cpus": 1, "cpuMemoryGb": 1},
 "docker": {"image": "deploy:$ENV_SECRET@registry.example.org:4567/lab/img:v1", "command": "true"}}}
SPEC
chmod 644 sec*.json
check "a job with secrets in its environment is accepted" as_other cp sec.json "$J/"
check "its worker gets the secret" job_state_in "$J" sec SUCCEEDED
same "... and sees it" "$(printf %s "$ENV_SECRET" | sha256sum)" "$(cat "$J/sec/workers/1/log")"
check "a plain variable is shown in spec.json" grep -q '"PLAIN": *"shown"' "$J/sec/spec.json"
check "a URL's password is not" grep -qF '"DATA_URL": "https://me:<redacted>@data.example.org/x"' "$J/sec/spec.json"
fails "a refused spec with a secret: EINVAL" "Invalid argument" as_other cp sec-bad.json "$J/"
same "the refused spec, left to be fixed, is its owner's alone" "600 600" \
	"$(stat -c %a "$J/sec-bad.json") $(stat -c %a "$J/sec-bad.json.error")"
fails "another user cannot read it" "Permission denied" setpriv --reuid=65533 --regid=65533 --clear-groups cat "$J/sec-bad.json"
check "a GPULab spec with a registry password in its image" as_other cp sec-gl.json "$J/"
check "it runs" job_state_in "$J" secgl SUCCEEDED
ls -l "$M/datastores/bucket" "$M/datastores/share" >/dev/null 2>&1	# fail: servers down
"$MLFS" check h.conf >check.out 2>&1
cat "$M"/.mlfs/* >mlfs-files.out 2>&1
# Every file of the tree (jobs/, .mlfs/), the daemon's log, mlfs check, and
# what of the state folder another user can read.
sweep() {
	grep -rlaF -e "$S3_SECRET" -e "$SMB_SECRET" -e "$ENV_SECRET" "$J"/*/ "$M/.mlfs" \
		"$T_DIR/mount.mnt.log" check.out mlfs-files.out 2>/dev/null
	as_other find "$T_DIR/state" -type f -readable -exec grep -laF -e "$S3_SECRET" -e "$SMB_SECRET" \
		-e "$ENV_SECRET" {} + 2>/dev/null
}
same "no secret in any file of the tree's jobs, .mlfs/, the log, mlfs check, or the state another user reads" "" "$(sweep)"
check "the sweep would see one: the journal holds the spec" grep -qF "$ENV_SECRET" state/jobs.journal
same "the journal is the daemon's alone" 600 "$(stat -c %a state/jobs.journal)"
fails "another user cannot read it" "Permission denied" as_other cat state/jobs.journal

# --- privilege: one user's worker cannot reach another's view or output
printf 'root only\n' >data/private.txt
chmod 600 data/private.txt
cat >rview.json <<SPEC
{"name": "rview", "workers": [{"command": "echo staged >/opt/ml/output/mine.txt; sleep 30"}],
 "data": {"datasets": ["mnist"], "output": {"type": "local", "path": "$T_DIR/out"}}}
SPEC
check "root's job with a view is accepted" cp rview.json "$J/"
check "it runs" job_state_in "$J" rview RUNNING
RV=$T_DIR/state/jobs/rview/workers/1/view
for _ in $(seq 1 50); do [ -s "$RV/output/mine.txt" ] && break; sleep 0.1; done
check "its view is mounted and has its output" test -s "$RV/output/mine.txt"
fails "nobody cannot list root's worker's view" "Permission denied" as_other ls "$RV/"
fails "... nor read its input" "Permission denied" as_other cat "$RV/input/private.txt"
fails "... nor its staged output through the tree" "Permission denied" as_other ls "$J/rview/workers/1/output/"
fails "... nor write into it" "Permission denied" as_other sh -c "echo x >'$J/rview/workers/1/output/planted'"
cat >peek.json <<SPEC
{"name": "peek", "workers": [{"command": "cat $RV/input/private.txt $RV/output/mine.txt; ls $T_DIR/state/outputs/*/files; echo done"}]}
SPEC
chmod 644 peek.json
check "a job of nobody that tries the same" as_other cp peek.json "$J/"
check "it ends" job_state_in "$J" peek SUCCEEDED FAILED
check "... and read nothing of root's" sh -c "! grep -qE 'root only|staged' '$J/peek/workers/1/log' && grep -q 'Permission denied' '$J/peek/workers/1/log'"
fails "nobody cannot cancel root's job" "Operation not permitted" as_other bash -c "echo cancel >'$J/rview/ctl'"
fails "... nor remove a finished one of root's" "Permission denied" as_other rm -r "$J/rootjob"
check "... which is still there" test -f "$J/rootjob/state"
check "root cancels it" sh -c "echo cancel >'$J/rview/ctl'"
check "its output is still delivered" sh -c "for i in \$(seq 1 100); do [ -s '$T_DIR/out/rview.zip' ] && exit 0; sleep 0.1; done; exit 1"
same "the job ran as root, which wrote the spec; peek as nobody" "0 $OTHER" \
	"$(json "$J/rview/status.json" "d['uid']") $(json "$J/peek/status.json" "d['uid']")"

# --- a daemon holding secrets cannot be read by its user's other processes
mkdir -p nmnt nstate ncache
chown $OTHER:$OTHER nmnt nstate ncache
cat >n.conf <<CONF
[mlfs]
state_dir = $T_DIR/nstate
cache_dir = $T_DIR/ncache
[datastore share]
type = smb
address = 127.0.0.1:1
share = s
username = u
password = $SMB_SECRET
CONF
chmod 644 n.conf
# setpriv itself, not the as_other function: $! must be the daemon, not a subshell
setpriv --reuid=$OTHER --regid=$OTHER --clear-groups "$MLFS" mount -f n.conf "$T_DIR/nmnt" 2>nmount.log &
npid=$!
for _ in $(seq 1 100); do is_mounted "$T_DIR/nmnt" && break; sleep 0.05; done
check "nobody mounts mlfs" is_mounted "$T_DIR/nmnt"
same "the pid is nobody's daemon" "$OTHER mlfs" "$(stat -c %u /proc/$npid) $(cat /proc/$npid/comm)"
setpriv --reuid=$OTHER --regid=$OTHER --clear-groups sleep 30 &
spid=$!
for _ in $(seq 1 50); do [ "$(cat /proc/$spid/comm)" = sleep ] && break; sleep 0.05; done
check "nobody reads the environment of its own other processes" as_other cat /proc/$spid/environ
fails "... but not the daemon's: it is not dumpable" "Permission denied" as_other cat /proc/$npid/environ
fails "... nor its memory" "Permission denied" as_other python3 -c "open('/proc/$npid/mem', 'rb')"
kill $spid
as_other fusermount3 -u "$T_DIR/nmnt"
wait $npid
same "that daemon exited cleanly" 0 "$?"
check "... without a sanitizer report" sh -c "! grep -qE 'AddressSanitizer|runtime error|LeakSanitizer' nmount.log"

# --- open files: a daemon out of descriptors answers EMFILE, then recovers
unmount_fg "$M"
fg_mount "$M" "$T_DIR/mount.mnt.log" prlimit --nofile=256:256 "$MLFS" mount -f h.conf "$M" ||
	{ t_finish; exit 1; }
for i in $(seq 1 400); do echo "$i" >"data/f$i"; done
python3 - "$M/datastores/d" >nofile.out 2>&1 <<'PY'
import errno, os, sys
fds, err = [], None
for i in range(1, 401):
    try:
        fds.append(os.open("%s/f%d" % (sys.argv[1], i), os.O_RDONLY))
    except OSError as e:
        err = errno.errorcode[e.errno]
        break
print(len(fds), err)
for fd in fds:
    os.close(fd)
PY
read -r opened err <nofile.out
check "with 256 descriptors the daemon runs out before 400 open files" test "$opened" -lt 400
same "the next open fails with EMFILE" EMFILE "$err"
same "once they are closed, reads work again" 400 "$(cat "$M/datastores/d/f400")"
check "the daemon logged why, once" test "$(grep -c "out of file descriptors" "$T_DIR/mount.mnt.log")" -eq 1
unmount_fg "$M"
T_FAIL=$T_FAIL t_finish
