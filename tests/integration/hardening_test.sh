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
t_setup
cd "$T_DIR" || exit 1
mkdir -p data mnt outside
OTHER=65534	# nobody
M=$T_DIR/mnt
J=$M/jobs
S3_SECRET='s3cret-KEY-never-shown-1234'
SMB_SECRET='smb-PASS-never-shown-5678'
ENV_SECRET='env-TOKEN-never-shown-9012'
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
[dataset mnist]
source = d:/
CONF
printf 'hello\n' >data/a.txt
chmod 755 data

as_other() { setpriv --reuid=$OTHER --regid=$OTHER --clear-groups "$@"; }
spec() { printf '{"name": "%s", "workers": [{"command": "%s"}]%s}\n' "$1" "$2" "${3:+, $3}"; }
state() { cat "$J/$1/state" 2>/dev/null; }

chmod 666 /dev/fuse
trap 'chmod 600 /dev/fuse' EXIT
mount_fg h.conf "$M" || { t_finish; exit 1; }

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
