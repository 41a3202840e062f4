#!/bin/bash
# gpu_check.sh - checks, on a node with NVIDIA GPUs, that mlfs finds them as
# the driver does and that each worker gets exactly its GPUs, in a container
# and on the node.  Needs no test server: run it as root on the GPU node,
# after a build (scripts/build.sh), with podman and an OCI runtime installed.
#
#   gpu_check.sh [--mlfs PATH] [--probe PATH] IMAGE
#
# IMAGE: an image on the node or pullable from it, with /bin/sh, cp, grep
# and glibc (the driver's nvidia-smi and libraries are bound into it from the
# node: debian:12 or ubuntu:24.04 do).  --mlfs: the binary under test
# (default build/mlfs); --probe: tests/gpu/cuda_probe's binary (default
# build/tests/cuda_probe), which lists what CUDA sees and runs a kernel.
#
# What it checks, against nvidia-smi on the node:
#   - .mlfs/node: the GPUs' count, type, memory, the driver's CUDA version,
#     each GPU's /dev/nvidiaN (the driver's minor number, not nvidia-smi's
#     index) and PCI address; the driver's libraries found (ldconfig -p);
#   - a worker in IMAGE given 1 GPU (and, on a node of several, one given
#     them all): nvidia-smi inside lists exactly the UUIDs of the GPUs its
#     status.json names, CUDA enumerates exactly those and runs a kernel on
#     each, CUDA_VISIBLE_DEVICES counts from 0, /dev holds only their
#     /dev/nvidiaN;
#   - a worker in IMAGE given none: no /dev/nvidiaN, no nvidia-smi, CUDA
#     finds no driver;
#   - workers on the node (no image): CUDA_VISIBLE_DEVICES makes CUDA see
#     exactly the GPU given, or none;
#   - a GPU job waits while another holds every GPU, then runs.
# It prints one "ok"/"not ok" line a check and a tally; exit 0 when all passed.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
MLFS=$root/build/mlfs
PROBE=$root/build/tests/cuda_probe
usage="usage: $0 [--mlfs PATH] [--probe PATH] IMAGE"
while [ $# -gt 1 ]; do
	case $1 in
	--mlfs) MLFS=$2 ;;
	--probe) PROBE=$2 ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
	shift 2
done
[ $# -eq 1 ] && [ "${1#-}" = "$1" ] || { echo "$usage" >&2; exit 2; }
IMAGE=$1
. "$root/tests/integration/lib.sh"
T_NAME=gpu_check
[ "$(id -u)" = 0 ] || { echo "$0: run it as root" >&2; exit 2; }
for need in "$MLFS" "$PROBE"; do
	[ -x "$need" ] || { echo "$0: $need: not built" >&2; exit 2; }
done
command -v nvidia-smi >/dev/null || { echo "$0: no nvidia-smi: not a GPU node" >&2; exit 2; }

t_setup
cd "$T_DIR" || exit 1
mkdir -p data/probe mnt
cp "$PROBE" data/probe/cuda_probe
cat >gpu.conf <<CONF
[mlfs]
state_dir = $T_DIR/state
cache_dir = $T_DIR/cache
[node]
# GPUs detected; CPUs declared, so that a small machine takes the CPU-only jobs' 4 (native rule)
cpus = 64
[containers]
runtime = podman
[datastore d]
type = local
root = $T_DIR/data
[dataset probe]
source = d:/probe
CONF
M=$T_DIR/mnt
J=$M/jobs

# --- what the driver says
mapfile -t SMI < <(nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,memory.total \
	--format=csv,noheader,nounits)
G=${#SMI[@]}
[ "$G" -gt 0 ] || { echo "$0: nvidia-smi lists no GPU" >&2; exit 2; }
UUID=() BUS=() MINOR=()
for line in "${SMI[@]}"; do
	IFS=, read -r idx uuid bus name mem <<<"$line"
	UUID[idx]=${uuid# } BUS[idx]=${bus# } NAME=${name# } MEM=${mem# }
done
# nvidia-smi -q: each GPU's "Minor Number", in index order
mapfile -t MINOR < <(nvidia-smi -q | sed -n 's/^ *Minor Number *: *//p')
CUDA=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p')
echo "# $G GPU(s): ${SMI[*]}; minors ${MINOR[*]}; CUDA $CUDA"

mount_fg gpu.conf "$M" || { t_finish; exit 1; }
cat "$M/.mlfs/node" >node.txt
node=$(cat node.txt)
same ".mlfs/node: the GPUs nvidia-smi lists" "gpus $G" "$(grep '^gpus ' <<<"$node")"
same "... their type" "gpu_type $NAME" "$(grep '^gpu_type ' <<<"$node")"
same "... their memory" "$(awk -v m="$MEM" 'BEGIN { printf "gpu_memory_gb %g", m / 1024 }')" \
	"$(grep '^gpu_memory_gb ' <<<"$node")"
same "... the driver's CUDA version" "cuda_version $CUDA" "$(grep '^cuda_version ' <<<"$node")"
want=
for ((i = 0; i < G; i++)); do want+="gpu_device.$i /dev/nvidia${MINOR[i]} ${BUS[i]}"$'\n'; done
same "... each GPU's device: the driver's minor, and its PCI address" "${want%$'\n'}" \
	"$(grep '^gpu_device\.' <<<"$node")"
check "... the driver's nvidia-smi, to bind into containers" \
	grep -q '^containers_driver_file /.*/nvidia-smi /usr/bin/nvidia-smi$' node.txt
check "... its libnvidia-ml (ldconfig -p)" grep -q '^containers_driver_file /.*/libnvidia-ml.so.1 /usr/lib/' node.txt
check "... its libcuda (ldconfig -p)" grep -q '^containers_driver_file /.*/libcuda.so.1 /usr/lib/' node.txt
sed -n 's/^\(containers\|gpu\)/# &/p' <<<"$node"

# submit NAME GPUS IMAGE_JSON: a native job whose one worker shows what it sees.
submit() {
	cat >"$1.json" <<JSON
{"name": "$1", $3 "resources": {"gpu_count": $2, "cpu_count": 4},
 "data": {"datasets": ["probe"]},
 "workers": [{"command": "echo CVD=\${CUDA_VISIBLE_DEVICES-unset}; ls /dev | sed -n 's/^\\\\(nvidia[0-9][0-9]*\\\\)\$/DEV=\\\\1/p'; if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=uuid --format=csv,noheader | sed 's/^/SMI=/'; else echo SMI=none; fi; cp /opt/ml/input/cuda_probe /tmp/probe.\$\$ && chmod +x /tmp/probe.\$\$ && /tmp/probe.\$\$; echo PROBE=\$?; rm -f /tmp/probe.\$\$"}]}
JSON
	cp "$1.json" "$J/"
}
# given JOB: the node's GPU indices its worker's first attempt ran on (status.json)
given() { tr -d ' \n' <"$J/$1/status.json" | grep -o '"attempts":\[{[^]]*"gpus":\[[0-9,]*\]' | sed 's/.*"gpus"://' | grep -o '[0-9][0-9]*' | sort -n; }
# seen JOB KEY: the sorted values of KEY= lines in its log
seen() { sed -n "s/^\[1\] $2=//p" "$J/$1/log" | sort; }
wait_end() {
	JOB_WAIT_TENTHS=${2:-1200} job_state_in "$J" "$1" SUCCEEDED FAILED CANCELLED >/dev/null
	same "$1 succeeds" SUCCEEDED "$(cat "$J/$1/state")"
	[ "$(cat "$J/$1/state")" = SUCCEEDED ] || sed 's/^/#   /' "$J/$1/log" "$J/$1/reason" | tail -20
}

# check_gpus JOB IN_CONTAINER COUNT: what the worker saw is exactly the COUNT GPUs it was given
check_gpus() {
	local job=$1 inside=$2 gpus uuids= devs= cvd= k=0 i
	gpus=$(given "$job")
	same "$job: status.json names the $3 GPU(s) it was given" "$3" "$(wc -w <<<"$gpus")"
	for i in $gpus; do
		uuids+=${UUID[i]}$'\n' devs+=nvidia${MINOR[i]}$'\n'
		cvd+=${cvd:+,}$([ "$inside" = 1 ] && echo $k || echo "$i")
		k=$((k + 1))
	done
	uuids=$(sort <<<"${uuids%$'\n'}") devs=$(sort <<<"${devs%$'\n'}")
	echo "# $job was given GPU(s) $(echo $gpus): ${uuids//$'\n'/ }"
	same "$job: CUDA_VISIBLE_DEVICES" "$cvd" "$(seen "$job" CVD)"
	same "$job: CUDA sees exactly its GPUs" "$uuids" \
		"$(sed -n 's/^\[1\] device [0-9]* .* \(GPU-[0-9a-f-]*\)$/\1/p' "$J/$job/log" | sort)"
	same "$job: a kernel computed right on each" "$k" "$(grep -c '^\[1\] device [0-9]* kernel ok' "$J/$job/log")"
	if [ "$inside" = 1 ]; then
		same "$job: nvidia-smi inside lists exactly its GPUs" "$uuids" "$(seen "$job" SMI)"
		same "$job: /dev inside holds exactly their devices" "$devs" "$(seen "$job" DEV)"
	fi
}

# --- in the image
submit ctr1 1 "\"environment\": {\"image\": \"$IMAGE\"},"
wait_end ctr1 3000	# the first pulls the image
check_gpus ctr1 1 1
if [ "$G" -gt 1 ]; then
	submit ctrall "$G" "\"environment\": {\"image\": \"$IMAGE\"},"
	wait_end ctrall
	check_gpus ctrall 1 "$G"
fi
submit ctr0 0 "\"environment\": {\"image\": \"$IMAGE\"},"
wait_end ctr0
same "ctr0: no GPU device inside" "" "$(seen ctr0 DEV)"
same "ctr0: no nvidia-smi inside" none "$(seen ctr0 SMI)"
same "ctr0: CUDA finds no driver inside (cuda_probe exits 2)" 2 "$(seen ctr0 PROBE)"

# --- on the node
submit host1 1 ""
wait_end host1
check_gpus host1 0 1
submit host0 0 ""
wait_end host0
same "host0: CUDA_VISIBLE_DEVICES empty" "" "$(seen host0 CVD)"
check "host0: CUDA sees no device (cuda_probe exits 1)" grep -qx '\[1\] devices 0' "$J/host0/log"

# --- a job asking for every GPU waits while another holds them
cat >hold.json <<JSON
{"name": "hold", "resources": {"gpu_count": $G, "cpu_count": 4}, "workers": [{"command": "sleep 4"}]}
JSON
cp hold.json "$J/"
job_state_in "$J" hold RUNNING >/dev/null
submit after "$G" ""
sleep 1
same "after waits while hold has every GPU" QUEUED "$(cat "$J/after/state")"
check "... its reason says GPUs" grep -qi gpu "$J/after/reason"
echo "# after: $(cat "$J/after/reason")"
wait_end after
check_gpus after 0 "$G"

unmount_fg "$M"
t_finish
