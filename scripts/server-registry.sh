#!/bin/bash
# server-registry.sh - an OCI image registry on 127.0.0.1 for the container
# tests and benchmarks: Debian's docker-registry (distribution 2.8), plain HTTP.
#
#   server-registry.sh start DIR PORT [HTPASSWD]   prints the registry's PID once
#                                                  the port answers
#   server-registry.sh stop DIR
#
# Its config is DIR/config.yml, its log DIR/registry.log, its PID in
# DIR/registry.pid, the images in DIR/storage (kept across restarts: a
# registry started again on the same DIR serves what was pushed before).
# With HTPASSWD (a file of `htpasswd -Bbn USER PASSWORD` lines) every request
# needs those credentials (HTTP basic, realm mlfs-test); without it anyone
# may pull and push.  The registry runs in the foreground in its own session
# (setsid), so stopping it never touches the caller.
#
# The log: the registry's own lines at info level plus its access log, one
# line a request in Apache's combined format.  A blob fetched is a GET of
# /v2/NAME/blobs/sha256:HEX:
#
#   127.0.0.1 - - [27/Nov/2026:02:51:00 +0000] "GET /v2/mlfs-test/busybox/blobs/sha256:1d8ffa43f5292d77c3f33931804610e878da0558e8eb0b3f00accea6eaa34b51 HTTP/1.1" 200 1088079 "" "containers/5.23.1 (github.com/containers/image)"
#
# so `grep -c '"GET /v2/NAME/blobs/sha256:HEX '` counts the fetches of one
# blob.  A pull GETs /v2/, the manifest (/v2/NAME/manifests/TAG), the
# config blob and each layer blob it lacks; a `podman pull` of an image it
# has already GETs the manifest and the config blob again, not the layers.
# HEAD lines are a push's existence checks.  Each request also gives an
# info line `level=info msg="response completed" … http.request.method=GET
# http.request.uri=/v2/… http.response.status=200 …`: count the access
# lines, not both.  The log is appended to across restarts on one DIR.
# See ../shared/notes/servers.md §8 and docs/testing.md.
set -eu
. "$(dirname "$0")/server_lib.sh"

registry_start() {
	local dir=$1 port=$2 htpasswd=${3:-} auth=
	command -v docker-registry >/dev/null || { echo "no docker-registry: run scripts/install-deps.sh" >&2; exit 1; }
	mkdir -p "$dir/storage"
	dir=$(cd "$dir" && pwd)
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "server-registry.sh: port $port is already in use" >&2
		exit 1
	fi
	if [ -n "$htpasswd" ]; then
		[ -r "$htpasswd" ] || { echo "server-registry.sh: cannot read $htpasswd" >&2; exit 1; }
		htpasswd=$(readlink -f "$htpasswd")
		auth="auth:
  htpasswd:
    realm: mlfs-test
    path: $htpasswd"
	fi
	# A fixed secret: without one the registry warns at every start.
	cat >"$dir/config.yml" <<CONF
version: 0.1
log:
  level: info
  formatter: text
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: $dir/storage
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: 127.0.0.1:$port
  secret: mlfs-test-registry
$auth
CONF
	setsid docker-registry serve "$dir/config.yml" </dev/null >>"$dir/registry.log" 2>&1 &
	local pid=$!
	echo "$pid" >"$dir/registry.pid"
	server_wait_port docker-registry "$pid" "$port" "$dir/registry.log" "$dir/registry.pid"
}

registry_stop() { server_stop_pidfile "$1/registry.pid"; }

case ${1:-} in
start) [ $# -ge 3 ] || { echo "usage: $0 start DIR PORT [HTPASSWD]" >&2; exit 2; }
	registry_start "$2" "$3" "${4:-}" ;;
stop) [ $# -ge 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
	registry_stop "$2" ;;
*) echo "usage: $0 start DIR PORT [HTPASSWD] | stop DIR" >&2; exit 2 ;;
esac
