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
# Git LFS (objects pushed by git-lfs itself to scripts/lfs-server.py behind
# nginx): files in place of their pointers, as git-lfs's own checkout has
# them, through .lfsconfig's endpoint and the one derived from the URL
# (behind basic auth), credentials never sent to another origin, objects
# kept once per repository (the next commit fetches none), lfs = false
# showing the pointers, an object the server lacks (ENOENT) or sends wrong
# (EIO), or answers without a download action or without the object (EIO), named;
# bad lfs keys refused by mlfs check. git_cache_size: trees two
# mounts read kept over it, the least recently read removed (and named) once no
# mount reads them, and written out again from the kept repository.
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

# --- a repository: two commits on main, a tag, branches with files kept in Git LFS
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.org GIT_COMMITTER_NAME=t \
	GIT_COMMITTER_EMAIL=t@example.org
# git-lfs's filters for this test's git commands only (no hooks: objects are pushed by hand)
export GIT_CONFIG_GLOBAL=$T_DIR/gitconfig
git lfs install --skip-repo >/dev/null
PORT=$(free_port) || { not_ok "a free port"; t_finish; exit 1; }
HPORT=$((PORT + 1))
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
# dev keeps model.safetensors in Git LFS; its .lfsconfig names the LFS server
# (git:// sources need it: git-lfs would look for one over https://)
LFS_URL=http://127.0.0.1:$HPORT/git/r.git/info/lfs
g checkout -qb dev && echo "dev" >work/dev.txt && g lfs track "*.safetensors" "*.pt" >/dev/null &&
	head -c 1500000 /dev/urandom >work/model.safetensors && cp work/model.safetensors model.orig &&
	git config -f work/.lfsconfig lfs.url "$LFS_URL" && g add -A && g commit -qm dev
# lfs2 has none (the endpoint is the one git-lfs derives from the URL), one more object
# (in a folder), an executable one, and the same object at two paths
g checkout -qb lfs2 && g rm -q .lfsconfig && head -c 700000 /dev/urandom >work/sub/extra.pt &&
	cp work/sub/extra.pt work/copy.pt && printf '#!/bin/sh\necho lfs ran\n' >work/tool.pt &&
	chmod 755 work/tool.pt && g add -A && g commit -qm lfs2
# lnk: .lfsconfig a link to a file of this machine naming another server: not read
printf '[lfs]\n\turl = http://127.0.0.1:1/elsewhere/info/lfs\n' >"$T_DIR/evil.lfsconfig"
# (and odd.txt begins as a pointer but names no SHA-256: shown as it is, said)
printf 'version https://git-lfs.github.com/spec/v1\noid sha256:nothex\nsize 1\n' >odd.txt
g checkout -qb lnk && ln -s "$T_DIR/evil.lfsconfig" work/.lfsconfig && cp odd.txt work/ &&
	g add -A &&
	g commit -qm lnk && g checkout -q dev
# lost: an object nobody pushed; bad: one the server will hold other bytes for; noact and
# omit: objects the server's batch answer gives without a download action, or leaves out
for q in noact omit; do
	g checkout -q dev && g checkout -qb $q && head -c 3000 /dev/urandom >work/$q.pt &&
		g add -A && g commit -qm $q
done
g checkout -q dev
g checkout -qb lost && head -c 5000 /dev/urandom >work/lost.pt &&
	g add -A && g commit -qm lost
g checkout -q dev && g checkout -qb bad && head -c 6000 /dev/urandom >work/bad.pt &&
	g add -A && g commit -qm bad && g checkout -q main ||
	{ not_ok "the repository's branches made"; t_finish; exit 1; }
LOST_OID=$(git -C work show lost:lost.pt | sed -n 's/^oid sha256://p')
BAD_OID=$(git -C work show bad:bad.pt | sed -n 's/^oid sha256://p')
NOACT_OID=$(git -C work show noact:noact.pt | sed -n 's/^oid sha256://p')
OMIT_OID=$(git -C work show omit:omit.pt | sed -n 's/^oid sha256://p')
mkdir -p "$SRV/repos" mnt
git clone -q --bare work "$SRV/repos/r.git"
"$GIT_SH" start "$SRV" "$PORT" >/dev/null || { not_ok "git servers started"; t_finish; exit 1; }
ok "git daemon on 127.0.0.1:$PORT, smart HTTP on $HPORT, Git LFS behind it"
# git-lfs itself pushes the objects (but lost's) to the LFS server
g remote add origin "$SRV/repos/r.git" && g config lfs.locksverify false
check "git lfs push of dev, lfs2, bad, noact and omit's objects" \
	git -C work -c lfs.url="$LFS_URL" lfs push origin dev lfs2 bad noact omit
touch "$SRV/lfs/$NOACT_OID.noaction" "$SRV/lfs/$OMIT_OID.omit"
# ... and the server holds other bytes, of the same size, for bad's object
check "... (bad.pt's object replaced)" bash -c "head -c 6000 /dev/zero >'$SRV/lfs/$BAD_OID'"
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

# Git LFS: lfs2 has no .lfsconfig, so its endpoint is URL/info/lfs, behind the same basic auth
[datastore lfspriv]
type = git
url = http://127.0.0.1:$HPORT/private/r.git
ref = lfs2
username = mlfs
password_file = token

[datastore lfslink]
type = git
url = http://127.0.0.1:$HPORT/private/r.git
ref = lnk
username = mlfs
password_file = token

# ... and with the token in the URL, as GitLab's CI writes it
[datastore lfsurl]
type = git
url = http://mlfs:$(cat token)@127.0.0.1:$HPORT/private/r.git
ref = lfs2

[datastore lfsoff]
type = git
url = git://127.0.0.1:$PORT/r.git
ref = dev
lfs = false

# lfs2 over git:// has no LFS server: git-lfs (and mlfs) would ask https://HOST:PORT/r.git/info/lfs
[datastore nolfs]
type = git
url = git://127.0.0.1:$PORT/r.git
ref = lfs2

[model dev]
source = git://127.0.0.1:$PORT/r.git#dev

[model pinned]
source = git+http://127.0.0.1:$HPORT/git/r.git#$V1
CONF
# a datastore of each branch whose Git LFS objects the server lacks, sends wrong, or answers
# wrong for, named as its branch
for b in lost bad noact omit; do
	printf '\n[datastore %s]\ntype = git\nurl = git://127.0.0.1:%s/r.git\nref = %s\n' \
		"$b" "$PORT" "$b"
done >>mlfs.conf

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
printf '[datastore x]\ntype = git\nurl = git://127.0.0.1:%s/r.git\nlfs = maybe\nlfs_url = s3://b/x\n' \
	"$PORT" >badlfs.conf
fails "lfs must be true or false, named" "badlfs.conf:4: [datastore x] lfs: 'maybe' is not true or false" \
	"$MLFS" check badlfs.conf
fails "lfs_url must be an HTTP(S) URL, named" "badlfs.conf:5: [datastore x] lfs_url: 's3://b/x' is not an http:// or https:// URL" \
	"$MLFS" check badlfs.conf

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
# Git LFS: the trees above held git-lfs's checkout of dev (its object in place); now by hand
same "a file kept in Git LFS reads as its object (git:// source, .lfsconfig's server)" \
	"$(sha256sum <model.orig)" "$(sha256sum <"$M/models/dev/model.safetensors")"
same "... over HTTP with a token, through the endpoint derived from the URL" "$(git_tree lfs2)" \
	"$(tree_of "$M/datastores/lfspriv")"
same "... an executable object runs" "lfs ran" "$("$M/datastores/lfspriv/tool.pt" 2>&1)"
check "... the log says what it fetches (each object once, two at once), from where" \
	grep -q "datastore lfspriv: commit $(g rev-parse lfs2): fetching 2 Git LFS object(s), 700023 bytes, from http://127.0.0.1:$HPORT/private/r.git/info/lfs" "$LOG"
check "... and how many were put in place and fetched" \
	grep -q "datastore lfspriv: commit $(g rev-parse lfs2): 4 Git LFS object(s) in place, 2 fetched (700023 bytes) from http://127.0.0.1:$HPORT/private/r.git/info/lfs" "$LOG"
check "... no credentials went to the LFS server's own address (its hrefs for /git/)" \
	bash -c "grep -q '^GET /git/' '$SRV/lfs.log' && ! grep -q ' 400\$' '$SRV/lfs.log'"
same "... and with the token in the URL (the objects' URLs hold none: it goes as basic auth)" \
	"$(git_tree lfs2)" "$(tree_of "$M/datastores/lfsurl")"
check "... which the log never shows" bash -c "grep -q 'datastore lfsurl: git http://127.0.0.1:$HPORT/private/r.git lfs2 at commit' '$LOG' && ! grep -q '$(cat token)' '$LOG'"
same "a .lfsconfig that is a link (to a file of this machine) is not read" \
	"$(sha256sum <model.orig)" "$(sha256sum <"$M/datastores/lfslink/model.safetensors")"
same "... a file that begins as a pointer but is none of the spec's is shown as git has it" \
	"$(sha256sum <odd.txt)" "$(sha256sum <"$M/datastores/lfslink/odd.txt")"
check "... and said once" grep -q "datastore lfslink: commit $(g rev-parse lnk): 1 file(s) begin as Git LFS pointers but their oid or size line is not the spec's" "$LOG"
same "with lfs = false the pointer shows, as after git clone without git-lfs" \
	"version https://git-lfs.github.com/spec/v1" "$(head -1 "$M/datastores/lfsoff/model.safetensors")"
check "... and the log says so" grep -q "datastore lfsoff: commit $(g rev-parse dev): Git LFS pointers in place of 1 file(s), the first model.safetensors (lfs = false)" "$LOG"
fails "a repository without an LFS server fails (EIO)" "Input/output error" ls "$M/datastores/nolfs"
check "... the log says which endpoint failed and what to do" bash -c "grep -q 'datastore nolfs: commit $(g rev-parse lfs2): Git LFS batch request from https://127.0.0.1:$PORT/r.git/info/lfs/objects/batch: ' '$LOG' && grep -q 'datastore nolfs: ... the repository.s files kept in Git LFS (.*, ...) need that server: name another with lfs_url, or set lfs = false' '$LOG'"
fails "an object the LFS server lacks fails the datastore (ENOENT)" "No such file or directory" \
	ls "$M/datastores/lost"
check "... the log names the file, the object and the server's words" \
	grep -q "datastore lost: commit $(g rev-parse lost): Git LFS object of lost.pt (sha256 ${LOST_OID:0:12}..., 5000 bytes): the server says 404 Object does not exist" "$LOG"
echo "# $(grep -m1 'datastore lost: commit .*Git LFS object of' "$LOG")"
fails "an object whose bytes are not its SHA-256 fails the datastore (EIO)" "Input/output error" \
	ls "$M/datastores/bad"
check "... the log says what the server sent" \
	grep -q "datastore bad: commit $(g rev-parse bad): Git LFS object of bad.pt (sha256 ${BAD_OID:0:12}..., 6000 bytes): .* sent bytes whose SHA-256 is not the pointer's" "$LOG"
echo "# $(grep -m1 'datastore bad: commit .*Git LFS object of' "$LOG")"
check "... and keeps nothing of them" bash -c "! ls cache/git/*/lfs/ | grep -q '${BAD_OID:0:12}'"
fails "a batch answer without the object's download action fails the datastore (EIO)" \
	"Input/output error" ls "$M/datastores/noact"
check "... the log says so, naming the file" grep -q "datastore noact: commit $(g rev-parse noact): Git LFS object of noact.pt: the server's answer has no download action" "$LOG"
fails "a batch answer that leaves an object out fails the datastore (EIO)" \
	"Input/output error" ls "$M/datastores/omit"
check "... the log says so, naming the file" grep -q "datastore omit: commit $(g rev-parse omit): Git LFS object of omit.pt: not in the server's batch answer" "$LOG"
check "the log names each commit resolved" \
	grep -q "datastore tag: git git://127.0.0.1:$PORT/r.git v1 at commit $V1" "$LOG"
unmount_fg "$M"

# --- a new commit on main and one on lfs2: the next mount shows them, fetching only what is new
echo "third" >work/a.txt && g commit -qam three
g checkout -q lfs2 && echo "readme" >work/README && g add README && g commit -qm readme &&
	g checkout -q main
git -C work push -q "$SRV/repos/r.git" main lfs2
gets=$(grep -c '^GET ' "$SRV/lfs.log")
mount_fg mlfs.conf "$T_DIR/mnt" || { not_ok "mount came up again"; t_finish; exit 1; }
same "the next mount shows main's new commit" "third" "$(cat "$M/datastores/head/a.txt")"
same "... and lfs2's, its LFS objects in place" "readme $(sha256sum <model.orig)" \
	"$(cat "$M/datastores/lfspriv/README") $(sha256sum <"$M/datastores/lfspriv/model.safetensors")"
check "... from the repository's store: no object fetched again" \
	grep -q "datastore lfspriv: commit $(g rev-parse lfs2): 4 Git LFS object(s) in place, 0 fetched" "$LOG"
same "... the LFS server sent nothing" "$gets" "$(grep -c '^GET ' "$SRV/lfs.log")"
# 4 URLs; git:// at v1, main and dev, and dev with pointers (lfs = false), /git/ at main, v1
# and main's new commit, /private/ at dev, lfs2, lfs2's new commit and lnk, /private/ with
# the token in the URL at lfs2
same "... the cache holds one repository per URL and a folder per commit" \
	"4 12" "$(ls -d cache/git/*/repo.git | wc -l) $(ls -d cache/git/*/trees/*/ | wc -l)"
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

# --- git_cache_size: what a mount reads stays, the least recently read goes when it is over
# evict_conf NAME REF: NAME.conf, a mount of git://.../r.git at REF, in a cache of 1 KiB
evict_conf() {
	printf '[mlfs]\nstate_dir = state-%s\ncache_dir = cache2\ngit_cache_size = 1K\n\n' "$1" >"$1.conf"
	printf '[datastore r]\ntype = git\nurl = git://127.0.0.1:%s/r.git\nref = %s\n' "$PORT" "$2" >>"$1.conf"
}
evict_conf ev1 "$V1" && evict_conf ev2 main && evict_conf ev3 dev
mkdir -p mnt2
mount_fg ev1.conf "$T_DIR/mnt" || { not_ok "mount at v1 came up"; t_finish; exit 1; }
same "over git_cache_size, a tree a mount reads is kept" "first" "$(cat "$M/datastores/r/a.txt")"
P1=$MOUNT_PID
mount_fg ev2.conf "$T_DIR/mnt2" || { not_ok "mount at main came up"; t_finish; exit 1; }
same "... and another mount's next to it" "third" "$(cat "$T_DIR/mnt2/datastores/r/a.txt")"
same "... both in the cache" "2" "$(ls -d cache2/git/*/trees/*/ | wc -l)"
check "... and the log says why it is over" grep -q "git cache: .*cache2/git takes [0-9]* bytes, more than git_cache_size (1024): the rest is read by datastores" "$T_DIR/mount.mnt2.log"
unmount_fg "$T_DIR/mnt2"
MOUNT_PID=$P1
unmount_fg "$M"
mount_fg ev3.conf "$T_DIR/mnt" || { not_ok "mount at dev came up"; t_finish; exit 1; }
same "the next commit written out reads" "$(sha256sum <model.orig)" \
	"$(sha256sum <"$M/datastores/r/model.safetensors")"
same "... and the trees no mount reads went" "$(g rev-parse dev)+lfs/" "$(cd cache2/git/*/trees && ls -d */)"
check "... the oldest first, each named with its repository" bash -c "grep -n 'git cache: removed commit $V1 of git://127.0.0.1:$PORT/r.git, last read ' '$LOG' | cut -d: -f1 >a && grep -n 'git cache: removed commit $(g rev-parse main) of git://' '$LOG' | cut -d: -f1 >b && [ \$(cat a) -lt \$(cat b) ]"
unmount_fg "$M"
"$GIT_SH" stop "$SRV"
mount_fg ev1.conf "$T_DIR/mnt" || { not_ok "mount at v1 came up again"; t_finish; exit 1; }
same "... a removed tree is written out again from the repository, kept, with no server" \
	"$(git_tree v1)" "$(tree_of "$M/datastores/r")"
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
sed 's/r.git#dev/r.git#lost/' job.json >lostjob.json
st=0
timeout 60 "$MLFS" job -f mlfs.conf lostjob.json "$T_DIR/view" --worker 1 2>lostjob.log || st=$?
check "a job whose model lacks a Git LFS object fails at staging" test "$st" -ne 0
check "... naming the file and the server's words" \
	grep -q "Git LFS object of lost.pt (sha256 ${LOST_OID:0:12}..., 5000 bytes): the server says 404" lostjob.log

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
