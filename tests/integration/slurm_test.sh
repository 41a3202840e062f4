#!/bin/bash
# slurm_test.sh - the slurm executor against a real one-node Slurm cluster
# (munged, slurmctld, slurmd with two fake GPUs, scripts/server-slurm.sh)
# on 127.0.0.1: jobs written into jobs/ go to Slurm, which squeue and
# scontrol (the independent view) show with the mapped options; a 2-worker
# job is a 2-task array whose workers see Slurm's CUDA_VISIBLE_DEVICES and
# their data at /opt/ml, and whose output arrives; 3 GPUs are never
# satisfiable; cancel reaches Slurm; a failed command is FAILED with its
# exit code; Slurm forgetting a job (MinJobAge 2 s) loses nothing; a
# requeue is RETRYING; the daemon killed and started again finds its jobs;
# a job of an ordinary user runs as that user, with its view through
# fusermount3 and /opt/ml from a user namespace; workers with an image
# run in it (served by a registry on 127.0.0.1): a user's with rootless
# podman (its own uid inside, its own storage; the test gives it
# /etc/subuid and /etc/subgid ranges and takes them back), root's rootful,
# a missing image FAILED with the registry's words, a cancel stopping the
# container; task roles are one allocation of two tasks; the state comes
# from one squeue per interval.
# Usage: slurm_test.sh MLFS
set -u
MLFS=$1
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/lib.sh"
SERVER=$TOP/scripts/server-slurm.sh
t_setup
cd "$T_DIR" || exit 1
FUSE_MODE=$(stat -c %a /dev/fuse)
# a user with a home and subordinate ids, for rootless podman (its section below)
CUSER=mlfsslurm
CUSER_MADE=
REG_DIR=$T_DIR/registry
# Rootless podman keeps a pause process holding the user's namespaces.  Where / is not a
# shared mount (here), its mount namespace holds a copy of every mount made before it,
# the gateway's too, whose daemon would then never see its unmount: it goes first.
user_pause_stop() {
	local uid run pid
	uid=$(id -u "$CUSER") || return 0
	for run in "/run/user/$uid" "/tmp/podman-run-$uid"; do
		pid=$(cat "$run/libpod/tmp/pause.pid" 2>/dev/null) || continue
		kill "$pid" 2>/dev/null
		for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	done
}
ctr_cleanup() {
	"$TOP/scripts/server-registry.sh" stop "$REG_DIR" >/dev/null 2>&1
	[ -n "${BB1:-}" ] && podman rmi -f "$BB1" >/dev/null 2>&1
	[ -n "$CUSER_MADE" ] || return 0
	local uid
	uid=$(id -u "$CUSER")
	user_pause_stop
	rm -rf "/tmp/podman-run-$uid" "/tmp/storage-run-$uid" "/tmp/containers-user-$uid" "/tmp/mlfs-$uid"
	userdel -f "$CUSER" 2>/dev/null
	sed -i "/^$CUSER:/d" /etc/subuid /etc/subgid
	CUSER_MADE=
}
slurm_cleanup() {
	server_cleanup "$SERVER" "$T_DIR/slurm"
	ctr_cleanup
	chmod "$FUSE_MODE" /dev/fuse
}
t_cleanup() { slurm_cleanup; }
trap 'slurm_cleanup; rm -rf "$T_DIR"' EXIT

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# --- the cluster, and a bin_dir that logs every Slurm command mlfs runs
PORT=$(free_port) || { echo "no free port"; exit 1; }
if ! SLURM_TEST_MIN_JOB_AGE=2 SLURM_TEST_CPUS=32 "$SERVER" start "$T_DIR/slurm" "$PORT" >/dev/null; then
	not_ok "the Slurm cluster starts"
	t_finish
	exit 1
fi
export SLURM_CONF=$T_DIR/slurm/slurm.conf
# a registry on 127.0.0.1 serving the test images, for workers in their image
CTR=
if command -v podman >/dev/null && command -v docker-registry >/dev/null; then
	REG_PORT=$(free_port)
	REG=127.0.0.1:$REG_PORT
	BB1=$REG/mlfs-test/busybox:1
	check "the registry starts and serves the test images" sh -c "'$TOP/scripts/server-registry.sh' start '$REG_DIR' $REG_PORT >/dev/null && '$TOP/scripts/make-images.sh' '$(dirname "$MLFS")/images' $REG >/dev/null" && CTR=1
fi
mkdir -p bin data out mnt
chmod 777 out
for tool in sbatch squeue scontrol scancel; do
	cat >"bin/$tool" <<EOF
#!/bin/sh
echo "\$(date +%s.%N) $tool" >>$T_DIR/calls.log
exec $(command -v $tool) "\$@"
EOF
	chmod 755 "bin/$tool"
done
echo "the data" >data/a.txt
mkdir -p /opt/ml	# where a user namespace binds a worker's view (DESIGN §7)
cat >slurm.conf.mlfs <<CONF
[mlfs]
state_dir = $T_DIR/state
cache_dir = $T_DIR/cache
executor = slurm
log_size = 64K
[slurm]
poll_interval = 1
bin_dir = $T_DIR/bin
[datastore d]
type = local
root = $T_DIR/data
[dataset ds]
source = d:/
CONF
[ -n "$CTR" ] && printf '[containers]\ninsecure_registries = %s\n' "$REG" >>slurm.conf.mlfs
M=$T_DIR/mnt
J=$M/jobs
mount_fg slurm.conf.mlfs "$M" || { t_finish; exit 1; }
state() { cat "$J/$1/state" 2>/dev/null; }
# wait_grep PATTERN FILE: waits (10 s at most) until FILE has PATTERN.
wait_grep() { for _ in $(seq 1 100); do grep -q "$1" "$2" && return 0; sleep 0.1; done; cat "$2"; return 1; }
sid() { json "$J/$1/status.json" "d['workers'][${2:-0}].get('slurm_job_id', '')"; }

# --- a 2-worker job: a 2-task array, mapped options, GPUs from Slurm, data and output
cat >arr.json <<'SPEC'
{"name": "arr", "run_timeout_seconds": 600,
 "resources": {"gpu_count": 1, "gpu_types": ["Tesla"], "cpu_count": 2, "memory_gb": 1},
 "workers": [{"command": "echo CVD=$CUDA_VISIBLE_DEVICES; cat /opt/ml/input/a.txt; sleep 3; echo $MLFS_WORKER >/opt/ml/output/w.txt"},
             {"command": "echo CVD=$CUDA_VISIBLE_DEVICES; cat /opt/ml/input/a.txt; sleep 3; echo $MLFS_WORKER >/opt/ml/output/w.txt"}],
 "data": {"datasets": ["ds"], "output": {"type": "local", "path": "OUT"}}}
SPEC
sed -i "s|OUT|$T_DIR/out|" arr.json
cp arr.json "$J/"
check "the job runs on Slurm" job_state_in "$J" arr RUNNING STAGING_IN
ID=$(sid arr 0)
ID=${ID%_*}
same "status.json shows each worker's Slurm job id" "${ID}_1 ${ID}_2" "$(sid arr 0) $(sid arr 1)"
same "squeue shows a 2-task array named after the job" "${ID}_1 arr
${ID}_2 arr" "$(squeue -h -r -t all -j "$ID" -o '%i %j' | sort)"
scontrol show job "${ID}_1" >sc.txt
check "scontrol: one tesla GPU per task (--gres=gpu:tesla:1)" grep -q 'gpu:tesla:1' sc.txt
check "scontrol: 2 CPUs per task" grep -q 'MinCPUsNode=2' sc.txt
check "scontrol: 1 GB of memory (--mem=1024M)" grep -Eq 'mem=1G|MinMemoryNode=1G' sc.txt
check "scontrol: the time limit covers run_timeout_seconds and staging (40 min)" grep -q 'TimeLimit=00:40:00' sc.txt
check "scontrol: no requeue without retries" grep -q 'Requeue=0' sc.txt
check "the job succeeds" job_state_in "$J" arr SUCCEEDED
check "it went QUEUED, then RUNNING, then SUCCEEDED" sh -c "grep -o ' QUEUED: \| RUNNING: \| SUCCEEDED: ' '$J/arr/events' | uniq | tr -d ' :' | xargs | grep -q 'QUEUED RUNNING SUCCEEDED'"
same "each worker saw one GPU of Slurm's (CUDA_VISIBLE_DEVICES)" 2 "$(grep -c '^\[[12]\] CVD=[01]$' "$J/arr/log")"
same "each worker read its data at /opt/ml/input" 2 "$(grep -c '^\[[12]\] the data$' "$J/arr/log")"
check "worker 1's own log has its lines" grep -q '^CVD=[01]$' "$J/arr/workers/1/log"
same "both outputs arrived, zipped" "arr_1.zip arr_2.zip" "$(ls out | xargs)"
same "... with what each worker wrote" "1 2" "$(unzip -p out/arr_1.zip w.txt) $(unzip -p out/arr_2.zip w.txt)"
same "exit codes" "0 0" "$(cat "$J/arr/workers/1/exit_code" "$J/arr/workers/2/exit_code" | xargs)"

# --- never satisfiable: no Slurm job at all
cat >"$J/big.json" <<'SPEC'
{"name": "big", "resources": {"gpu_count": 3}, "workers": [{"command": "true"}]}
SPEC
sleep 2
same "3 GPUs on a 2-GPU cluster waits" QUEUED "$(state big)"
check "... and says it never can" grep -q 'never satisfiable on the Slurm cluster: a worker needs 3 GPU(s) on one node, the most any of its 1 node(s) has is 2' "$J/big/reason"
same "... and was never given to Slurm" "" "$(squeue -h -t all -n big -o %i)"
echo cancel >"$J/big/ctl"
echo '{"name": "priced", "resources": {"gpu_count": 1, "max_price": 2.5}, "workers": [{"command": "true"}]}' >"$J/priced.json"
check "what Slurm cannot be asked is listed under ignored" \
	grep -q 'max_price: a Slurm cluster has no node prices' "$J/priced/spec.json"
check "... and the job runs" job_state_in "$J" priced SUCCEEDED

# --- waiting in Slurm's queue: the reason in words, and wait_timeout_seconds
echo '{"name": "hog", "resources": {"gpu_count": 1}, "workers": [{"command": "sleep 60"}]}' >"$J/hog.json"
check "a job holds one GPU" job_state_in "$J" hog RUNNING
echo '{"name": "two", "wait_timeout_seconds": 4, "resources": {"gpu_count": 2}, "workers": [{"command": "true"}]}' >"$J/two.json"
check "a job wanting both GPUs waits in Slurm's queue" wait_grep 'Slurm: waiting for resources (Resources)' "$J/two/reason"
same "... QUEUED" QUEUED "$(state two)"
TID=$(sid two)
check "... until its wait_timeout_seconds" job_state_in "$J" two FAILED
check "... which says so" grep -q 'waited 4 s (wait_timeout_seconds) without starting; Slurm: waiting for resources' "$J/two/reason"
check "... and it was taken out of Slurm's queue" sh -c "sleep 1; grep -q 'JobId=$TID .*JobState=CANCELLED' '$T_DIR/slurm/jobcomp.txt'"
echo cancel >"$J/hog/ctl"
check "the hog is cancelled" job_state_in "$J" hog CANCELLED

# --- cancel reaches Slurm
echo '{"name": "long", "workers": [{"command": "sleep 300"}]}' >"$J/long.json"
check "a long job runs" job_state_in "$J" long RUNNING
LID=$(sid long)
started=$EPOCHREALTIME
check "cancel through ctl" sh -c "echo cancel >'$J/long/ctl'"
check "... makes it CANCELLED" job_state_in "$J" long CANCELLED
# right after RUNNING Slurm may not have the batch shell yet, and loses a USR2 sent then:
# mlfs sends it again, rather than waiting 10 s (SCHED_KILL_GRACE) to cancel the whole job
took=$(echo "$EPOCHREALTIME - $started" | bc)
check "... within 5 s of RUNNING, not after the 10 s grace (took $took s)" \
	test "$(echo "$took < 5" | bc)" = 1
check "... in Slurm too (jobcomp)" sh -c "sleep 1; grep -q 'JobId=$LID .*JobState=CANCELLED' '$T_DIR/slurm/jobcomp.txt'"
# a worker that traps TERM gets one, however many times mlfs asks the batch shell
cat >"$J/graceful.json" <<'JSON'
{"name": "graceful", "workers": [{"command": "trap 'echo got TERM; sleep 2.5; echo saved; exit 7' TERM; while :; do sleep 0.2; done"}]}
JSON
check "a worker that traps TERM runs" job_state_in "$J" graceful RUNNING
sleep 1.5	# its trap is set
echo cancel >"$J/graceful/ctl"
check "... cancelled, it saves and exits" job_state_in "$J" graceful CANCELLED
same "... having got one TERM while mlfs asked again" "1 1 7" \
	"$(grep -c '^got TERM$' "$J/graceful/workers/1/log") $(grep -c '^saved$' "$J/graceful/workers/1/log") $(cat "$J/graceful/workers/1/exit_code")"

# --- a failed command
echo '{"name": "bad", "workers": [{"command": "echo failing; exit 3"}]}' >"$J/bad.json"
check "a failed command fails the job" job_state_in "$J" bad FAILED
same "... with its exit code" 3 "$(cat "$J/bad/workers/1/exit_code")"
check "... and says so" grep -q 'worker 1 exited 3 after 1 attempt' "$J/bad/reason"
check "Slurm saw it fail too" grep -q "JobId=$(sid bad) .*JobState=FAILED" "$T_DIR/slurm/jobcomp.txt"

# --- log_size on the cluster: mlfs logpipe rotates the worker's log, caps the job's
echo '{"name": "chatty", "workers": [{"command": "seq -f %06g 1 30000"}]}' >"$J/chatty.json"
check "a worker writing 210 KB on Slurm succeeds" job_state_in "$J" chatty SUCCEEDED
check "its log was rotated to log.1, both within log_size" sh -c "test -f '$J/chatty/workers/1/log.1' && test \$(stat -c %s '$J/chatty/workers/1/log.1') -eq 65536 && test \$(stat -c %s '$J/chatty/workers/1/log') -le 65536"
same "the log ends with the output's last line" 030000 "$(tail -1 "$J/chatty/workers/1/log")"
check "the log starts with the rotation note" grep -q '^mlfs: this log reached log_size (65536 bytes)' "$J/chatty/workers/1/log"
check "the job's log holds whole prefixed lines, then the note" sh -c "head -1 '$J/chatty/log' | grep -qx '\[1\] 000001' && tail -1 '$J/chatty/log' | grep -q 'worker 1 wrote log_size (65536 bytes) into this log'"

# --- Slurm forgets finished jobs (MinJobAge 2 s here); mlfs does not
forgotten() { ! squeue -h -t all -j "$1" >/dev/null 2>&1; }
wait_forgotten() { for _ in $(seq 1 60); do forgotten "$1" && return 0; sleep 1; done; return 1; }
check "Slurm forgets the array" wait_forgotten "$ID"
same "mlfs still shows its final state" SUCCEEDED "$(state arr)"
same "... and its exit codes" "0 0" "$(cat "$J/arr/workers/1/exit_code" "$J/arr/workers/2/exit_code" | xargs)"

# --- a requeue (preemption) is RETRYING, not a failure
echo '{"name": "rq", "retry_count": 1, "workers": [{"command": "sleep 4; echo run $SLURM_RESTART_COUNT"}]}' >"$J/rq.json"
check "a job that may retry runs" job_state_in "$J" rq RUNNING
check "... with --requeue" sh -c "scontrol show job $(sid rq) | grep -q 'Requeue=1'"
check "Slurm requeues it" scontrol requeue "$(sid rq)"
check "... which mlfs shows as RETRYING" job_state_in "$J" rq RETRYING
check "... and says why it waits" wait_grep 'Slurm: waiting for its start time (BeginTime)' "$J/rq/reason"
scontrol update JobId="$(sid rq)" StartTime=now	# Slurm holds a requeued job back 2 minutes
check "... and it then succeeds" job_state_in "$J" rq SUCCEEDED
same "its attempts: requeued, then exited 0" "requeued exited 0" \
	"$(json "$J/rq/status.json" "' '.join(a['end'] for a in d['workers'][0]['attempts'])")"
check "... with no view for the rerun of a job without data (no output .r1)" \
	sh -c "! ls -A '$T_DIR/state/outputs' 2>/dev/null | grep -q '^\.r'"

# --- the daemon killed while Slurm runs a job: found again by its id
echo '{"name": "surv", "workers": [{"command": "sleep 6; exit 4"}]}' >"$J/surv.json"
check "a job runs" job_state_in "$J" surv RUNNING
SID=$(sid surv)
kill -9 "$MOUNT_PID"
wait "$MOUNT_PID" 2>/dev/null
fusermount3 -u "$M"
MOUNT_PID=
check "Slurm runs it on without mlfs" sh -c "squeue -h -j $SID -o %T | grep -q RUNNING"
mount_fg slurm.conf.mlfs "$M" || { t_finish; exit 1; }
check "the new daemon found it again by its Slurm id" grep -q "found again in Slurm (job $SID)" "$J/surv/events"
same "... still RUNNING" RUNNING "$(state surv)"
check "... and sees how it ended" job_state_in "$J" surv FAILED
same "... exit code 4" 4 "$(cat "$J/surv/workers/1/exit_code")"

# --- a job of an ordinary user: submitted and run as that user
chmod 666 /dev/fuse	# what udev gives it on a node where users mount FUSE
cat >user.json <<'SPEC'
{"name": "user", "workers": [{"command": "id -u; cat /opt/ml/input/a.txt; pwd; echo mine >/opt/ml/output/u.txt"}],
 "data": {"datasets": ["ds"], "output": {"type": "local", "path": "OUT"}}}
SPEC
sed -i "s|OUT|$T_DIR/out|" user.json
check "nobody submits a job" as_other cp user.json "$J/"
check "it succeeds" job_state_in "$J" user SUCCEEDED
same "Slurm ran it as nobody" "$OTHER" "$(grep -m1 "JobId=$(sid user) " "$T_DIR/slurm/jobcomp.txt" | grep -o 'UserId=[^ ]*' | grep -o '([0-9]*)' | tr -d '()')"
check "its command ran as nobody" grep -qx "$OTHER" "$J/user/workers/1/log"
check "... saw its data at /opt/ml (a user namespace)" grep -q '^the data$' "$J/user/workers/1/log"
check "... from /opt/ml/models" grep -q '^/opt/ml/models$' "$J/user/workers/1/log"
same "its output arrived, owned by nobody" "$OTHER mine" "$(stat -c %u out/user.zip) $(unzip -p out/user.zip u.txt)"
# the worker's folder is its owner's: a link planted there is never followed by mlfs (root)
echo '{"name": "evil", "workers": [{"command": "rm -f ../../log; ln -s /etc/shadow ../../log"}]}' >evil.json
check "nobody submits a job that plants a link for its log" as_other cp evil.json "$J/"
check "... which runs" job_state_in "$J" evil SUCCEEDED
check "... and its log is a link now" test -L "$T_DIR/state/jobs/evil/workers/1/log"
same "the tree does not follow it" "" "$(timeout 5 cat "$J/evil/workers/1/log" 2>/dev/null | head -c 100)"
chmod "$FUSE_MODE" /dev/fuse

# --- workers in their image on the compute node: rootless podman for a user, rootful for root
if [ -z "$CTR" ]; then
	ok "# SKIP podman or docker-registry is not installed (scripts/install-deps.sh installs them)"
else
	chmod 666 /dev/fuse
	id "$CUSER" >/dev/null 2>&1 && userdel -f "$CUSER" 2>/dev/null	# left by an earlier run
	useradd -M -d "$T_DIR/home-$CUSER" -s /usr/sbin/nologin "$CUSER" && CUSER_MADE=1
	install -d -o "$CUSER" -g "$CUSER" -m 700 "$T_DIR/home-$CUSER"
	sed -i "/^$CUSER:/d" /etc/subuid /etc/subgid
	echo "$CUSER:400000:65536" >>/etc/subuid	# podman's rootless mode needs them (the node admin's)
	echo "$CUSER:400000:65536" >>/etc/subgid
	CUID=$(id -u "$CUSER")
	as_user() { setpriv --reuid="$CUID" --regid="$(id -g "$CUSER")" --clear-groups "$@"; }
	user_podman() { runuser -u "$CUSER" -- env HOME="$T_DIR/home-$CUSER" podman "$@"; }
	wlog() { cat "$J/$1/workers/1/log" 2>/dev/null; }
	podman rmi -f "$BB1" >/dev/null 2>&1
	cat >cimg.json <<SPEC
{"name": "cimg", "environment": {"image": "$BB1"},
 "workers": [{"command": "cat /marker; id -u; cat /opt/ml/input/a.txt; pwd; echo in-image >/opt/ml/output/c.txt"}],
 "data": {"datasets": ["ds"], "output": {"type": "local", "path": "$T_DIR/out"}}}
SPEC
	chmod a+r cimg.json
	check "a user submits a job with an image" as_user cp cimg.json "$J/"
	check "it succeeds on Slurm" job_state_in "$J" cimg SUCCEEDED
	same "Slurm ran it as that user" "$CUID" "$(grep -m1 "JobId=$(sid cimg) " "$T_DIR/slurm/jobcomp.txt" | grep -o 'UserId=[^ ]*' | grep -o '([0-9]*)' | tr -d '()')"
	check "the batch script pulled the image" grep -q "^mlfs: pulled (.*) $BB1" "$J/cimg/workers/1/log"
	check "... into the user's own storage (rootless), not root's" sh -c "! podman image exists '$BB1' && $(declare -f user_podman); CUSER=$CUSER T_DIR=$T_DIR; user_podman image exists '$BB1'"
	check "the log shows the image's marker" grep -qx 'mlfs-test-image busybox 1' "$J/cimg/workers/1/log"
	check "... the user's uid inside (--userns=keep-id)" grep -qx "$CUID" "$J/cimg/workers/1/log"
	check "... its data at /opt/ml/input" grep -qx 'the data' "$J/cimg/workers/1/log"
	check "... from /opt/ml/models" grep -qx '/opt/ml/models' "$J/cimg/workers/1/log"
	check "... and in the job's log" grep -q '^\[1\] mlfs-test-image busybox 1$' "$J/cimg/log"
	same "its output arrived, owned by the user" "$CUID in-image" "$(stat -c %u out/cimg.zip) $(unzip -p out/cimg.zip c.txt)"
	check "... staged in the user's home (~/.local/state/mlfs)" test -d "$T_DIR/home-$CUSER/.local/state/mlfs/outputs"
	check "its registry credentials went with the pull" test ! -e "$T_DIR/state/jobs/cimg/workers/1/auth.json"
	check "no container of it is left" sh -c "! { $(declare -f user_podman); CUSER=$CUSER T_DIR=$T_DIR; user_podman ps -a --format '{{.Names}}'; } | grep -q '^mlfs-cimg-'"

	sed 's/"cimg"/"croot"/' cimg.json >croot.json
	check "root submits one" cp croot.json "$J/"
	check "it succeeds" job_state_in "$J" croot SUCCEEDED
	check "... in the image, as root inside" sh -c "grep -qx 'mlfs-test-image busybox 1' '$J/croot/workers/1/log' && grep -qx 0 '$J/croot/workers/1/log'"
	check "... pulled into root's storage (rootful)" podman image exists "$BB1"
	same "its output arrived" "0 in-image" "$(stat -c %u out/croot.zip) $(unzip -p out/croot.zip c.txt)"

	cat >cgpu.json <<SPEC
{"name": "cgpu", "environment": {"image": "$BB1"}, "resources": {"gpu_count": 1},
 "workers": [{"command": "echo CVD=\$CUDA_VISIBLE_DEVICES JOB=\$SLURM_JOB_ID; ls /opt/ml | xargs"}]}
SPEC
	chmod a+r cgpu.json
	check "a user's job with an image, a GPU and no data" as_user cp cgpu.json "$J/"
	check "it succeeds" job_state_in "$J" cgpu SUCCEEDED
	check "... with Slurm's CUDA_VISIBLE_DEVICES and job id inside" grep -qx "CVD=[01] JOB=$(sid cgpu)" "$J/cgpu/workers/1/log"
	check "... its scratch folders at /opt/ml" grep -qx 'checkpoint input models output' "$J/cgpu/workers/1/log"
	check "... and the log says the node has no /dev/nvidiaN for Slurm's GPU" grep -q '^mlfs: Slurm gave GPU [01], and .* has no /dev/nvidia[01] for the container$' "$J/cgpu/workers/1/log"

	sed 's/"cimg"/"cmiss"/; s#mlfs-test/busybox:1#mlfs-test/nothing:1#' cimg.json >cmiss.json
	check "a user's job of an image the registry lacks" as_user cp cmiss.json "$J/"
	check "it fails" job_state_in "$J" cmiss FAILED
	check "... with the registry's words" sh -c "grep -Eqi '^staging in: worker 1: cannot pull .*nothing:1: .*(manifest unknown|not found)' '$J/cmiss/reason'"

	cat >csleep.json <<SPEC
{"name": "csleep", "environment": {"image": "$BB1"}, "workers": [{"command": "echo started; exec sleep 300"}]}
SPEC
	chmod a+r csleep.json
	check "a user's long job in an image is accepted" as_user cp csleep.json "$J/"
	check "... runs" job_state_in "$J" csleep RUNNING
	check "... once started" wait_grep '^started$' "$J/csleep/workers/1/log"
	check "... and says it runs in its image" wait_grep "worker 1: running in $BB1" "$J/csleep/events"
	CSID=$(sid csleep)
	echo cancel >"$J/csleep/ctl"
	check "cancel makes it CANCELLED" job_state_in "$J" csleep CANCELLED
	check "... in Slurm too" sh -c "sleep 1; grep -q 'JobId=$CSID .*JobState=CANCELLED' '$T_DIR/slurm/jobcomp.txt'"
	check "... its command stopped, not ended well" grep -Eq 'worker 1: attempt 1 exited (137|143)' "$J/csleep/events"
	check "... and its container is gone" sh -c "! { $(declare -f user_podman); CUSER=$CUSER T_DIR=$T_DIR; user_podman ps -a --format '{{.Names}}'; } | grep -q '^mlfs-csleep-'"
	# Slurm's own TERM (its time limit, a user's scancel) reaches podman too, where a rootless
	# podman run may end at once with status 0 and leave the container running
	sed 's/"csleep"/"cterm"/' csleep.json >cterm.json
	check "another is accepted" as_user cp cterm.json "$J/"
	check "... and runs" job_state_in "$J" cterm RUNNING
	check "... once started" wait_grep '^started$' "$J/cterm/workers/1/log"
	check "Slurm's TERM to all its processes" scancel --full -s TERM "$(sid cterm)"
	check "... fails it" job_state_in "$J" cterm FAILED
	check "... not as a success of its command" grep -Eq 'worker 1 exited (137|143)' "$J/cterm/reason"
	check "... and its container is gone" sh -c "! { $(declare -f user_podman); CUSER=$CUSER T_DIR=$T_DIR; user_podman ps -a --format '{{.Names}}'; } | grep -q '^mlfs-cterm-'"
	check "no view of the user's is left mounted in podman's namespaces" sh -c "! { $(declare -f user_podman); CUSER=$CUSER T_DIR=$T_DIR; user_podman unshare cat /proc/self/mounts; } | grep -q mlfs-view"
	user_pause_stop
	chmod "$FUSE_MODE" /dev/fuse
fi

# --- task roles: one allocation of two tasks
cat >"$J/roles.json" <<'SPEC'
{"jobName": "roles", "taskRoles": [
  {"name": "a", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 1, "command": "echo a $CUDA_VISIBLE_DEVICES"},
  {"name": "b", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 1, "command": "echo b $CUDA_VISIBLE_DEVICES"}]}
SPEC
check "a job of two task roles succeeds" job_state_in "$J" roles SUCCEEDED
same "... as one Slurm job" "$(sid roles 0)" "$(sid roles 1)"
check "... of two tasks" grep -q "JobId=$(sid roles) .*ProcCnt=2" "$T_DIR/slurm/jobcomp.txt"
same "... each with a GPU of its own" "0 1" "$(grep -o '^\[[12]\] [ab] [01]$' "$J/roles/log" | awk '{print $3}' | sort | xargs)"

# --- one squeue per interval, whatever the number of jobs and of cats
for i in 1 2 3 4 5 6; do echo "{\"name\": \"s$i\", \"resources\": {\"cpu_count\": 4}, \"workers\": [{\"command\": \"sleep 30\"}]}" >"$J/s$i.json"; done
check "six jobs run" job_state_in "$J" s6 RUNNING
before=$(grep -c squeue calls.log)
t0=$(date +%s.%N)
for _ in $(seq 1 30); do for i in 1 2 3 4 5 6; do cat "$J/s$i/state" "$J/s$i/status.json" >/dev/null; done; sleep 0.1; done
t1=$(date +%s.%N)
after=$(grep -c squeue calls.log)
calls=$((after - before))
secs=$(echo "$t1 - $t0" | bc)
check "at most one squeue per poll interval (1 s): $calls in ${secs}s, 360 reads" \
	test "$calls" -le "$(echo "$secs + 2" | bc | cut -d. -f1)"
check "no other Slurm command meanwhile" sh -c "awk -v a=$t0 -v b=$t1 '\$1 > a && \$1 < b && \$2 != \"squeue\"' calls.log | grep -q . && exit 1 || exit 0"
for i in 1 2 3 4 5 6; do echo cancel >"$J/s$i/ctl"; done
check "the six are cancelled" job_state_in "$J" s6 CANCELLED

unmount_fg "$M"

# --- a submission Slurm refuses fails the job with sbatch's own words
sed 's/^poll_interval = 1$/poll_interval = 1\npartition = nosuch/' slurm.conf.mlfs >refused.conf
mount_fg refused.conf "$M" || { t_finish; exit 1; }
echo '{"name": "refused", "workers": [{"command": "true"}]}' >"$J/refused.json"
check "a job Slurm refuses fails" job_state_in "$J" refused FAILED
check "... with sbatch's own words" grep -q 'worker 1 could not be submitted: sbatch refused it: sbatch: error: .*[Pp]artition' "$J/refused/reason"
unmount_fg "$M"
t_finish
