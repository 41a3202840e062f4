#!/bin/bash
# bench_containers.sh - what running a worker in its image costs, against
# Podman alone (issue 20).
#
# A registry on 127.0.0.1 (scripts/server-registry.sh) serves the test
# images (scripts/make-images.sh --big: busybox, and busybox plus 300 MiB of
# random bytes); a gateway is mounted with [containers] insecure_registries
# naming it.  Then, BENCH_RUNS times each (default 11), alternating which
# way goes first:
#   start   an image already on the node, a job with no data: from the
#           open(2) of a spec written into jobs/ to the first line of the
#           command in the job's log (polled every millisecond), against a
#           bare `podman run` of the same image and command (same runtime,
#           limits, user and host network) to its first line on stdout.
#           Bar: mlfs's median at most 150 ms more than podman's.
#   pull    the 300 MiB image, removed from the node before each run:
#           `mlfs image pull` against `podman pull`.  Bar: podman's time /
#           mlfs's at least 0.9.
#   four    four jobs of that image, removed first, written at once, to the
#           first line of the last of them, against one such job.  Bar: four
#           take no longer than one (at most 1.1 times, for noise).
# Medians; a benchmark, not a test: it exits 0 when a bar fails, and says so.
# Needs root, podman, runc and docker-registry (scripts/install-deps.sh).
# Usage: bench_containers.sh [BUILD_DIR]   (default build/bench)
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build/bench}
RUNS=${BENCH_RUNS:-11}
if [ ! -x "$BUILD/mlfs" ]; then
	cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLFS_WERROR=ON >/dev/null &&
		cmake --build "$BUILD" -j"$(nproc)" >/dev/null || exit 1
fi
MLFS=$(cd "$BUILD" && pwd)/mlfs
W=$(mktemp -d /tmp/mlfs-bench-ct.XXXXXX)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
REG=127.0.0.1:$PORT
cleanup() {
	fusermount3 -u "$W/mnt" 2>/dev/null || true
	scripts/server-registry.sh stop "$W/registry" >/dev/null 2>&1 || true
	rm -rf "$W"
}
trap cleanup EXIT
scripts/server-registry.sh start "$W/registry" "$PORT" >/dev/null
scripts/make-images.sh --big build/images "$REG" >/dev/null 2>&1
mkdir -p "$W/mnt" "$W/state"
cat >"$W/mlfs.conf" <<CONF
[mlfs]
state_dir = $W/state
cache_dir = $W/cache
[node]
gpus = 0
cpus = 64
memory_gb = 64
[containers]
insecure_registries = $REG
CONF
"$MLFS" mount "$W/mlfs.conf" "$W/mnt"
for _ in $(seq 1 100); do [ -d "$W/mnt/jobs" ] && break; sleep 0.05; done
podman pull -q --tls-verify=false "$REG/mlfs-test/busybox:1" >/dev/null

python3 - "$W" "$REG" "$MLFS" "$RUNS" <<'PY'
import json, os, statistics, subprocess, sys, time

w, reg, mlfs, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
jobs = os.path.join(w, "mnt", "jobs")
small, big = reg + "/mlfs-test/busybox:1", reg + "/mlfs-test/big:1"
node = open(os.path.join(w, "mnt", ".mlfs", "node")).read()
oci = [l.split()[1] for l in node.splitlines() if l.startswith("containers_oci_runtime")][0]
lim = [l.split() for l in node.splitlines() if l.startswith("containers_limits")][0]
seq = [0]

def job(image, name):
    spec = {"name": name, "environment": {"image": image}, "resources": {"cpu_count": 4},
            "workers": [{"command": "echo first; exit 0"}]}
    return json.dumps(spec).encode()

def first_line(name, deadline=600):
    log = os.path.join(jobs, name, "log")
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            with open(log, "rb") as f:
                if b"first" in f.read():
                    return
        except OSError:
            pass
        time.sleep(0.001)
    raise SystemExit("job %s never printed its first line: %s" % (name, open(os.path.join(jobs, name, "reason")).read()))

def submit(image):
    seq[0] += 1
    name = "b%d" % seq[0]
    fd = os.open(os.path.join(jobs, name + ".json"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, job(image, name))
    os.close(fd)
    return name

def mlfs_start():
    t = time.monotonic()
    first_line(submit(small))
    return time.monotonic() - t

def podman_start():
    t = time.monotonic()
    p = subprocess.Popen(["podman", "run", "--rm", "--pull=never", "--runtime=" + oci,
                          "--ulimit=nofile=" + lim[2], "--ulimit=nproc=%s:%s" % (lim[4], lim[4]),
                          "--user=65534:65534", "--network=host", "--log-driver=none",
                          "--entrypoint=/bin/sh", small, "-c", "echo first; exit 0"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdout.readline()
    d = time.monotonic() - t
    p.wait()
    return d

def rmi():
    # every image holding big:1's layers, whatever registry it came from: else podman skips them
    names = subprocess.run(["podman", "images", "--format", "{{.Repository}}:{{.Tag}}"],
                           capture_output=True, text=True).stdout.split()
    gone = [n for n in names if n.endswith("/mlfs-test/big:1")] + [big]
    subprocess.run(["podman", "rmi", "-f"] + gone, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def timed(argv):
    rmi()
    t = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t

def mlfs_pull():
    return timed([mlfs, "image", "pull", os.path.join(w, "mlfs.conf"), big])

def podman_pull():
    return timed(["podman", "pull", "--tls-verify=false", big])

def jobs_of_big(n):
    rmi()
    t = time.monotonic()
    names = [submit(big) for _ in range(n)]
    for name in names:
        first_line(name)
    return time.monotonic() - t

def pairs(a, b, n):
    ra, rb = [], []
    for i in range(n):
        if i % 2:
            rb.append(b()); ra.append(a())
        else:
            ra.append(a()); rb.append(b())
    return statistics.median(ra), statistics.median(rb), ra, rb

def ms(v):
    return "%.0f ms" % (v * 1000)

m, p, ra, rb = pairs(mlfs_start, podman_start, runs)
print("start    mlfs %s  podman run %s  difference %s  (bar: at most 150 ms)  %s" %
      (ms(m), ms(p), ms(m - p), "PASS" if m - p <= 0.150 else "FAIL"))
print("         mlfs runs: %s" % " ".join(ms(x) for x in ra))
print("         podman runs: %s" % " ".join(ms(x) for x in rb))
n = max(3, runs // 2)
m, p, ra, rb = pairs(mlfs_pull, podman_pull, n)
print("pull     mlfs image pull %.2f s  podman pull %.2f s  podman/mlfs %.2f  (bar: at least 0.9)  %s" %
      (m, p, p / m, "PASS" if p / m >= 0.9 else "FAIL"))
f, o, ra, rb = pairs(lambda: jobs_of_big(4), lambda: jobs_of_big(1), n)
print("four     4 jobs of a new image %.2f s  1 job %.2f s  ratio %.2f  (bar: at most 1.1)  %s" %
      (f, o, f / o, "PASS" if f / o <= 1.1 else "FAIL"))
PY
rmi_small() { podman rmi -f "$REG/mlfs-test/busybox:1" "$REG/mlfs-test/big:1" >/dev/null 2>&1 || true; }
rmi_small
