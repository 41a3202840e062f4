#!/bin/bash
# formats_test.sh - the other platforms' specs through a real mount: OpenPAI
# (the documentation's TensorFlow job as printed, two roles printing their
# PAI_* variables, ports, gang start, minFailed/minSucceededTaskCount),
# GPULab (HelloWorld as printed, GPULAB_* variables), Kibernetika (YAML,
# REPLICA_INDEX and <RESOURCE>_NODES, the documented template whose command
# fails ends FAILED, sources: a [source] and a task's own mapped by
# default_volume_mapping and volumes, workDir $SRC_DIR, <NAME>_DIR, and the
# refusals of a volume naming no source and of a workDir naming an unmapped
# one), a job whose every task failed, and mlfs check on each.
# Usage: formats_test.sh MLFS
set -u
MLFS=$1
SEEDS=$(dirname "$(readlink -f "$0")")/../../../shared/seeds	# beside the checkout
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1
mkdir -p data/src/code mnt
echo "print('src')" >data/src/code/train.py
cat >jobs.conf <<CONF
[mlfs]
state_dir = $T_DIR/state
cache_dir = $T_DIR/cache
[node]
gpus = 2
gpu_type = A100
cuda_version = 12.2
cpus = 16
memory_gb = 32
# the formats' rules on the node itself; containers_test.sh runs their images
[containers]
runtime = none
fallback = host
[datastore d]
type = local
root = $T_DIR/data
# a project's source, as Kibernetika's SOURCES tab declares one
[source src]
source = d:/src
mount_path = /workspace/src
CONF
M=$T_DIR/mnt
J=$M/jobs

state() { cat "$J/$1/state" 2>/dev/null; }
wait_state() {
	for _ in $(seq 1 "${3:-100}"); do
		[ "$(state "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	echo "# $1 is '$(state "$1")', not $2: $(cat "$J/$1/reason" 2>/dev/null)"
	return 1
}
# var JOB WORKER NAME: the value worker WORKER printed for NAME (as NAME=value lines).
var() { sed -n "s/^$3=//p" "$J/$1/workers/$2/log" | head -1; }
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

mount_fg jobs.conf "$M" || { t_finish; exit 1; }

# --- OpenPAI: the documentation's distributed TensorFlow job, as printed (with its // comments)
# (the seed pages live in ../shared beside the checkout; the example is lines 144-211)
sed -n '144,211p' "$SEEDS/002_108212ea4f1ad1c3.txt" >tf.json 2>/dev/null
if [ -s tf.json ] && grep -q '//' tf.json; then
	check "mlfs check reads OpenPAI's example" sh -c "'$MLFS' check tf.json | grep -q 'openpai spec, job tensorflow-distributed-jobguid, 4 worker'"
	check "cp of OpenPAI's example submits it" cp tf.json "$J/"
	check "it became a job" test -d "$J/tensorflow-distributed-jobguid"
	same "spec.json says openpai" openpai "$(json "$J/tensorflow-distributed-jobguid/spec.json" "d['format']")"
	check "its image is listed as ignored" grep -q '"image: ' "$J/tensorflow-distributed-jobguid/status.json"
	echo cancel >"$J/tensorflow-distributed-jobguid/ctl"
	check "it is cancelled" wait_state tensorflow-distributed-jobguid CANCELLED
else
	ok "# SKIP the OpenPAI seed page is not beside the checkout"
fi

# --- OpenPAI: two roles of 2 and 3 tasks print their variables
cat >roles.json <<'SPEC'
{
  "jobName": "roles",
  "taskRoles": [
    {"name": "ps", "taskNumber": 2, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0,
     "portList": [{"label": "grpc", "beginAt": 0, "portNumber": 1}],
     "command": "env | grep -E '^(PAI_|CUDA_VISIBLE|batch_size)' | sort"},
    {"name": "worker", "taskNumber": 3, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0,
     "portList": [{"label": "grpc", "beginAt": 0, "portNumber": 2}],
     "command": "env | grep -E '^(PAI_|CUDA_VISIBLE)' | sort"}
  ],
  "jobEnvs": {"batch_size": 32}
}
SPEC
check "a two-role OpenPAI job is accepted" cp roles.json "$J/"
check "it succeeds" wait_state roles SUCCEEDED
same "five workers" "1 2 3 4 5" "$(ls "$J/roles/workers" | xargs)"
same "PAI_TASK_ROLE_TASK_COUNT_ps" 2 "$(var roles 1 PAI_TASK_ROLE_TASK_COUNT_ps)"
same "PAI_TASK_ROLE_TASK_COUNT_worker" 3 "$(var roles 1 PAI_TASK_ROLE_TASK_COUNT_worker)"
same "PAI_TASK_ROLE_LIST" "ps,worker" "$(var roles 4 PAI_TASK_ROLE_LIST)"
same "PAI_TASK_ROLE_COUNT" 2 "$(var roles 5 PAI_TASK_ROLE_COUNT)"
same "worker 2 is ps task 1" "ps 1" "$(var roles 2 PAI_CURRENT_TASK_ROLE_NAME) $(var roles 2 PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX)"
same "worker 5 is worker task 2" "worker 2" "$(var roles 5 PAI_CURRENT_TASK_ROLE_NAME) $(var roles 5 PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX)"
same "PAI_JOB_NAME" roles "$(var roles 3 PAI_JOB_NAME)"
same "PAI_HOST_IP_worker_2" 127.0.0.1 "$(var roles 1 PAI_HOST_IP_worker_2)"
ps_list=$(var roles 3 PAI_TASK_ROLE_ps_HOST_LIST)
check "PAI_TASK_ROLE_ps_HOST_LIST has two host:port" sh -c "echo '$ps_list' | grep -Eqx '127\.0\.0\.1:[0-9]+,127\.0\.0\.1:[0-9]+'"
same "every task sees the same host list" "$ps_list" "$(var roles 5 PAI_TASK_ROLE_ps_HOST_LIST)"
w2=$(var roles 5 PAI_PORT_LIST_worker_2_grpc)
check "worker task 2 has two grpc ports" sh -c "echo '$w2' | grep -Eqx '[0-9]+,[0-9]+'"
all_ports=$(for i in 0 1; do var roles 1 "PAI_PORT_LIST_ps_${i}_grpc"; done; for i in 0 1 2; do var roles 1 "PAI_PORT_LIST_worker_${i}_grpc"; done)
same "eight ports, all different" 8 "$(echo "$all_ports" | tr ',' '\n' | sort -u | grep -c .)"
same "PAI_RESOURCE_worker: gpuNumber,cpuNumber,memoryMB" "0,1,256" "$(var roles 1 PAI_RESOURCE_worker | cut -d, -f1-3)"
same "jobEnvs reach the tasks" 32 "$(var roles 1 batch_size)"

# --- OpenPAI: dataDir, codeDir and outputDir of a datastore are the view's input/, models/, output/
mkdir -p "$T_DIR/data/pai/in" "$T_DIR/data/pai/code"
echo "pai input" >"$T_DIR/data/pai/in/x.txt"
echo "print('pai')" >"$T_DIR/data/pai/code/train.py"
cat >dirs.json <<'SPEC'
{"jobName": "paidirs", "dataDir": "d:/pai/in/", "codeDir": "d:/pai/code/",
 "outputDir": "d:/pai/out/",
 "taskRoles": [{"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 100, "gpuNumber": 0,
   "command": "cat $PAI_DATA_DIR/x.txt $PAI_CODE_DIR/train.py >$PAI_OUTPUT_DIR/y.txt && echo PAI_DATA_DIR=$PAI_DATA_DIR"}]}
SPEC
check "an OpenPAI job with dataDir, codeDir and outputDir of a datastore is accepted" cp dirs.json "$J/"
check "it succeeds" wait_state paidirs SUCCEEDED 150
same "PAI_DATA_DIR names the view's input/" /opt/ml/input "$(var paidirs 1 PAI_DATA_DIR)"
same "what it wrote to \$PAI_OUTPUT_DIR landed in outputDir" "pai input
print('pai')" "$(cat "$T_DIR/data/pai/out/y.txt" 2>&1)"

# --- gang: a two-role job waits whole while one GPU is taken
printf '{"name": "hog", "resources": {"gpu_count": 1}, "workers": [{"command": "sleep 30"}]}\n' >"$J/hog.json"
check "a job holds one GPU" wait_state hog RUNNING
cat >"$J/gang.json" <<'SPEC'
{"jobName": "gang", "taskRoles": [
  {"name": "a", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 1, "command": "echo a"},
  {"name": "b", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 1, "command": "echo b"}]}
SPEC
sleep 0.5
same "the gang waits" QUEUED "$(state gang)"
same "no role started alone" "QUEUED QUEUED" "$(cat "$J/gang/workers/1/state" "$J/gang/workers/2/state" | xargs)"
check "... and says why" grep -q 'waiting for GPUs' "$J/gang/reason"
echo cancel >"$J/hog/ctl"
check "the gang starts whole once the GPU frees" wait_state gang SUCCEEDED
same "both roles ran, on different GPUs" 2 "$(grep -o 'GPUs \[[01]\]' "$J/gang/events" | sort -u | wc -l)"

cat >"$J/toobig.json" <<'SPEC'
{"jobName": "toobig", "taskRoles": [
  {"name": "a", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 2, "command": "true"},
  {"name": "b", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 2, "command": "true"}]}
SPEC
same "a gang bigger than the node says so" \
	"never satisfiable here: its 2 workers start together and need 4 GPUs at once, node has 2" \
	"$(job_reason "$J/toobig")"
echo cancel >"$J/toobig/ctl"

# --- minSucceededTaskCount and minFailedTaskCount end a job early
cat >"$J/minok.json" <<'SPEC'
{"jobName": "minok", "taskRoles": [
  {"name": "server", "taskNumber": 2, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": "sleep 30"},
  {"name": "client", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": "true",
   "minSucceededTaskCount": 1}]}
SPEC
check "minSucceededTaskCount: the job succeeds when the client does" wait_state minok SUCCEEDED 150
check "... says so" grep -q 'task role client: 1 task(s) succeeded, minSucceededTaskCount is 1' "$J/minok/reason"
same "... the servers were stopped" "CANCELLED CANCELLED" "$(cat "$J/minok/workers/1/state" "$J/minok/workers/2/state" | xargs)"
cat >"$J/minfail.json" <<'SPEC'
{"jobName": "minfail", "taskRoles": [
  {"name": "server", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": "sleep 30",
   "minFailedTaskCount": null},
  {"name": "client", "taskNumber": 2, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": "exit 2",
   "minFailedTaskCount": 2}]}
SPEC
check "minFailedTaskCount: the job fails when both clients did" wait_state minfail FAILED 150
check "... says so" grep -q 'task role client: 2 task(s) failed, minFailedTaskCount is 2' "$J/minfail/reason"
same "... the server was stopped" CANCELLED "$(cat "$J/minfail/workers/1/state")"

# --- retryCount retries an OpenPAI job whole
cat >"$J/again.json" <<'SPEC'
{"jobName": "again", "retryCount": 1, "taskRoles": [
  {"name": "a", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0,
   "command": "test -e $ML_OUTPUT_PATH/tried || { touch $ML_OUTPUT_PATH/tried; exit 3; }"},
  {"name": "b", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": "echo b"}]}
SPEC
check "a failed gang job is retried whole and succeeds" wait_state again SUCCEEDED 150
same "... on job attempt 2" 2 "$(json "$J/again/status.json" "d['job_attempt']")"
same "... both roles ran twice" "2 2" "$(json "$J/again/status.json" "' '.join(str(len(w['attempts'])) for w in d['workers'])")"
check "... the retry is an event" grep -q 'RETRYING: job attempt 2 of 2, after: task role a: 1 task(s) failed' "$J/again/events"

# --- GPULab: HelloWorld as printed, then a worker printing its variables
cat >hello.json <<'SPEC'
{
    "name": "HelloWorld",
    "description": "Hello world!",
    "request": {
        "resources": {
            "clusterId": 1,
            "gpus": 1,
            "cpus": 2,
            "cpuMemoryGb": 1
        },
        "docker": {
            "image": "debian:stable",
            "command": "echo 'Hello World!'",
            "environment": { },
            "storage": [ ],
            "portMappings": [ ]
        },
        "scheduling": {
            "interactive": true
        }
    }
}
SPEC
check "mlfs check reads GPULab's HelloWorld" sh -c "'$MLFS' check hello.json | grep -q 'gpulab spec, job HelloWorld, 1 worker'"
check "cp of GPULab's HelloWorld submits it" cp hello.json "$J/"
check "HelloWorld runs on this node" wait_state HelloWorld SUCCEEDED
same "... and says hello" "[1] Hello World!" "$(cat "$J/HelloWorld/log")"
check "its image and clusterId are listed as ignored" sh -c "grep -q 'request.docker.image' '$J/HelloWorld/status.json' && grep -q 'clusterId: this node declares no cluster' '$J/HelloWorld/status.json'"
check "... and told in its events at submit" grep -q 'ignored: .*clusterId: this node declares no cluster' "$J/HelloWorld/events"
cat >"$J/glenv.json" <<'SPEC'
{"name": "glenv", "request": {"resources": {"gpus": 2, "cpus": 2, "cpuMemoryGb": 2, "gpuModel": ["a10"]},
 "docker": {"image": "x", "command": ["sh", "-c", "env | grep -E '^(GPULAB_|CUDA_VISIBLE)' | sort"],
            "environment": {"MODE": "test"}}}}
SPEC
check "a GPULab job with gpuModel a10 (a part of A100) runs" wait_state glenv SUCCEEDED
same "GPULAB_GPUS_RESERVED equals the GPUs given" 2 "$(var glenv 1 GPULAB_GPUS_RESERVED)"
same "CUDA_VISIBLE_DEVICES" "0,1" "$(var glenv 1 CUDA_VISIBLE_DEVICES)"
same "GPULAB_CPUS_RESERVED" 2 "$(var glenv 1 GPULAB_CPUS_RESERVED)"
same "GPULAB_JOB_ID" glenv "$(var glenv 1 GPULAB_JOB_ID)"
check "GPULAB_MEM_RESERVED is set" test -n "$(var glenv 1 GPULAB_MEM_RESERVED)"

# --- Kibernetika: a YAML task with two resources
cat >kb.yaml <<'SPEC'
name: kbjob
resources:
- name: ps
  replicas: 1
  command: env | grep -E '^(REPLICA_INDEX|PS_NODES|WORKER_NODES|BUILD_ID|GPU_COUNT)=' | sort
  resources:
    requests:
      cpu: 100m
      memory: 64Mi
- name: worker
  replicas: 2
  command: env | grep -E '^(REPLICA_INDEX|PS_NODES|WORKER_NODES|BUILD_ID|GPU_COUNT)=' | sort
  resources:
    requests:
      cpu: 1500m
      memory: 128Mi
SPEC
check "mlfs check reads a Kibernetika YAML task" sh -c "'$MLFS' check kb.yaml | grep -q 'kibernetika spec, job kbjob, 3 worker'"
check "cp of a Kibernetika YAML task submits it" cp kb.yaml "$J/"
check "it succeeds" wait_state kbjob SUCCEEDED
same "REPLICA_INDEX of the second worker replica (the documentation's base 1)" 2 "$(var kbjob 3 REPLICA_INDEX)"
same "REPLICA_INDEX of the ps" 1 "$(var kbjob 1 REPLICA_INDEX)"
same "WORKER_NODES lists two replicas" 2 "$(var kbjob 1 WORKER_NODES | tr ',' '\n' | grep -c .)"
same "every replica sees the same PS_NODES" "$(var kbjob 1 PS_NODES)" "$(var kbjob 3 PS_NODES)"
same "GPU_COUNT" 0 "$(var kbjob 2 GPU_COUNT)"
check "BUILD_ID is set" test -n "$(var kbjob 2 BUILD_ID)"
same "1500m is two CPUs" 2 "$(json "$J/kbjob/spec.json" "d['workers'][1]['resources']['cpu_count']")"

# --- Kibernetika: the documentation's execution template (its page prints it without
# indentation; restored here), whose command fails on this node (no example.py): the task
# is FAILED, never SUCCEEDED
cat >kbseed.yaml <<'SPEC'
name: example
resources:
- workDir: $SRC_DIR
  command: python example.py --parameter_name {{ .parameter_value }}
  default_volume_mapping: true
  images:
    cpu: kuberlab/tensorflow:cpu-36-1.7.0-full
    gpu: kuberlab/tensorflow:gpu-36-1.7.0-full
  name: worker
  replicas: 1
  resources:
    limits:
      cpu: "1"
      memory: 8Gi
    requests:
      cpu: 100m
      memory: 64Mi
  restartPolicy: Never
SPEC
check "cp of Kibernetika's documented template submits it" cp kbseed.yaml "$J/"
check "its failing command fails the task" wait_state example FAILED 150
reason=$(cat "$J/example/reason")
check "... the reason names the failed replica: $reason" grep -qE \
	'^resource worker: worker 1 exited [0-9]+ after 1 attempt\(s\); a task fails at its first failed replica' \
	"$J/example/reason"

# --- Kibernetika's sources: the config's [source src] and the task's own, mapped by
# default_volume_mapping and volumes; workDir $SRC_DIR, <NAME>_DIR
cat >kbsrc.yaml <<'SPEC'
name: kbsrc
sources:
- name: extra
  source: d:/src/code
resources:
- name: worker
  workDir: $SRC_DIR
  command: echo "pwd=$(pwd) SRC_DIR=$SRC_DIR EXTRA_DIR=$EXTRA_DIR"; ls; ls "$EXTRA_DIR"
  default_volume_mapping: true
  volumes:
  - name: src
    subPath: code
    mountPath: /data
  replicas: 1
  restartPolicy: Never
SPEC
check "a Kibernetika task with sources and volumes is accepted" cp kbsrc.yaml "$J/"
check "... and succeeds" wait_state kbsrc SUCCEEDED 150
log=$(cat "$J/kbsrc/log" 2>&1)
same "workDir \$SRC_DIR is the source's folder in the view; <NAME>_DIR name each source" \
	"[1] pwd=/opt/ml/sources/src SRC_DIR=/opt/ml/sources/src EXTRA_DIR=/opt/ml/sources/extra" \
	"$(echo "$log" | grep -m1 'pwd=')"
same "... the volume's subPath (code) is what src shows; the task's own source shows its folder" \
	2 "$(grep -c '^\[1\] train.py$' "$J/kbsrc/log")"
check "nothing of it is listed as ignored" sh -c "! grep -q 'volume\|SRC_DIR' '$J/kbsrc/status.json'"
printf 'name: kbbad\nresources:\n- name: w\n  command: x\n  workDir: $NOPE_DIR\n  volumes:\n  - name: nope\n' >kb-src-bad.yaml
fails "a volume naming no source is refused" "Invalid argument" cp kb-src-bad.yaml "$J/"
check "... naming the volume" grep -q 'resources\[0\].volumes\[0\].name: no source named "nope"' \
	"$J/kb-src-bad.yaml.error"
printf 'name: kbbad2\nresources:\n- name: w\n  command: x\n  workDir: $NOPE_DIR\n' >kb-src-bad2.yaml
fails "a workDir naming a source the resource does not map is refused" "Invalid argument" \
	cp kb-src-bad2.yaml "$J/"
check "... naming the variable" grep -q 'resources\[0\].workDir: \$NOPE_DIR names no source' \
	"$J/kb-src-bad2.yaml.error"
long=$(printf 'a%.0s' $(seq 99)); long=$(printf "$long/%.0s" $(seq 30))
printf 'name: kbbad3\nresources:\n- name: w\n  command: x\n  volumes:\n  - name: src\n    subPath: %s\n' \
	"$long" >kb-src-long.yaml
fails "a volume whose path would pass 2047 bytes is refused, not cut" "Invalid argument" \
	cp kb-src-long.yaml "$J/"
check "... saying so" grep -q 'resources\[0\]: source src: its path .* longer than 2047 bytes' \
	"$J/kb-src-long.yaml.error"

# --- GPULab storage no [source] covers is refused at submit, naming the path
printf '{"name": "glst", "request": {"resources": {"cpus": 1, "gpus": 0, "cpuMemoryGb": 1}, "docker": {"command": "true", "storage": [{"hostPath": "/nowhere/x", "containerPath": "/x"}]}}}\n' >gl-storage.json
fails "GPULab storage no [source] covers is refused" "Invalid argument" cp gl-storage.json "$J/"
check "... naming the entry and the path" grep -q 'request.docker.storage\[0\]: no \[source\] of .* covers /nowhere/x' \
	"$J/gl-storage.json.error"

# --- OpenPAI: every task failed, minFailedTaskCount null: FAILED all the same
cat >"$J/allfail.json" <<'SPEC'
{"jobName": "allfail", "taskRoles": [
  {"name": "a", "taskNumber": 2, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": "exit 4",
   "minFailedTaskCount": null}]}
SPEC
check "an OpenPAI job whose every task failed is FAILED" wait_state allfail FAILED 150
check "... says so" grep -q '^all 2 task(s) failed; the first: worker [12] exited 4' "$J/allfail/reason"

# --- a bad spec of each format names its field
printf '{"jobName": "x", "taskRoles": [{"name": "a", "taskNumber": 0, "cpuNumber": 1, "memoryMB": 100, "gpuNumber": 0, "command": "x"}]}\n' >pai-bad.json
fails "OpenPAI taskNumber 0 is refused" "Invalid argument" cp pai-bad.json "$J/"
check "... naming the field" grep -q '^pai-bad.json:1:[0-9]*: taskRoles\[0\].taskNumber: ' "$J/pai-bad.json.error"
printf '{"name": "y", "request": {"resources": {"gpus": -1, "cpus": 1, "cpuMemoryGb": 1}, "docker": {"command": "x"}}}\n' >gl-bad.json
fails "GPULab gpus -1 is refused" "Invalid argument" cp gl-bad.json "$J/"
check "... naming the field" grep -q '^gl-bad.json:1:[0-9]*: request.resources.gpus: ' "$J/gl-bad.json.error"
printf 'name: z\nresources:\n- name: w\n  replicas: 0\n  command: x\n' >kb-bad.yaml
fails "Kibernetika replicas 0 is refused" "Invalid argument" cp kb-bad.yaml "$J/"
check "... naming the field at its YAML line" grep -q '^kb-bad.yaml:4:[0-9]*: resources\[0\].replicas: ' "$J/kb-bad.yaml.error"
unmount_fg "$M"

t_finish
