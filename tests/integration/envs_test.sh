#!/bin/bash
# envs_test.sh - proxiML's base environments and packages, through a real
# mount, Podman (runc), a real registry and a real apt repository and pip
# index on 127.0.0.1: a native job asking for python_version 3.11 runs in
# the image of the config's [environment py311] (Debian 12 from
# scripts/make-images.sh --debian, its apt source pointed here), with
# mlfs-test-pkg installed by apt (scripts/make-pkgrepo.sh's repository) and
# by pip (its index, named by PIP_INDEX_URL in the spec's variables): the
# log shows each step, the command runs as its owner and sees both; a
# second job of the same packages reuses the image made for the first; a
# package that does not exist fails the job with apt's words; a spec no
# environment matches is EINVAL naming the node's choices.  conda cannot
# be tested here: no image has it.
# Usage: envs_test.sh MLFS
set -u
MLFS=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1

for t in podman docker-registry debootstrap nginx apt-ftparchive dpkg-deb; do
	if ! command -v $t >/dev/null; then
		ok "# SKIP $t is not installed (scripts/install-deps.sh installs it)"
		t_finish
		exit 0
	fi
done

REG_PORT=$(free_port)
REG=127.0.0.1:$REG_PORT
REG_DIR=$T_DIR/registry
PKG_PORT=$(free_port)
PKG_DIR=$T_DIR/pkg
"$ROOT/scripts/server-registry.sh" start "$REG_DIR" "$REG_PORT" >/dev/null || { not_ok "the registry starts"; t_finish; exit 1; }
MADE=()		# the images this test made, removed at the end
t_cleanup() {
	local made
	made=$(grep -ho 'mlfs: made localhost/mlfs-env/[0-9a-f]*' "$T_DIR"/state/jobs/*/log 2>/dev/null | sort -u | cut -d' ' -f3)
	# shellcheck disable=SC2086
	podman rmi $made "${MADE[@]}" >/dev/null 2>&1
	"$ROOT/scripts/server-nginx.sh" stop "$PKG_DIR" >/dev/null 2>&1
	"$ROOT/scripts/server-registry.sh" stop "$REG_DIR" >/dev/null 2>&1
}
trap 't_cleanup; server_cleanup true /; rm -rf "$T_DIR"' EXIT
IMAGES=$(dirname "$MLFS")/images
check "the Debian image is made (debootstrap once a build folder) and pushed" \
	"$ROOT/scripts/make-images.sh" --debian "$IMAGES" "$REG"
check "the apt repository and pip index are made" "$ROOT/scripts/make-pkgrepo.sh" "$PKG_DIR"
check "... and served" "$ROOT/scripts/server-nginx.sh" start "$PKG_DIR" "$PKG_PORT"

# Debian 12 with this test's apt repository as its only source
BASE=$REG/mlfs-test/debian:12
ENV_IMAGE=$REG/mlfs-test/debian-apt:1
MADE=("$BASE" "$ENV_IMAGE")
mkdir -p ctx
echo "deb [trusted=yes] http://127.0.0.1:$PKG_PORT/apt ./" >ctx/mlfs-test.list
printf 'FROM %s\nCOPY mlfs-test.list /etc/apt/sources.list.d/mlfs-test.list\n' "$BASE" >ctx/Containerfile
check "an image of it with the test's apt source is made" sh -c "
	podman pull --quiet --tls-verify=false '$BASE' &&
	podman build --quiet --pull=never --runtime /usr/sbin/runc -t '$ENV_IMAGE' ctx &&
	podman push --quiet --tls-verify=false '$ENV_IMAGE'"
podman rmi "$ENV_IMAGE" "$BASE" >/dev/null 2>&1	# the job pulls it

cat >jobs.conf <<CONF
[mlfs]
state_dir = $T_DIR/state
cache_dir = $T_DIR/cache
[node]
gpus = 0
cpus = 16
memory_gb = 32
[containers]
insecure_registries = $REG
[environment py311]
image = $ENV_IMAGE
python_version = 3.11
[environment tf]
image = $REG/mlfs-test/nothing:1
python_version = 3.9
framework = TensorFlow
framework_version = 2.11
CONF
mkdir -p mnt
M=$T_DIR/mnt
J=$M/jobs
JOB_WAIT_TENTHS=1200	# a pull and the installs: seconds, more on a busy machine
wait_state() { job_state_in "$J" "$1" "$2" || { echo "# $(cat "$J/$1/reason")"; return 1; }; }
log_has() { grep -qF -- "$2" "$J/$1/log"; }
# how often the apt repository served its .deb
deb_gets() { grep -cE 'GET /apt/(\./)?mlfs-test-pkg_1\.0_all\.deb ' "$PKG_DIR/access.log"; }

mount_fg jobs.conf "$M" || { t_finish; exit 1; }
chmod 777 "$T_DIR"

# --- a base environment with apt and pip packages
# job NAME APT_PACKAGE [RUN]: a spec; RUN, a variable more, asks for another prepared image
job() {
	local more=
	[ -n "${3:-}" ] && more=", \"RUN\": \"$3\""
	cat <<JSON
{"name": "$1", "environment": {"python_version": "3.11",
  "variables": {"PIP_INDEX_URL": "http://127.0.0.1:$PKG_PORT/pip/simple"$more},
  "packages": {"apt": ["$2"], "pip": ["mlfs-test-pkg"]}},
 "resources": {"cpu_count": 4},
 "workers": [{"command": "id -u; cat /usr/share/mlfs-test-pkg/marker; python3 -c 'import mlfs_test_pkg; print(mlfs_test_pkg.MARKER)'; cat /marker"}]}
JSON
}
job env1 mlfs-test-pkg >env1.json
chmod a+r env1.json
check "a job asking for python_version 3.11 with packages is accepted from another user" as_other cp env1.json "$J/"
check "it succeeds" wait_state env1 SUCCEEDED
check "spec.json names the environment chosen" grep -q '"base_environment": "py311"' "$J/env1/spec.json"
check "... and its image" grep -q "\"image\": \"$ENV_IMAGE\"" "$J/env1/spec.json"
check "the log shows the apt step" log_has env1 "[1] mlfs: apt-get install: mlfs-test-pkg"
check "... and apt's output" log_has env1 "[1] Setting up mlfs-test-pkg (1.0) ..."
check "... the pip step, from the index of the spec's PIP_INDEX_URL" log_has env1 "[1] Looking in indexes: http://127.0.0.1:$PKG_PORT/pip/simple"
check "... and pip's output" log_has env1 "[1] Successfully installed mlfs-test-pkg-1.0"
check "apt came before pip" sh -c "[ \$(grep -n 'mlfs: apt-get install' '$J/env1/log' | cut -d: -f1) -lt \$(grep -n 'mlfs: pip install' '$J/env1/log' | cut -d: -f1) ]"
check "the command ran as its owner" grep -qx "\[1\] $OTHER" "$J/env1/log"
check "... and saw the apt package" grep -qx '\[1\] mlfs-test-apt' "$J/env1/log"
check "... and imported the pip package" grep -qx '\[1\] mlfs-test-pip' "$J/env1/log"
check "... in the environment's image" log_has env1 "[1] mlfs-test-image debian 12"
check "no preparation container is left" sh -c "! podman ps -a --format '{{.Names}}' | grep -q '^mlfs-prepare-'"
check "the variables are not kept in the image made" sh -c "! podman image inspect \$(grep -o 'made localhost/mlfs-env/[0-9a-f]*' '$J/env1/log' | cut -d' ' -f2) | grep -q PIP_INDEX_URL"
same "the repository served the .deb once" 1 "$(deb_gets)"

# --- the same packages again: the image made for env1
job env2 mlfs-test-pkg >env2.json
check "a second job of the same packages is accepted" cp env2.json "$J/"
check "it succeeds" wait_state env2 SUCCEEDED
check "it reuses the image made before" log_has env2 "[1] mlfs: the packages are installed already: localhost/mlfs-env/"
check "... installing nothing" sh -c "! grep -q 'mlfs: apt-get\|Setting up' '$J/env2/log'"
check "... and sees both packages" sh -c "grep -qx '\[1\] mlfs-test-apt' '$J/env2/log' && grep -qx '\[1\] mlfs-test-pip' '$J/env2/log'"
same "the repository served nothing more" 1 "$(deb_gets)"

# --- two jobs of packages not prepared yet, at once: one build (another variable, another image)
job pair1 mlfs-test-pkg 2 >pair1.json
job pair2 mlfs-test-pkg 2 >pair2.json
cp pair1.json pair2.json "$J/"
check "two jobs of the same new packages at once succeed" sh -c "$(declare -f job_state_in wait_state); J='$J' JOB_WAIT_TENTHS=$JOB_WAIT_TENTHS; wait_state pair1 SUCCEEDED && wait_state pair2 SUCCEEDED"
same "one of them made the image" 1 "$(cat "$J/pair1/log" "$J/pair2/log" | grep -c '^\[1\] mlfs: made localhost/mlfs-env/')"
same "... which the other found made" 1 "$(cat "$J/pair1/log" "$J/pair2/log" | grep -c '^\[1\] mlfs: the packages are installed already')"
same "the repository served the .deb once more" 2 "$(deb_gets)"

# --- a package that does not exist
job nopkg mlfs-no-such-pkg >nopkg.json
check "a job of a package that does not exist is accepted" cp nopkg.json "$J/"
check "it fails" wait_state nopkg FAILED
check "... with apt's words" grep -q "cannot prepare $ENV_IMAGE: apt-get install: E: Unable to locate package mlfs-no-such-pkg" "$J/nopkg/reason"

# --- no environment matches
cat >nomatch.json <<'JSON'
{"name": "nomatch", "environment": {"python_version": "2.7", "framework": "pytorch"},
 "workers": [{"command": "true"}]}
JSON
cp nomatch.json "$J/" 2>err.txt
check "a spec no environment matches is refused (EINVAL)" grep -q 'Invalid argument' err.txt
check "... naming the node's choices" grep -q "^nomatch.json:1:55: environment.python_version: no base environment of this node has python_version 2.7, framework pytorch; it has py311 (python_version 3.11), tf (python_version 3.9, framework TensorFlow 2.11)" "$J/nomatch.json.error"
unmount_fg "$M"
trap - EXIT
t_finish
