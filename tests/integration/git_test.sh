#!/bin/bash
# git_test.sh - the git backend through a real mount over real git servers
# (scripts/server-git.sh: git daemon, and nginx with git-http-backend),
# checked against git's own view of the same commits: a branch, an
# annotated tag, a commit id and the server's HEAD show the trees git has
# for them (names, bytes, an executable that runs, a symlink), read-only;
# HTTP with a token (password_file), a credential-store file, and a wrong
# token (EACCES, no token in the log); a new commit on a branch shows in the next mount, which fetches only
# it; a commit already written out is read with every server stopped (no
# fetch at all); two datastores of one branch first read at once; a
# proxiML job's git model at /opt/ml/models, and one whose ref does not
# exist refused at staging, named; the commit in status.json; a Kibernetika
# task whose git source is its workDir ($SRC_DIR); status.json after a restart.
# Usage: git_test.sh MLFS POSIX_CHECK
set -u
MLFS=$(readlink -f "$1")
POSIX_CHECK=$(readlink -f "$2")	# unused: the backend is read-only
TOP=$(cd "$(dirname "$0")/../.." && pwd)
GIT_SH=$TOP/scripts/server-git.sh
# Debian's libgit2 1.5.1 leaks PCRE2 match data (libgit2#6382): tests/lsan.supp names it
[ -f "$TOP/tests/lsan.supp" ] && export LSAN_OPTIONS="suppressions=$TOP/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
. "$(dirname "$0")/lib.sh"
t_setup
cd "$T_DIR" || exit 1
: "$POSIX_CHECK"

SRV=$T_DIR/srv
VIEW_PID=
t_cleanup() {
	awk -v d="$T_DIR/" '$3 == "fuse.mlfs" && index($2, d) == 1 { print $2 }' /proc/self/mounts |
		while read -r m; do fusermount3 -u -z "$m" 2>/dev/null; done
	[ -n "$VIEW_PID" ] && kill "$VIEW_PID" 2>/dev/null
	server_cleanup "$GIT_SH" "$SRV"
}
trap 't_cleanup; rm -rf "$T_DIR"' EXIT

# --- a repository: two commits on main, a tag, a branch
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.org GIT_COMMITTER_NAME=t \
	GIT_COMMITTER_EMAIL=t@example.org
g() { git -C work "$@"; }
git init -q -b main work
mkdir -p work/sub/deeper
echo "first" >work/a.txt
echo "deep" >work/sub/deeper/d.txt
head -c 3000000 /dev/urandom >work/sub/blob.bin
printf '#!/bin/sh\necho "ran $1"\n' >work/run.sh
chmod 755 work/run.sh
ln -s sub/deeper/d.txt work/link
g add -A && g commit -qm one && g tag -a v1 -m "version 1"
V1=$(g rev-parse v1^{commit})
echo "second" >work/a.txt
echo "only on main" >work/main.txt
g add -A && g commit -qm two
# dev also holds what `git clone` without git-lfs leaves for a big file: a Git LFS pointer
g checkout -qb dev && echo "dev" >work/dev.txt &&
	printf 'version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize 12345\n' \
		"$(head -c 12345 /dev/urandom | sha256sum | cut -d' ' -f1)" >work/model.safetensors &&
	g add -A && g commit -qm dev && g checkout -q main
mkdir -p "$SRV/repos" mnt
git clone -q --bare work "$SRV/repos/r.git"
PORT=$(free_port) || { not_ok "a free port"; t_finish; exit 1; }
HPORT=$((PORT + 1))
"$GIT_SH" start "$SRV" "$PORT" >/dev/null || { not_ok "git servers started"; t_finish; exit 1; }
ok "git daemon on 127.0.0.1:$PORT, smart HTTP on $HPORT"
cp "$SRV/token" token && chmod 600 token
echo wrong-token >bad.token && chmod 600 bad.token
# git's credential-store format: another host's line first, then this server's
printf 'https://someone:nope@git.example.org\nhttp://mlfs:%s@127.0.0.1:%s\n' "$(cat token)" "$HPORT" >creds
chmod 600 creds

cat >mlfs.conf <<CONF
[mlfs]
state_dir = state
cache_dir = cache
timeout = 5

[node]
cpus = 8

[datastore tag]
type = git
url = git://127.0.0.1:$PORT/r.git
ref = v1

[datastore head]
type = git
url = http://127.0.0.1:$HPORT/git/r.git

[datastore priv]
type = git
url = http://127.0.0.1:$HPORT/private/r.git
ref = dev
username = mlfs
password_file = token

[datastore credfile]
type = git
url = http://127.0.0.1:$HPORT/private/r.git
ref = dev
credentials_file = creds

[datastore badtoken]
type = git
url = http://127.0.0.1:$HPORT/private/r.git
username = mlfs
password_file = bad.token

# two datastores of one repository and branch: first used at once (one cache folder)
[datastore twin1]
type = git
url = git://127.0.0.1:$PORT/r.git
ref = main

[datastore twin2]
type = git
url = git://127.0.0.1:$PORT/r.git
ref = main

[model dev]
source = git://127.0.0.1:$PORT/r.git#dev

[model pinned]
source = git+http://127.0.0.1:$HPORT/git/r.git#$V1
CONF

check "mlfs check accepts the config" "$MLFS" check mlfs.conf
cat >bad.conf <<CONF
[datastore x]
type = git
url = git://127.0.0.1:$PORT/r.git
ref = a..b
CONF
fails "a ref git does not allow is refused by mlfs check, named" \
	"bad.conf:4: [datastore x] ref: 'a..b' is not a branch, tag or commit name git allows" \
	"$MLFS" check bad.conf

# tree_of DIR: "path mode-bit sha" of everything under DIR, sorted (links by their target).
tree_of() {
	(cd "$1" && find . -mindepth 1 | sort | while read -r p; do
		if [ -L "$p" ]; then echo "$p link $(readlink "$p")"
		elif [ -d "$p" ]; then echo "$p dir"
		else echo "$p $(test -x "$p" && echo x || echo -) $(sha256sum <"$p" | cut -c1-16)"; fi
	done)
}
# git_tree REF: the same of git's own checkout of REF.
git_tree() {
	rm -rf co && git clone -q work co && git -C co checkout -q "$1" && rm -rf co/.git
	tree_of co
}

mount_fg mlfs.conf "$T_DIR/mnt" || { not_ok "mount came up"; t_finish; exit 1; }
M=$T_DIR/mnt
LOG=$T_DIR/mount.mnt.log
tree_of "$M/datastores/twin1" >twin1.tree 2>&1 &
tree_of "$M/datastores/twin2" >twin2.tree 2>&1
wait $!
same "two datastores of one branch, first read at once, each show git's tree" \
	"$(git_tree main; git_tree main)" "$(cat twin1.tree twin2.tree)"
same "an annotated tag shows git's tree of it" "$(git_tree v1)" "$(tree_of "$M/datastores/tag")"
same "the server's HEAD (over HTTP) shows main's tree" "$(git_tree main)" \
	"$(tree_of "$M/datastores/head")"
same "a branch with a token over HTTP shows dev's tree" "$(git_tree dev)" \
	"$(tree_of "$M/datastores/priv")"
same "a model at a branch (git://URL#dev)" "$(git_tree dev)" "$(tree_of "$M/models/dev")"
same "credentials from a git credential-store file (the server's line)" "$(git_tree dev)" \
	"$(tree_of "$M/datastores/credfile")"
same "a model pinned at a commit id (git+http://URL#COMMIT)" "$(git_tree v1)" \
	"$(tree_of "$M/models/pinned")"
same "cat reads a file of the commit" "first" "$(cat "$M/datastores/tag/a.txt")"
same "an executable runs from the mount" "ran 7" "$("$M/datastores/tag/run.sh" 7 2>&1)"
same "a symlink reads as git stored it" "sub/deeper/d.txt" "$(readlink "$M/datastores/tag/link")"
fails "the tree is read-only (EROFS)" "Read-only file system" touch "$M/datastores/tag/new"
fails "... also to write a file" "Read-only file system" sh -c "echo x >>'$M/datastores/tag/a.txt'"
fails "a wrong token is EACCES" "Permission denied" ls "$M/datastores/badtoken"
check "... the log names the datastore and the server's answer" \
	grep -q "datastore badtoken: .*private/r.git" "$LOG"
echo "# $(grep -m1 'datastore badtoken' "$LOG")"
check "... and never a token" bash -c "! grep -q '$(cat token)\|wrong-token' '$LOG'"
check "a Git LFS pointer is shown as git stored it, and the log says it is no data" \
	grep -q "commit $(g rev-parse dev): Git LFS pointers in place of 1 file(s), the first model.safetensors:" "$LOG"
check "the log names each commit resolved" \
	grep -q "datastore tag: git git://127.0.0.1:$PORT/r.git v1 at commit $V1" "$LOG"
unmount_fg "$M"

# --- a new commit on main: the next mount shows it, fetching only what is new
echo "third" >work/a.txt && g commit -qam three
git -C work push -q "$SRV/repos/r.git" main
mount_fg mlfs.conf "$T_DIR/mnt" || { not_ok "mount came up again"; t_finish; exit 1; }
same "the next mount shows main's new commit" "third" "$(cat "$M/datastores/head/a.txt")"
# 3 URLs; git:// at v1, main and dev, /git/ at main, v1 and main's new commit, /private/ at dev
same "... the cache holds one repository per URL and a folder per commit" \
	"3 7" "$(ls -d cache/git/*/repo.git | wc -l) $(ls -d cache/git/*/trees/* | wc -l)"
unmount_fg "$M"

# --- a commit written out already: read with the servers stopped, no fetch at all
"$GIT_SH" stop "$SRV"
cat >pinned.conf <<CONF
[mlfs]
state_dir = state
cache_dir = cache
timeout = 2
retries = 0

[model pinned]
source = git+http://127.0.0.1:$HPORT/git/r.git#$V1
CONF
mount_fg pinned.conf "$T_DIR/mnt" || { not_ok "mount of the pinned model came up"; t_finish; exit 1; }
same "a pinned commit in the cache reads with every server stopped" "$(git_tree v1)" \
	"$(tree_of "$M/models/pinned")"
unmount_fg "$M"
"$GIT_SH" start "$SRV" "$PORT" >/dev/null || not_ok "git servers started again"

# --- a proxiML job's git model; a ref that does not exist is refused at staging
cat >job.json <<JSON
{"name": "gitjob", "workers": [{"command": "true"}], "resources": {"gpu_count": 0},
 "model": {"type": "git", "path": "http://127.0.0.1:$HPORT/git/r.git#dev"}}
JSON
mkdir -p view
"$MLFS" job -f mlfs.conf job.json "$T_DIR/view" --worker 1 --sources sources.txt 2>view.log &
VIEW_PID=$!
for _ in $(seq 1 200); do is_mounted "$T_DIR/view" && break; sleep 0.05; done
same "a job's git model shows at models/ in its view" "$(git_tree dev)" \
	"$(tree_of "$T_DIR/view/models")"
same "... and --sources names the commit it resolved" "model:model=$(g rev-parse dev)" \
	"$(cat sources.txt 2>&1)"
"$MLFS" umount "$T_DIR/view" 2>/dev/null
wait "$VIEW_PID"
VIEW_PID=
sed 's/r.git#dev/r.git#nope/' job.json >nope.json
st=0
timeout 60 "$MLFS" job -f mlfs.conf nope.json "$T_DIR/view" --worker 1 2>nope.log || st=$?
check "a ref the server does not have fails the view" test "$st" -ne 0
check "... saying which ref and where" grep -q "r.git has no branch or tag 'nope'" nope.log
check "... and mounts nothing" bash -c "! grep -q ' $T_DIR/view ' /proc/self/mounts"

# --- the same job through jobs/: status.json records the commit
mount_fg mlfs.conf "$T_DIR/mnt" || { not_ok "mount came up for jobs"; t_finish; exit 1; }
check "cp of the job into jobs/" cp job.json "$M/jobs/"
JOB_WAIT_TENTHS=600 job_state_in "$M/jobs" gitjob SUCCEEDED FAILED
same "the job with a git model succeeds" SUCCEEDED "$(cat "$M/jobs/gitjob/state")"
[ "$(cat "$M/jobs/gitjob/state")" = SUCCEEDED ] || sed 's/^/#   /' "$M/jobs/gitjob/reason"
same "... and status.json records the commit its ref resolved to" "$(g rev-parse dev)" \
	"$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["workers"][0]["sources"]["model:model"])' "$M/jobs/gitjob/status.json" 2>&1)"

# --- Kibernetika's held-out shape: a task whose git source is its workDir ($SRC_DIR)
cat >kbgit.yaml <<YAML
name: kbgit
sources:
- name: src
  source: git://127.0.0.1:$PORT/r.git#dev
resources:
- name: worker
  workDir: \$SRC_DIR
  command: echo "in \$(pwd)"; cat dev.txt; ./run.sh ok
  default_volume_mapping: true
  replicas: 1
  restartPolicy: Never
YAML
check "cp of a Kibernetika task with a git source" cp kbgit.yaml "$M/jobs/"
JOB_WAIT_TENTHS=600 job_state_in "$M/jobs" kbgit SUCCEEDED FAILED
same "... it succeeds" SUCCEEDED "$(cat "$M/jobs/kbgit/state")"
same "... in the repository's commit at \$SRC_DIR, its files and executables there" \
	"[1] in /opt/ml/sources/src [1] dev [1] ran ok" \
	"$(grep -v 'mlfs: ' "$M/jobs/kbgit/log" | xargs)"
check "... its view's log names the commit" \
	grep -q "datastore source:src: git git://127.0.0.1:$PORT/r.git dev at commit $(g rev-parse dev)" \
	"$M/jobs/kbgit/log"
unmount_fg "$M"
mount_fg mlfs.conf "$T_DIR/mnt" || { not_ok "mount came up again for jobs"; t_finish; exit 1; }
same "after a restart, status.json still records the commit (kept, reloaded)" "$(g rev-parse dev)" \
	"$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["workers"][0]["sources"]["model:model"])' "$M/jobs/gitjob/status.json" 2>&1)"
unmount_fg "$M"
t_finish
