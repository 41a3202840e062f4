#!/bin/bash
# jobs_test.sh - jobs/ through a real mount: submitting with cp, shell
# redirection, mv and an editor's rename; thirty-odd bad specs with their
# errno and .error; a node of 2 A100s shared by three jobs; reasons for
# jobs that wait and jobs that never can run; cancel, retries, timeouts,
# OOM; wait without holding threads; another uid; kill -9 of the daemon.
# Usage: jobs_test.sh MLFS
set -u
MLFS=$1
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1
mkdir -p data mnt bad
cat >jobs.conf <<CONF
[mlfs]
state_dir = $T_DIR/state
cache_dir = $T_DIR/cache
[node]
gpus = 2
gpu_type = A100
cuda_version = 12.2
cpus = 8
memory_gb = 16
price = 1.5
[datastore d]
type = local
root = $T_DIR/data
[dataset mnist]
source = d:/
CONF
M=$T_DIR/mnt
J=$M/jobs

state() { cat "$J/$1/state" 2>/dev/null; }
reason() { job_reason "$J/$1"; }
# wait_state JOB STATE [TENTHS]: polls until JOB is in STATE (default 10 s).
wait_state() {
	for _ in $(seq 1 "${3:-100}"); do
		[ "$(state "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	echo "# $1 is '$(state "$1")', not $2: $(cat "$J/$1/reason" 2>/dev/null)"
	return 1
}
# spec NAME COMMAND [EXTRA JSON MEMBERS]: a one-worker native spec.
spec() { printf '{"name": "%s", "workers": [{"command": "%s"}]%s}\n' "$1" "$2" "${3:+, $3}"; }
# errno_of FILE TEXT: the errno name a write(2) of TEXT to FILE fails with, or "ok".
errno_of() {
	python3 -c "import errno,os,sys
fd = os.open(sys.argv[1], os.O_WRONLY)
try:
    os.write(fd, sys.argv[2].encode()); print('ok')
except OSError as e:
    print(errno.errorcode[e.errno])" "$@"
}
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

mount_fg jobs.conf "$M" || { t_finish; exit 1; }

# --- submitting: cp, redirection, mv from elsewhere, an editor's rename
spec cp1 "echo hello from cp" >cp1.json
check "cp of a spec into jobs/ succeeds" cp cp1.json "$J/"
check "the job's folder appears" test -d "$J/cp1"
check "the written file disappears" test ! -e "$J/cp1.json"
check "the acceptance is in the journal" grep -q '"name":"cp1"' state/jobs.journal
check "cp1 succeeds" wait_state cp1 SUCCEEDED
same "its log has the worker's line, prefixed" "[1] hello from cp" "$(cat "$J/cp1/log")"
same "the worker's own log has it bare" "hello from cp" "$(cat "$J/cp1/workers/1/log")"
same "exit_code" 0 "$(cat "$J/cp1/workers/1/exit_code")"
same "worker state" SUCCEEDED "$(cat "$J/cp1/workers/1/state")"
check "events record the way" sh -c "grep -q 'accepted from cp1.json' '$J/cp1/events' && grep -q 'RUNNING' '$J/cp1/events' && grep -q 'SUCCEEDED' '$J/cp1/events'"
same "ls of a job" "ctl events log reason spec.json state status.json wait workers" "$(ls "$J/cp1" | xargs)"
check "shell redirection submits" sh -c "$(declare -f spec); spec redir 'true' >'$J/redir.json'"
check "the redirected spec became a job" test -d "$J/redir"
spec moved "true" >moved.json
check "mv from another filesystem submits" mv moved.json "$J/"
check "the moved spec became a job" test -d "$J/moved"
spec .draft-bad "x" '"resources": 5' >"$J/.draft.json"
check "a scratch file (leading dot) is kept as written" test -f "$J/.draft.json"
check "a scratch file gets no .error" test ! -e "$J/.draft.json.error"
echo 'not json' >"$J/notes.json~"
check "a scratch file (trailing ~) is kept unchecked" grep -q 'not json' "$J/notes.json~"
spec renamed "true" >"$J/.tmp-edit"
check "an editor's rename into a real name submits" mv "$J/.tmp-edit" "$J/renamed.json"
check "the renamed spec became a job" test -d "$J/renamed"
check "the scratch name is gone" test ! -e "$J/.tmp-edit"
printf '{"workers": [{"command": "true"}]}' >nameless.json
check "a spec without a name is named after its file" sh -c "cp nameless.json '$J/' && test -d '$J/nameless'"

# --- bad specs: close fails with the errno, FILE.error holds file:line:col: field: message
bad() {	# bad FILE EXPECTED-PREFIX-REGEX CONTENT
	printf '%s\n' "$3" >"bad/$1"
	if cp "bad/$1" "$J/" 2>"$T_DIR/cp.err"; then
		not_ok "bad spec $1 was accepted"
		return
	fi
	if ! grep -q "Invalid argument" "$T_DIR/cp.err"; then
		not_ok "bad spec $1: cp said $(cat "$T_DIR/cp.err")"
	elif grep -qE "^$2" "$J/$1.error"; then
		ok "bad spec $1 is refused with EINVAL and $(head -c 60 "$J/$1.error" | head -1)"
	else
		not_ok "bad spec $1: .error is '$(cat "$J/$1.error")', wanted /^$2/"
	fi
}
W='"workers": [{"command": "true"}]'
bad b01.json 'b01.json:2:1: json: ' '{'
bad b02.json 'b02.json:1:1: json: ' '[1, 2]'
bad b03.json 'b03.json:1:1: workers: ' '{}'
bad b04.json 'b04.json:1:13: workers: ' '{"workers": "python x.py"}'
bad b05.json 'b05.json:1:13: workers: ' '{"workers": []}'
bad b06.json 'b06.json:1:26: workers\[0\].command: ' '{"workers": [{"command": ""}]}'
bad b07.json 'b07.json:1:26: workers\[0\].command: ' '{"workers": [{"command": "   "}]}'
bad b08.json 'b08.json:1:[0-9]+: workers\[0\].command: ' '{"workers": [{}]}'
bad b09.json 'b09.json:1:26: workers\[0\].command: ' '{"workers": [{"command": 5}]}'
bad b10.json 'b10.json:1:[0-9]+: resources.gpu_count: ' "{$W, \"resources\": {\"gpu_count\": -1}}"
bad b11.json 'b11.json:1:[0-9]+: resources.gpu_count: ' "{$W, \"resources\": {\"gpu_count\": \"2\"}}"
bad b12.json 'b12.json:1:[0-9]+: resources.cpu_count: ' "{$W, \"resources\": {\"cpu_count\": 6}}"
bad b13.json 'b13.json:1:[0-9]+: resources.cpu_count: ' "{$W, \"resources\": {\"cpu_count\": -4}}"
bad b14.json 'b14.json:1:[0-9]+: resources.disk_size_gb: ' "{$W, \"resources\": {\"disk_size_gb\": 5}}"
bad b15.json 'b15.json:1:[0-9]+: resources.disk_size_gb: ' "{$W, \"resources\": {\"disk_size_gb\": 2000}}"
bad b16.json 'b16.json:1:[0-9]+: resources.memory_gb: ' "{$W, \"resources\": {\"memory_gb\": -1}}"
bad b17.json 'b17.json:1:[0-9]+: resources.max_price: ' "{$W, \"resources\": {\"max_price\": \"cheap\"}}"
bad b18.json 'b18.json:1:[0-9]+: resources.gpu_types: ' "{$W, \"resources\": {\"gpu_types\": \"A100\"}}"
bad b19.json 'b19.json:1:[0-9]+: resources: ' "{$W, \"resources\": 4}"
bad b20.json 'b20.json:1:67: data.datasets\[1\]: no dataset named "nosuch" in ' "{$W, \"data\": {\"datasets\": [\"mnist\", \"nosuch\"]}}"
bad b21.json 'b21.json:1:[0-9]+: data.output.path: no datastore named "nope" in ' "{$W, \"data\": {\"output\": {\"type\": \"datastore\", \"path\": \"nope:/x\"}}}"
bad b22.json 'b22.json:1:[0-9]+: data.output.type: a checkpoint output is kept in the datastore \[mlfs\] store names' "{$W, \"data\": {\"output\": {\"type\": \"checkpoint\", \"path\": \"c\"}}}"
bad b20.json 'b20.json:1:10: name: ' "{\"name\": \"bad name!\", $W}"
bad b21.json 'b21.json:1:10: name: ' "{\"name\": \"$(printf 'n%.0s' $(seq 1 65))\", $W}"
bad b22.json 'b22.json:1:10: name: ' "{\"name\": \"..\", $W}"
bad b23.json 'b23.json:1:10: type: ' "{\"type\": \"serving\", $W}"
bad b24.json 'b24.json:1:[0-9]+: retry_count: ' "{$W, \"retry_count\": -1}"
bad b25.json 'b25.json:1:[0-9]+: wait_timeout_seconds: ' "{$W, \"wait_timeout_seconds\": 0}"
bad b26.json 'b26.json:1:[0-9]+: run_timeout_seconds: ' "{$W, \"run_timeout_seconds\": \"10\"}"
bad b27.json 'b27.json:1:[0-9]+: environment.variables' "{$W, \"environment\": {\"variables\": {\"1BAD\": \"x\"}}}"
bad b28.json 'b28.json:1:[0-9]+: environment.variables: ' "{$W, \"environment\": {\"variables\": [1]}}"
bad b29.json 'b29.json:1:[0-9]+: worker_count: ' "{$W, \"worker_count\": 0}"
bad b30.json 'b30.json:1:[0-9]+: worker_count: ' '{"workers": [{"command": "a"}, {"command": "b"}], "worker_count": 2}'
bad b31.json 'b31.json:1:[0-9]+: data.output.path: ' "{$W, \"data\": {\"output\": {\"type\": \"s3\", \"path\": \"/local/dir\"}}}"
bad b32.json 'b32.json:1:[0-9]+: data.output.path: ' "{$W, \"data\": {\"output\": {\"type\": \"local\", \"path\": \"rel/dir\"}}}"
bad b33.json 'b33.json:1:[0-9]+: json: ' "{$W} trailing"
bad b34.json 'b34.json:2:[0-9]+: resources.gpu_count: ' "{$W,
  \"resources\": {\"gpu_count\": 1.5}}"
bad 'b35 bad name.json' "b35 bad name.json:1:1: name: " "{$W}"
bad b36.json 'b36.json:1:[0-9]+: resources.cpu_count: ' "{$W, \"resources\": {\"cpu_count\": 6, \"disk_size_gb\": 5}}"
check "every problem of a spec is listed" grep -q 'disk_size_gb' "$J/b36.json.error"
check "the refused spec stays to be fixed" test -f "$J/b06.json"
check "a refused spec leaves no job" test ! -e "$J/b06"
spec cp1 "true" >dup.json
fails "a taken name: close fails with EEXIST" "File exists" cp dup.json "$J/"
check "a taken name: .error says so, at the name" grep -q 'dup.json:1:10: name: a job named cp1 exists already' "$J/dup.json.error"
python3 -c "import sys; sys.stdout.write('{\"workers\": [{\"command\": \"true\"}], \"x\": \"' + 'a' * 1100000 + '\"}')" >big.json
fails "a spec over 1 MiB: EFBIG" "File too large" cp big.json "$J/"
check "a spec over 1 MiB: .error says so" grep -q '1 MiB' "$J/big.json.error"
check "a fixed spec replaces its .error" sh -c "spec() { printf '{\"name\": \"%s\", \"workers\": [{\"command\": \"%s\"}]}\n' \$1 \$2; }; spec b06 true >'$J/b06.json'"
check "... the .error is gone" test ! -e "$J/b06.json.error"
check "... and the job is there" test -d "$J/b06"
check "rm of a .error file" rm "$J/b01.json.error"

# --- a node of 2 A100s: three 1-GPU jobs
G='"resources": {"gpu_types": ["A100"], "gpu_count": 1}'
for g in g1 g2; do spec $g 'echo CVD=$CUDA_VISIBLE_DEVICES; sleep 3' "$G" >"$J/$g.json"; done
spec g3 'echo CVD=$CUDA_VISIBLE_DEVICES' "$G" >"$J/g3.json"
check "g1 runs" wait_state g1 RUNNING
check "g2 runs" wait_state g2 RUNNING
same "g3 queues" QUEUED "$(state g3)"
# the scheduler's pass over g3 may come a moment after g1 and g2 run (ASan)
same "g3 says why, with the numbers" "waiting for GPUs: needs 1 x A100, node has 0 x A100 free" "$(reason g3)"
check "g1 and g2 got different GPUs" sh -c "sleep 0.3; test \"\$(cat '$J/g1/log')\" != \"\$(cat '$J/g2/log')\""
check ".mlfs/node shows who holds the GPUs" sh -c "grep -q 'gpu.0 g[12]/1' '$M/.mlfs/node' && grep -q 'gpu.1 g[12]/1' '$M/.mlfs/node'"
check "g3 runs once a GPU frees" wait_state g3 SUCCEEDED 100
check "g3 got a GPU index" grep -qE '^\[1\] CVD=[01]$' "$J/g3/log"

# --- jobs that never fit here, and the wait timeout
spec v100 true '"resources": {"gpu_types": ["V100"]}' >"$J/v100.json"
same "a GPU type the node lacks" "never satisfiable here: needs 1 x V100, node has only A100" "$(reason v100)"
same "... stays QUEUED" QUEUED "$(state v100)"
spec four true '"resources": {"gpu_count": 4}' >"$J/four.json"
same "more GPUs than the node has" "never satisfiable here: needs 4 GPU(s) per worker, node has 2" "$(reason four)"
spec pricey true '"resources": {"gpu_count": 1, "max_price": 1.0}' >"$J/pricey.json"
check "a max_price below the node's price" has "$(reason pricey)" "max_price 1 is below the node's price 1.5"
spec cuda true '"resources": {"gpu_count": 1, "min_cuda_version": "12.4"}' >"$J/cuda.json"
check "a CUDA version above the node's" has "$(reason cuda)" "needs CUDA 12.4 or newer, node has 12.2"
spec cpus true '"resources": {"cpu_count": 16}' >"$J/cpus.json"
check "more CPUs than [node] declares" has "$(reason cpus)" "needs 16 CPUs, node has 8"
spec waited true '"resources": {"gpu_types": ["V100"]}, "wait_timeout_seconds": 1' >"$J/waited.json"
check "the wait timeout fails a job that cannot start" wait_state waited FAILED 40
check "... and says why" grep -q 'waited 1 s (wait_timeout_seconds)' "$J/waited/reason"
for j in v100 four pricey cuda cpus; do echo cancel >"$J/$j/ctl"; done
check "queued jobs are cancelled at once" sh -c "for j in v100 four pricey cuda cpus; do test \"\$(cat '$J/'\$j/state)\" = CANCELLED || exit 1; done"

# --- cancel, ctl, retries, run timeout, OOM
spec long 'echo started; sleep 31337' >"$J/long.json"
check "long runs" wait_state long RUNNING
check "long's worker is alive" sh -c "sleep 0.3; pgrep -f 'sleep 3133[7]' >/dev/null"
same "ctl refuses an unknown command" EINVAL "$(errno_of "$J/long/ctl" hold)"
same "ctl refuses a second word" EINVAL "$(errno_of "$J/long/ctl" 'cancel now')"
same "ctl refuses a command with a control character" EINVAL "$(errno_of "$J/long/ctl" $'cancel\x01')"
same "ctl refuses a long write, never cut to fit" EINVAL "$(errno_of "$J/long/ctl" "cancel$(printf '%80s')")"
fails "rm -r of a live job: EBUSY" "Device or resource busy" rm -r "$J/long"
check "cancel through ctl" sh -c "echo cancel >'$J/long/ctl'"
check "long is CANCELLED" wait_state long CANCELLED
check "its process group is gone" sh -c "! pgrep -f 'sleep 3133[7]'"
same "cancel of an ended job: EINVAL" EINVAL "$(errno_of "$J/long/ctl" cancel)"
spec flaky 'exit 3' '"retry_count": 2' >"$J/flaky.json"
check "a failing worker is retried, then FAILED" wait_state flaky FAILED
same "... after 3 attempts" 3 "$(json "$J/flaky/status.json" "len(d['workers'][0]['attempts'])")"
same "... its exit code" 3 "$(cat "$J/flaky/workers/1/exit_code")"
check "... the reason says so" grep -q 'worker 1 exited 3 after 3 attempt' "$J/flaky/reason"
check "... each retry is an event" sh -c "test \$(grep -c retrying '$J/flaky/events') -eq 2"
spec second 'test -e $ML_OUTPUT_PATH/tried || { touch $ML_OUTPUT_PATH/tried; exit 1; }' '"retry_count": 5' >"$J/second.json"
check "a retry that succeeds" wait_state second SUCCEEDED
same "... on attempt 2" 2 "$(json "$J/second/status.json" "len(d['workers'][0]['attempts'])")"
spec slow 'sleep 30' '"run_timeout_seconds": 1, "retry_count": 3' >"$J/slow.json"
check "the run timeout stops a worker" wait_state slow FAILED 60
check "... says so, and does not retry" sh -c "grep -q run_timeout_seconds '$J/slow/reason' && grep -q '\"attempt\": 1' '$J/slow/status.json' && ! grep -q '\"attempt\": 2' '$J/slow/status.json'"
spec hog "python3 -c 'b = bytearray(400 * 1024 * 1024); print(len(b))'" '"resources": {"memory_gb": 0.05}, "retry_count": 3' >"$J/hog.json"
if [ -w /sys/fs/cgroup/memory ] || [ -f /sys/fs/cgroup/cgroup.controllers ]; then
	check "a worker over its memory is killed" wait_state hog FAILED 100
	check "... classified oom, not retried" sh -c "grep -q '(oom)' '$J/hog/reason' && ! grep -q '\"attempt\": 2' '$J/hog/status.json'"
else
	ok "# SKIP no writable memory cgroup here"
fi

# --- the worker's environment, several workers, secrets, ignored fields
cat >"$J/envjob.json" <<'SPEC'
{"name": "envjob", "worker_count": 3,
 "workers": [{"command": "echo W=$MLFS_WORKER N=$JOB_NAME O=${PROXIML_OUTPUT_PATH##*/} D=$CUDA_DEVICE_ORDER V=$MY_VAR K=$API_KEY"}],
 "environment": {"variables": {"MY_VAR": "42", "API_KEY": "s3cret-value"}},
 "data": {"datasets": ["mnist"]}}
SPEC
check "envjob succeeds" wait_state envjob SUCCEEDED
for w in 1 2 3; do
	check "worker $w has its environment" grep -qx "\[$w\] W=$w N=envjob O=output D=PCI_BUS_ID V=42 K=s3cret-value" "$J/envjob/log"
done
spec paths 'pwd; for v in $ML_DATA_PATH $ML_MODEL_PATH $ML_CHECKPOINT_PATH $ML_OUTPUT_PATH; do test -d $v -a -w $v && echo $v; done' >"$J/paths.json"
check "paths succeeds" wait_state paths SUCCEEDED
ml=$T_DIR/state/jobs/paths/workers/1/ml
same "the ML_* folders are the worker's own, in the state dir, and it runs in models/" \
	"[1] $ml/models [1] $ml/input [1] $ml/models [1] $ml/checkpoint [1] $ml/output" \
	"$(xargs <"$J/paths/log")"
same "workers/ lists the three" "1 2 3" "$(ls "$J/envjob/workers" | xargs)"
check "spec.json redacts the secret" sh -c "grep -q '<redacted>' '$J/envjob/spec.json' && ! grep -q s3cret '$J/envjob/spec.json'"
check "status.json carries no secret" sh -c "! grep -q s3cret '$J/envjob/status.json'"
same "spec.json shows the datasets" "['mnist']" "$(json "$J/envjob/spec.json" "d['data']['datasets']")"

# --- following a job: tail -f, wait, a hundred waiters
spec follow 'echo one; sleep 1; echo two' >"$J/follow.json"
timeout 4 tail -f "$J/follow/log" >tail.out 2>&1
check "tail -f sees log grow" sh -c "grep -q '\[1\] one' tail.out && grep -q '\[1\] two' tail.out"
spec waitjob 'sleep 2' >"$J/waitjob.json"
waiters=
for i in $(seq 1 100); do
	cat "$J/waitjob/wait" >"wait.$i" &
	waiters="$waiters $!"
done
sleep 0.5
start=$(date +%s%N)
cat "$J/cp1/state" >/dev/null && ls "$J" >/dev/null
same "a hundred readers of wait do not stall the mount" 1 "$(( ($(date +%s%N) - start) < 1000000000 ))"
same "... the job still runs meanwhile" RUNNING "$(state waitjob)"
# shellcheck disable=SC2086
wait $waiters
check "... each reader gets the final state" sh -c "for i in \$(seq 1 100); do grep -qx SUCCEEDED wait.\$i || exit 1; done"
spec waitlong 'sleep 30' >"$J/waitlong.json"
start=$(date +%s%N)
timeout -s INT 1 cat "$J/waitlong/wait"
same "an interrupted read of wait returns" 1 "$(( ($(date +%s%N) - start) < 3000000000 ))"
same "wait of an ended job answers at once" SUCCEEDED "$(timeout 2 cat "$J/cp1/wait")"
echo cancel >"$J/waitlong/ctl"

# --- another uid
spec mine 'id -u' >mine.json
check "another uid submits" as_other cp mine.json "$J/"
check "its job runs" wait_state mine SUCCEEDED
same "... as that uid" "[1] $OTHER" "$(cat "$J/mine/log")"
same "the job's folder belongs to it" "$OTHER" "$(stat -c %u "$J/mine")"
spec rootjob 'sleep 30' >"$J/rootjob.json"
same "it cannot cancel root's job: EPERM" EPERM "$(as_other sh -c "$(declare -f errno_of); errno_of '$J/rootjob/ctl' cancel")"
same "root's job runs on" RUNNING "$(state rootjob)"
check "root cancels it" sh -c "echo cancel >'$J/rootjob/ctl'"
check "rootjob is cancelled" wait_state rootjob CANCELLED
fails "it cannot remove root's job" "rm: " as_other rm -r "$J/cp1"
check "cp1 is still there" test -d "$J/cp1"
check "root removes an ended job" rm -r "$J/cp1"
check "... it is gone" test ! -e "$J/cp1"
check "... and stays gone from the journal" sh -c "grep -q '\"op\":\"remove\",\"name\":\"cp1\"' state/jobs.journal"
check "the owner removes its own job" as_other rm -r "$J/mine"

# --- kill -9 of the daemon, then a new mount
spec survivor 'sleep 3; echo survived' "$G" >"$J/survivor.json"
spec lost 'sleep 30' >"$J/lost.json"
spec big2 'echo ran after' '"resources": {"gpu_count": 2}' >"$J/big2.json"
check "survivor runs" wait_state survivor RUNNING
check "lost runs" wait_state lost RUNNING
same "big2 waits for both GPUs" QUEUED "$(state big2)"
if grep -qE 'AddressSanitizer|runtime error' "$T_DIR/mount.mnt.log"; then
	not_ok "the first daemon has a sanitizer report"
	grep -E -A40 'AddressSanitizer|runtime error' "$T_DIR/mount.mnt.log" | sed 's/^/#   /' | head -60
else
	ok "no sanitizer report from the first daemon"
fi
lost_pid=$(json state/jobs/lost/status.json "d['workers'][0]['run']['pid']")
{ kill -9 "$MOUNT_PID"; wait "$MOUNT_PID"; } 2>/dev/null
MOUNT_PID=
fusermount3 -u -z "$M" 2>/dev/null
[ -z "$lost_pid" ] || pkill -9 -s "$lost_pid"	# the worker and its watcher (one session) die while no daemon runs
mount_fg jobs.conf "$M" || { t_finish; exit 1; }
check "after kill -9, every job is listed" sh -c "for j in redir moved renamed g1 g2 g3 flaky envjob survivor lost big2 b06; do test -d '$J/'\$j || { echo missing \$j; exit 1; }; done"
check "the survivor was found running again" grep -q 'found running again' "$J/survivor/events"
check "the survivor ends normally" wait_state survivor SUCCEEDED 80
same "... with its output" "[1] survived" "$(cat "$J/survivor/log")"
check "a worker lost while mlfs was down is FAILED" wait_state lost FAILED
check "... with the reason" grep -q 'lost' "$J/lost/reason"
check "the queued job runs after the restart" wait_state big2 SUCCEEDED 80
same "ended jobs keep their state" FAILED "$(state flaky)"
unmount_fg "$M"

# --- GPUs detected with nvidia-smi when [node] does not say (a stand-in
# printing what the real one prints, in the same format)
mkdir -p fakebin
cat >fakebin/nvidia-smi <<'SMI'
#!/bin/sh
case "$*" in
*--query-gpu=index,name,memory.total,pci.bus_id*)
	printf '0, NVIDIA H100 80GB HBM3, 81559, 00000000:3B:00.0\n1, NVIDIA H100 80GB HBM3, 81559, 00000000:86:00.0\n' ;;
"")
	echo "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |" ;;
*) exit 6 ;;
esac
SMI
chmod +x fakebin/nvidia-smi
sed '/^\[node\]/,/^price/d' jobs.conf >detect.conf
PATH="$T_DIR/fakebin:$PATH" mount_fg detect.conf "$M" || { t_finish; exit 1; }
check "nvidia-smi's GPUs are the node's" sh -c "grep -qx 'gpus 2' '$M/.mlfs/node' && grep -qx 'gpu_type NVIDIA H100 80GB HBM3' '$M/.mlfs/node' && grep -qx 'cuda_version 12.4' '$M/.mlfs/node'"
spec h100 'echo CVD=$CUDA_VISIBLE_DEVICES' '"resources": {"gpu_types": ["H100"], "gpu_count": 2}' >"$J/h100.json"
check "a spec's H100 matches NVIDIA H100 80GB HBM3" wait_state h100 SUCCEEDED
same "... and gets both GPUs" "[1] CVD=0,1" "$(cat "$J/h100/log")"
same "... which its attempt in status.json still names once it ended" "[0, 1]" \
	"$(json "$J/h100/status.json" "d['workers'][0]['attempts'][0]['gpus']")"
# no /proc/driver/nvidia here: each GPU's device taken from its index, its address shown
check "each GPU's device and PCI address in .mlfs/node" sh -c "grep -qx 'gpu_device.0 /dev/nvidia0 00000000:3B:00.0' '$M/.mlfs/node' && grep -qx 'gpu_device.1 /dev/nvidia1 00000000:86:00.0' '$M/.mlfs/node'"
spec h10 true '"resources": {"gpu_types": ["H10"]}' >"$J/h10.json"
check "an H10 does not match an H100" has "$(reason h10)" 'never satisfiable here: needs 1 x H10'
unmount_fg "$M"

t_finish
