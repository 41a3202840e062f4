#!/bin/bash
# containers_test.sh - workers in their spec's container image, through a
# real mount, Podman (runc) and a real registry on 127.0.0.1 (Debian's
# docker-registry) serving images made here from Debian's static busybox
# (scripts/make-images.sh): each format's example spec with its image
# pointed at that registry runs in it (a marker only the image holds, the
# writer's uid, its view at /opt/ml, its output uploaded, its variables;
# a Kibernetika source bound read-only at its mount_path, its workDir;
# GPULab storage bound from the [source] covering it);
# GPULab's empty command runs the image's own; a bad image name is EINVAL
# at close; a missing image and a registry that is down end FAILED with
# the registry's words; two jobs of one new image pull each blob once;
# a node without a runtime refuses an image, or runs it on the node with
# fallback = host.
# Usage: containers_test.sh MLFS
set -u
MLFS=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1

if ! command -v podman >/dev/null || ! command -v docker-registry >/dev/null; then
	ok "# SKIP podman or docker-registry is not installed (scripts/install-deps.sh installs them)"
	t_finish
	exit 0
fi

REG_PORT=$(free_port)
REG=127.0.0.1:$REG_PORT
REG_DIR=$T_DIR/registry
"$ROOT/scripts/server-registry.sh" start "$REG_DIR" "$REG_PORT" >/dev/null || { not_ok "the registry starts"; t_finish; exit 1; }
# a second one that wants a login
PRIV_PORT=$(free_port)
PRIV=127.0.0.1:$PRIV_PORT
PRIV_DIR=$T_DIR/private
PRIV_PASS=pw-$RANDOM$RANDOM-secret
mkdir -p "$PRIV_DIR"
htpasswd -Bbn puller "$PRIV_PASS" >"$PRIV_DIR/htpasswd" 2>/dev/null
"$ROOT/scripts/server-registry.sh" start "$PRIV_DIR" "$PRIV_PORT" "$PRIV_DIR/htpasswd" >/dev/null ||
	not_ok "the registry with a login starts"
stop_registry() {
	"$ROOT/scripts/server-registry.sh" stop "$REG_DIR" >/dev/null 2>&1
	"$ROOT/scripts/server-registry.sh" stop "$PRIV_DIR" >/dev/null 2>&1
	# what the jobs pulled from this run's registries goes too: their ports are the next run's
	podman images --format '{{.Repository}}:{{.Tag}}' 2>/dev/null | grep -E "^($REG|$PRIV)/" |
		xargs -r podman rmi -f >/dev/null 2>&1
}
t_cleanup() { stop_registry; }
MADE_NODES=()
trap 'stop_registry; server_cleanup true /; rm -f "${MADE_NODES[@]}"; rm -rf "$T_DIR"' EXIT
IMAGES=$(dirname "$MLFS")/images
check "the test images are made and pushed" "$ROOT/scripts/make-images.sh" "$IMAGES" "$REG"
check "... and to the registry with a login" "$ROOT/scripts/make-images.sh" --creds "puller:$PRIV_PASS" "$IMAGES" "$PRIV"
PB1=$PRIV/mlfs-test/busybox:1
podman rmi -f "$PB1" >/dev/null 2>&1
BB1=$REG/mlfs-test/busybox:1
BB2=$REG/mlfs-test/busybox:2
# every test pulls: nothing of the registry's in podman's storage
podman rmi -f "$BB1" "$BB2" >/dev/null 2>&1

mkdir -p data/digits data/out mnt
echo "seven" >data/digits/7.txt
chmod -R a+rX data
chmod a+rwx data/out
cat >jobs.conf <<CONF
[mlfs]
state_dir = $T_DIR/state
cache_dir = $T_DIR/cache
[node]
gpus = 2
gpu_type = A100
cpus = 16
memory_gb = 32
[containers]
insecure_registries = $REG $PRIV
[datastore d]
type = local
root = $T_DIR/data
[dataset digits]
source = d:/digits
[source code]
source = d:/digits
mount_path = /code
CONF
M=$T_DIR/mnt
J=$M/jobs

# wait_state JOB STATE [TENTHS]: job_state_in (lib.sh), with the job's reason when it fails.
wait_state() {
	JOB_WAIT_TENTHS=${3:-300} job_state_in "$J" "$1" "$2" ||
		{ echo "# $(cat "$J/$1/reason" 2>/dev/null)"; return 1; }
}
log_has() { grep -q -- "$2" "$J/$1/log"; }
# the blob GETs after line $1 of the registry's log, one digest a line
blobs_since() { tail -n +"$(($1 + 1))" "$REG_DIR/registry.log" | grep -o '"GET /v2/mlfs-test/busybox/blobs/sha256:[0-9a-f]*' | sort; }

mount_fg jobs.conf "$M" || { t_finish; exit 1; }
chmod 777 "$T_DIR"

# --- the node says what it found
check ".mlfs/node names podman" grep -q '^containers podman /' "$M/.mlfs/node"
check "... and runc, with why" grep -q '^containers_oci_runtime .*runc (' "$M/.mlfs/node"
check "... and the limits containers get" grep -q '^containers_limits nofile [0-9]*:[0-9]* nproc [0-9]' "$M/.mlfs/node"

# --- native: the image's marker, the writer's uid, the view at /opt/ml, the output uploaded
cat >native.json <<JSON
{"name": "native", "environment": {"image": "$BB1"}, "resources": {"cpu_count": 4},
 "data": {"datasets": ["digits"], "output": {"type": "datastore", "path": "d:/out/native/"}},
 "workers": [{"command": "cat /marker; id -u; cat /opt/ml/input/7.txt; echo made-inside >/opt/ml/output/result.txt; echo PATHS \$ML_DATA_PATH \$PROXIML_OUTPUT_PATH; pwd"}]}
JSON
chmod a+r native.json
check "a native spec with an image is accepted from another user" as_other cp native.json "$J/"
check "it succeeds" wait_state native SUCCEEDED
check "the log shows the image's marker" log_has native "mlfs-test-image busybox 1"
check "... the writer's uid inside" grep -qx "\[1\] $OTHER" "$J/native/log"
check "... its one dataset at /opt/ml/input" log_has native "\[1\] seven"
check "... the variables at /opt/ml" log_has native "PATHS /opt/ml/input /opt/ml/output"
check "... its folder /opt/ml/models" grep -qx "\[1\] /opt/ml/models" "$J/native/log"
same "its output was uploaded" "made-inside" "$(cat data/out/native/result.txt 2>&1)"
check "spec.json shows the image" grep -q "\"image\": \"$BB1\"" "$J/native/spec.json"
check "its pull's last words say its size" grep -Eqx 'pulled \([0-9]+\.[0-9] MB\)' "$T_DIR/state/jobs/native/workers/1/pull"
check "... and the log has podman's words, not its progress bars" sh -c "grep -q 'Writing manifest' '$J/native/log' && ! grep -q 'MiB / ' '$J/native/log'"
check "no container is left" sh -c "! podman ps -a --format '{{.Names}}' | grep -q '^mlfs-native-'"

# --- OpenPAI: variables, shmMB as /dev/shm
cat >pai.json <<JSON
{"jobName": "pai", "image": "$BB1",
 "taskRoles": [{"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 512, "shmMB": 96,
   "gpuNumber": 0, "command": "cat /marker; echo ROLE=\$PAI_CURRENT_TASK_ROLE_NAME; df -k /dev/shm | tail -1; cat /sys/fs/cgroup/memory/memory.limit_in_bytes"}]}
JSON
check "an OpenPAI spec with an image is accepted" cp pai.json "$J/"
check "it succeeds" wait_state pai SUCCEEDED
check "it ran in the image" log_has pai "mlfs-test-image busybox 1"
check "... with its PAI variables" log_has pai "ROLE=main"
check "... and shmMB 96 as /dev/shm" grep -Eq '^\[1\] shm +98304 ' "$J/pai/log"
check "... memoryMB 512 as the container's limit" grep -qx '\[1\] 536870912' "$J/pai/log"

# --- memory: the container's limit, and its OOM told as such
cat >oom.json <<JSON
{"name": "oom", "environment": {"image": "$BB1"}, "resources": {"cpu_count": 4, "memory_gb": 0.1},
 "workers": [{"command": "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max; exec awk 'BEGIN{s=\\"x\\"; while(1) s = s s}'"}]}
JSON
check "a job over its memory in a container is accepted" cp oom.json "$J/"
check "it fails" wait_state oom FAILED
check "... classified oom" grep -q 'killed for using more than its 0.1 GB of memory (oom)' "$J/oom/reason"
check "the container saw its limit" grep -qx '\[1\] 10737[0-9]*' "$J/oom/log"
check "no cgroup of the job is left in any hierarchy" sh -c "! ls -d /sys/fs/cgroup/*/mlfs/oom-* /sys/fs/cgroup/mlfs/oom-* 2>/dev/null | grep -q ."

# --- GPUs: the device nodes handed to podman.  No GPU here: stand-in nodes where there are
# none, char 195:N as the driver makes them (the node's [node] gpus = 2 are /dev/nvidia0 and 1)
MADE_NODES=()
for i in 0 1; do
	[ -e /dev/nvidia$i ] || { mknod -m 666 /dev/nvidia$i c 195 $i && MADE_NODES+=(/dev/nvidia$i); }
done
gpu_job() {
	cat >"$1.json" <<JSON
{"name": "$1", "environment": {"image": "$BB1"}, "resources": {"cpu_count": 4, "gpu_count": 1},
 "workers": [{"command": "ls -l /dev | sed -n 's/.* 195, *\\\\([0-9]*\\\\) .* \\\\(nvidia[0-9]*\\\\)\$/DEV \\\\2 \\\\1/p'; echo CVD=\$CUDA_VISIBLE_DEVICES; sleep $2"}]}
JSON
	cp "$1.json" "$J/"
}
gpu_job gpu_a 3
wait_state gpu_a RUNNING >/dev/null
gpu_job gpu_b 0
check "a GPU job beside another gets the other GPU" wait_state gpu_b SUCCEEDED
same "... inside, its one device node, 195:1 as on the node" "[1] DEV nvidia1 1" "$(grep '^\[1\] DEV' "$J/gpu_b/log")"
same "... and CUDA_VISIBLE_DEVICES counts from 0" "[1] CVD=0" "$(grep '^\[1\] CVD' "$J/gpu_b/log")"
check "the first GPU job succeeds" wait_state gpu_a SUCCEEDED
same "... inside, only its own device node" "[1] DEV nvidia0 0" "$(grep '^\[1\] DEV' "$J/gpu_a/log")"
check "... its attempt names the GPU it ran on" python3 -c "import json,sys; d=json.load(open('$J/gpu_a/status.json')); sys.exit(d['workers'][0]['attempts'][0]['gpus'] != [0])"
rm -f "${MADE_NODES[@]}"

# --- GPULab: an empty command runs the image's own
cat >gl.json <<JSON
{"name": "gl", "request": {"resources": {"cpus": 1, "gpus": 0, "cpuMemoryGb": 1},
 "docker": {"image": "$BB2", "command": ""}}}
JSON
check "a GPULab spec with an image and an empty command is accepted" cp gl.json "$J/"
check "it succeeds" wait_state gl SUCCEEDED
check "the image's own command ran" log_has gl "image-default-cmd"
check "... in that image" log_has gl "mlfs-test-image busybox 2"

# --- GPULab's HelloWorld as its documentation prints it, its image pointed at the registry
cat >hello.json <<SPEC
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
            "image": "$BB1",
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
check "GPULab's HelloWorld with its image is accepted" cp hello.json "$J/"
check "it runs in its image and succeeds" wait_state HelloWorld SUCCEEDED
check "... and says hello" grep -qx '\[1\] Hello World!' "$J/HelloWorld/log"

# --- Kibernetika: the cpu image of a resource without GPUs
cat >kb.yaml <<YAML
name: kb
resources:
- name: worker
  replicas: 2
  restartPolicy: Never
  images:
    cpu: $BB1
    gpu: $REG/mlfs-test/nothing:1
  command: cat /marker; echo R=\$REPLICA_INDEX
YAML
check "a Kibernetika task with images is accepted" cp kb.yaml "$J/"
check "it succeeds" wait_state kb SUCCEEDED
check "both replicas ran in the cpu image" sh -c "[ \$(grep -c 'mlfs-test-image busybox 1' '$J/kb/log') = 2 ]"

# --- Kibernetika's sources in a container: bound at their mount_path, workDir $CODE_DIR
cat >kbsrc.yaml <<YAML
name: kbsrc
resources:
- name: worker
  restartPolicy: Never
  images:
    cpu: $BB1
  default_volume_mapping: true
  workDir: \$CODE_DIR
  command: echo "pwd=\$(pwd) CODE_DIR=\$CODE_DIR"; cat 7.txt; touch /code/x 2>/dev/null || echo read-only
YAML
check "a Kibernetika task mapping a source in its image is accepted" cp kbsrc.yaml "$J/"
check "it succeeds" wait_state kbsrc SUCCEEDED
check "... in the source's mount_path, which CODE_DIR names" log_has kbsrc "pwd=/code CODE_DIR=/code"
check "... reading the source there" log_has kbsrc "^\[1\] seven$"
check "... read-only" log_has kbsrc "read-only"

# --- GPULab's storage: the [source] covering its path, bound at its containerPath
cat >glsrc.json <<JSON
{"name": "glsrc", "request": {"resources": {"cpus": 1, "gpus": 0, "cpuMemoryGb": 1},
 "docker": {"image": "$BB1", "command": "cat /work/7.txt",
            "storage": [{"hostPath": "/code", "containerPath": "/work"}]}}}
JSON
check "a GPULab job whose storage a [source] covers is accepted" cp glsrc.json "$J/"
check "it succeeds" wait_state glsrc SUCCEEDED
check "... reading the source at its containerPath" log_has glsrc "^\[1\] seven$"

# --- a registry that wants a login: GPULab's USER:PASSWORD@ form, OpenPAI's authFile
cat >glpriv.json <<JSON
{"name": "glpriv", "request": {"resources": {"cpus": 1, "gpus": 0, "cpuMemoryGb": 1},
 "docker": {"image": "puller:$PRIV_PASS@$PB1", "command": "cat /marker"}}}
JSON
chmod a+r glpriv.json
check "a GPULab image with its registry's login is accepted" as_other cp glpriv.json "$J/"
check "it is pulled with that login and runs" wait_state glpriv SUCCEEDED
check "... in that image" log_has glpriv "mlfs-test-image busybox 1"
check "the password is nowhere in the job's files" sh -c "! grep -rqF '$PRIV_PASS' '$J/glpriv/' '$T_DIR/state/jobs/glpriv/spec.json' 2>/dev/null"
podman rmi -f "$PB1" >/dev/null 2>&1
printf '{"auths": {"%s": {"auth": "%s"}}}\n' "$PRIV" "$(printf 'puller:%s' "$PRIV_PASS" | base64 -w0)" >pai-auth.json
chown $OTHER:$OTHER pai-auth.json
chmod 600 pai-auth.json
cp pai-auth.json root-auth.json
chown 0:0 root-auth.json
for f in pai-auth root-auth; do
	cat >"$f.spec.json" <<JSON
{"jobName": "${f%-auth}priv", "image": "$PB1", "authFile": "$T_DIR/$f.json",
 "taskRoles": [{"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0,
   "command": "cat /marker"}]}
JSON
	chmod a+r "$f.spec.json"
done
check "an OpenPAI job with its owner's authFile is accepted" as_other cp pai-auth.spec.json "$J/"
check "it pulls with it and runs" wait_state paipriv SUCCEEDED
podman rmi -f "$PB1" >/dev/null 2>&1
check "one naming root's credentials file is accepted" as_other cp root-auth.spec.json "$J/"
check "it fails" wait_state rootpriv FAILED
check "... saying its owner may not read that file" sh -c "grep -q \"authFile $T_DIR/root-auth.json: not a file the job's owner may read\" '$J/rootpriv/events' || { cat '$J/rootpriv/events'; false; }"
sed 's/"glpriv"/"nologin"/; s/puller:[^@]*@//' glpriv.json >nologin.json
check "a job of that registry without a login is accepted" cp nologin.json "$J/"
check "it fails" wait_state nologin FAILED
check "... with the registry's words" grep -qi 'cannot pull .*unauthorized' "$J/nologin/reason"

# --- a name that cannot be an image
cat >bad.json <<'JSON'
{"name": "bad", "environment": {"image": "Team/TF:1.15"}, "resources": {"cpu_count": 4},
 "workers": [{"command": "true"}]}
JSON
cp bad.json "$J/" 2>err.txt
check "a bad image name is refused (EINVAL)" grep -q 'Invalid argument' err.txt
check "... naming the field and why" grep -q "^bad.json:1:[0-9]*: environment.image: not a valid image name: the path component 'Team' is not lower-case" "$J/bad.json.error"

# --- an image the registry does not have
cat >missing.json <<JSON
{"name": "missing", "environment": {"image": "$REG/mlfs-test/nothing:1"}, "resources": {"cpu_count": 4},
 "workers": [{"command": "true"}]}
JSON
check "a job of a missing image is accepted" cp missing.json "$J/"
check "it fails" wait_state missing FAILED
check "... with the registry's words" sh -c "grep -Eqi 'cannot pull .*nothing:1: .*(manifest unknown|not found)' '$J/missing/reason'"

# --- two jobs of one image not on the node: one pull
before=$(wc -l <"$REG_DIR/registry.log")
for n in 1 2; do
	cat >pair$n.json <<JSON
{"name": "pair$n", "environment": {"image": "$BB2"}, "resources": {"cpu_count": 4},
 "workers": [{"command": "cat /marker"}]}
JSON
done
podman rmi -f "$BB2" >/dev/null 2>&1
cp pair1.json pair2.json "$J/"
check "two jobs of one new image succeed" wait_state pair1 SUCCEEDED
check "... both" wait_state pair2 SUCCEEDED
check "the registry served its blobs" test -n "$(blobs_since "$before")"
same "... each of them once" "" "$(blobs_since "$before" | uniq -d)"
# the one that waited for the other's pull takes its word for it (no `podman image exists`)
for n in 1 2; do
	if log_has pair$n "waiting for the pull of"; then
		check "pair$n, which waited, was told the image was pulled meanwhile" \
			log_has pair$n "image $BB2 was pulled while this job waited"
	fi
done

# --- the registry is down
stop_registry
podman rmi -f "$BB1" >/dev/null 2>&1
sed 's/"native"/"down"/; s#d:/out/native/#d:/out/down/#' native.json >down.json
check "a job is accepted while the registry is down" cp down.json "$J/"
check "it fails" wait_state down FAILED 600
check "... with the registry's words" sh -c "grep -Eqi 'cannot pull .*connection refused' '$J/down/reason'"
unmount_fg "$M"

# --- cache_size: the least recently used image no container uses is removed
"$ROOT/scripts/server-registry.sh" start "$REG_DIR" "$REG_PORT" >/dev/null || not_ok "the registry starts again"
sed 's/^insecure_registries = .*/&\ncache_size = 3M/' jobs.conf >cache.conf
mount_fg cache.conf "$M" || { t_finish; exit 1; }
podman rmi -f "$BB1" "$BB2" >/dev/null 2>&1
sed 's/"native"/"holder"/; s#"command": "[^"]*"#"command": "sleep 60"#; s#d:/out/native/#d:/out/holder/#' native.json >holder.json
check "a long job of busybox:1 is accepted" cp holder.json "$J/"
check "it runs" wait_state holder RUNNING
sed 's/"pair1"/"second"/' pair1.json >second.json
check "a job of busybox:2 is accepted" cp second.json "$J/"
check "it succeeds" wait_state second SUCCEEDED
check "both images take more than cache_size (3M), and the one in use is kept" podman image exists "$BB1"
echo cancel >"$J/holder/ctl"
check "the long job is cancelled" wait_state holder CANCELLED
sed 's/"pair1"/"third"/' pair1.json >third.json
podman rmi "$BB2" >/dev/null 2>&1	# so the next job pulls: a trim follows a pull
check "another job of busybox:2 is accepted" cp third.json "$J/"
check "it succeeds" wait_state third SUCCEEDED
check "the image no job uses any more was removed" sh -c "! podman image exists '$BB1'"
check "... and said so in the log of the job whose pull went over" log_has third "removed $BB1 .*the least recently used"
check "the image just used stays" podman image exists "$BB2"
unmount_fg "$M"

# --- a pull's progress in bytes, from podman's bars on its terminal (a stand-in podman
# that draws them as podman 4.3 does, escapes and all, so the sizes are known)
cat >fakepodman <<'SH'
#!/bin/bash
case "$1" in
image) exit 1 ;;
images) echo '[]' ;;
pull) echo "Trying to pull $*..."
	for i in 1 2 3 4 5 6; do
		printf '\033[2A\033[JCopying blob 249af98ff060 [==>---] %d.0MiB / 300.0MiB\nCopying blob 1111aaaa2222 [=>] 1.%dGiB / 2.0GiB\n' $((i * 50)) "$i"
		sleep 0.3
	done
	printf 'Copying blob 249af98ff060 done\nCopying blob 1111aaaa2222 done\nWriting manifest to image destination\n' ;;
esac
SH
chmod +x fakepodman
mkdir -p fake-state
printf '[mlfs]\nstate_dir = %s/fake-state\n[containers]\nruntime = %s/fakepodman\n' "$T_DIR" "$T_DIR" >fake.conf
"$MLFS" image pull fake.conf reg.lan/x:1 --progress fake.prog >fake.out 2>&1 &
seen=
for _ in $(seq 1 40); do
	sleep 0.1
	p=$(cat fake.prog 2>/dev/null)
	case $p in *" of "*" GB") seen=$p ;; esac
done
wait
check "a pull's progress reads N of M GB while it lasts" test -n "$seen"
same "... and its last words (300 MiB and 2 GiB)" "pulled (2.5 GB)" "$(cat fake.prog)"
check "the log has each blob once, no bars" sh -c "[ \$(grep -c 'Copying blob 249af98ff060 done' fake.out) = 1 ] && ! grep -q 'MiB / ' fake.out"

# --- a node without a runtime: refused, or on the node with fallback = host
sed 's/^insecure_registries = .*/runtime = none/' jobs.conf >none.conf
mount_fg none.conf "$M" || { t_finish; exit 1; }
check ".mlfs/node says there are no containers" grep -q '^containers none (containers are off here' "$M/.mlfs/node"
sed 's/"native"/"refused"/' native.json >refused.json
cp refused.json "$J/" 2>err.txt
check "a spec with an image is refused there (EINVAL)" grep -q 'Invalid argument' err.txt
check "... saying why, at the image's field" grep -q '^refused.json:1:[0-9]*: environment.image: this node cannot run container images: containers are off here' "$J/refused.json.error"
unmount_fg "$M"
awk '/^\[containers\]/{print; print "fallback = host"; next} {print}' jobs.conf | sed 's/^insecure_registries = .*/runtime = none/' >host.conf
mount_fg host.conf "$M" || { t_finish; exit 1; }
sed 's/"native"/"onhost"/; s#cat /marker; ##; s#d:/out/native/#d:/out/onhost/#' native.json >onhost.json
check "with fallback = host it is accepted" cp onhost.json "$J/"
check "it runs on the node and succeeds" wait_state onhost SUCCEEDED
check "... its image listed as ignored, with why" grep -q 'environment.image: this node runs no container images' "$J/onhost/status.json"
unmount_fg "$M"
trap - EXIT
t_finish
