#!/bin/bash
# server-azurite.sh - Azurite, Microsoft's Azure Storage emulator (its blob
# service only), on 127.0.0.1 for the azure backend's tests and benchmark.
#
#   server-azurite.sh start DIR PORT   keeps its blobs in DIR/data; prints the PID once
#                                      the port answers
#   server-azurite.sh stop DIR
#
# Azurite 3.33.0 from build/tools/azurite (install-deps.sh; later versions
# want Node 22).  The account is Azurite's well-known devstoreaccount1,
# with the key Microsoft publishes for it (Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzF
# T50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==); URLs are path-style,
# http://127.0.0.1:PORT/devstoreaccount1/CONTAINER/BLOB.  The server runs in
# its own session; its log is DIR/azurite.log, its PID in DIR/azurite.pid.
# See ../shared/notes/servers.md §9.
set -eu
. "$(dirname "$0")/server_lib.sh"
top=$(cd "$(dirname "$0")/.." && pwd)

azurite_start() {
	local dir=$1 port=$2 bin=$top/build/tools/azurite/node_modules/.bin/azurite-blob pid
	[ -x "$bin" ] || { echo "no $bin: run scripts/install-deps.sh" >&2; exit 1; }
	mkdir -p "$dir/data"
	dir=$(cd "$dir" && pwd)
	setsid "$bin" --blobHost 127.0.0.1 --blobPort "$port" -l "$dir/data" --skipApiVersionCheck \
		</dev/null >"$dir/azurite.log" 2>&1 &
	pid=$!
	echo "$pid" >"$dir/azurite.pid"
	server_wait_port azurite "$pid" "$port" "$dir/azurite.log" "$dir/azurite.pid"
}

azurite_stop() { server_stop_pidfile "$1/azurite.pid"; }

case ${1:-} in
start) [ $# -eq 3 ] || { echo "usage: $0 start DIR PORT" >&2; exit 2; }
	azurite_start "$2" "$3" ;;
stop) [ $# -eq 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
	azurite_stop "$2" ;;
*) echo "usage: $0 start DIR PORT | stop DIR" >&2; exit 2 ;;
esac
