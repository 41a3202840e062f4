#!/bin/bash
# bench_git.sh - a repository of 5,000 files in one commit, shown in a view
# by mlfs, next to `git clone` of it from the same server in the same run
# (issue 23's bars: at least 0.8x git clone's speed; the next job at the
# same commit fetches nothing).
#
# scripts/server-git.sh serves a bare repository (5,000 files of 1-8 KiB in
# 50 folders, one commit) from a tmpfs.  The ways, each repetition, in an
# order that alternates:
#   git-clone    `git clone -q git://127.0.0.1:PORT/r.git DIR` (its checkout
#                on the benchmark's disk), DIR removed after;
#   mlfs-first   a mount with an empty cache_dir whose [model m] is the
#                repository at main; timed: the first `ls` of models/m, which
#                fetches the commit and writes its tree into the cache;
#   mlfs-next    the next job: a new mount over the same cache_dir, the page
#                cache dropped, `ls` of the same model: main is resolved by
#                one listing of the server's refs, nothing is fetched (the
#                cache's pack files are counted before and after);
#   mlfs-pinned  the same with the ref a commit id: not even the refs are
#                asked (git daemon's log counts the connections).
# Usage: bench_git.sh (root; BENCH_RUNS repetitions, default 5; BENCH_DIR
# the scratch folder, default /var/tmp/mlfs-bench-git).
set -eu
cd "$(dirname "$0")/.."
bench=bench_git
. scripts/bench_lib.sh
RUNS=${BENCH_RUNS:-5}
[ "$(id -u)" -eq 0 ] || { echo "$bench: run as root (mounts, drop_caches)" >&2; exit 2; }
MLFS=${MLFS:-build/plain/mlfs}
[ -x "$MLFS" ] || scripts/build.sh plain >/dev/null
MLFS=$(readlink -f "$MLFS")
scratch=${BENCH_DIR:-/var/tmp/mlfs-bench-git}
FILES=5000
pids=""
daemon=""

cleanup() {
	bench_stop_all
	scripts/server-git.sh stop "$scratch/srv" 2>/dev/null || true
	umount "$scratch/srv" 2>/dev/null || true
}
trap cleanup EXIT

rm -rf "$scratch"
mkdir -p "$scratch/srv" "$scratch/logs" "$scratch/mnt-mlfs"
mount -t tmpfs -o size=400m tmpfs "$scratch/srv"
mkdir -p "$scratch/srv/repos"
python3 - "$scratch/work" "$FILES" <<'PY'
import os, random, sys
top, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(23)
for i in range(n):
    d = os.path.join(top, "pkg%02d" % (i % 50))
    os.makedirs(d, exist_ok=True)
    words = " ".join("w%x" % rnd.getrandbits(24) for _ in range(rnd.randint(150, 1200)))
    with open(os.path.join(d, "mod%04d.py" % i), "w") as f:
        f.write(words + "\n")
PY
git -C "$scratch/work" init -q -b main
git -C "$scratch/work" add -A
git -C "$scratch/work" -c user.name=b -c user.email=b@example.org commit -qm "5,000 files"
git clone -q --bare "$scratch/work" "$scratch/srv/repos/r.git"
COMMIT=$(git -C "$scratch/work" rev-parse HEAD)
rm -rf "$scratch/work"
PORT=$(free_port)
scripts/server-git.sh start "$scratch/srv" "$PORT" >/dev/null
URL=git://127.0.0.1:$PORT/r.git
conf() {
	cat >"$scratch/mlfs.conf" <<CONF
[mlfs]
state_dir = $scratch/state
cache_dir = $scratch/cache
[model m]
source = $URL#$1
CONF
}
list_model() { [ "$(ls "$scratch/mnt-mlfs/models/m" | wc -l)" -eq 50 ]; }
packs() { find "$scratch/cache/git" -name '*.pack' 2>/dev/null | wc -l; }
connections() { grep -c 'Connection from' "$scratch/srv/daemon.log" || true; }
git_clone() { git clone -q "$URL" "$scratch/clone"; }

# timed WAY COMMAND...: drop_caches, then COMMAND's time into $scratch/res-WAY.
timed() {
	local way=$1
	shift
	drop_caches
	time_us "$@" >>"$scratch/res-$way"
}

# the next job over the cache mlfs-first left: with ref $1, its time into res-$2
next_job() {
	local p0 c0
	conf "$1"
	first_read_mount
	p0=$(packs)
	c0=$(connections)
	timed "$2" list_model
	echo "$(($(packs) - p0)) $(($(connections) - c0))" >>"$scratch/asked-$2"
	first_read_umount
}

for run in $(seq "$RUNS"); do
	for way in $(run_order "$run" git-clone mlfs-first); do
		case $way in
		git-clone)
			rm -rf "$scratch/clone"
			timed git-clone git_clone
			[ "$(find "$scratch/clone" -name '*.py' | wc -l)" -eq "$FILES" ]
			rm -rf "$scratch/clone" ;;
		mlfs-first)
			rm -rf "$scratch/cache" "$scratch/state"
			conf main
			first_read_mount
			timed mlfs-first list_model
			[ "$(find "$scratch/mnt-mlfs/models/m/" -name '*.py' | wc -l)" -eq "$FILES" ]
			first_read_umount
			next_job main mlfs-next
			next_job "$COMMIT" mlfs-pinned ;;
		esac
	done
	echo "# run $run: git clone $(us_to_s "$(tail -1 "$scratch/res-git-clone")") s," \
		"mlfs first $(us_to_s "$(tail -1 "$scratch/res-mlfs-first")") s," \
		"next job $(us_to_s "$(tail -1 "$scratch/res-mlfs-next")") s" \
		"(new packs, connections: $(tail -1 "$scratch/asked-mlfs-next"))," \
		"pinned $(us_to_s "$(tail -1 "$scratch/res-mlfs-pinned")") s" \
		"($(tail -1 "$scratch/asked-mlfs-pinned"))"
done
declare -A med
for w in git-clone mlfs-first mlfs-next mlfs-pinned; do
	med[$w]=$(median_s "$scratch/res-$w")
	printf '%-12s median %.3f s\n' "$w" "${med[$w]}"
done
r=$(ratio "${med[git-clone]}" "${med[mlfs-first]}")
echo "first view, mlfs over git clone:    $r (bar >= 0.8) $(verdict "$r" 0.8)"
fetched=$(awk '{ s += $1 } END { print s + 0 }' "$scratch/asked-mlfs-next" "$scratch/asked-mlfs-pinned")
asked=$(awk '{ s += $2 } END { print s + 0 }' "$scratch/asked-mlfs-pinned")
echo "next job: packs fetched $fetched (bar 0) $([ "$fetched" -eq 0 ] && echo PASS || echo FAIL)," \
	"connections for a pinned commit $asked (bar 0) $([ "$asked" -eq 0 ] && echo PASS || echo FAIL)"
