#!/bin/bash
# server-s3rver.sh - starts and stops an S3 test server for the tests and benchmarks.
#
#   server-s3rver.sh start DIR PORT [5|3]   prints the server's PID
#   server-s3rver.sh stop DIR
#
# Version 5 (default) is @20minutes/s3rver 5.0.0 from build/tools/s3rver5,
# which checks SigV4 signatures; version 3 is s3rver 3.7.1 from
# build/tools/s3rver3 (install-deps.sh --bench), which does not, but which
# the S3 peers (s3fs, rclone) can talk to.  Both listen on 127.0.0.1 only,
# keep their data in DIR/data and serve the bucket testbucket plus any
# named in $S3RVER_BUCKETS (space-separated).  Credentials: S3RVER/S3RVER.
# The server runs in its own session; its log is DIR/s3rver.log, its PID
# is in DIR/s3rver.pid.
set -eu
. "$(dirname "$0")/server_lib.sh"
top=$(cd "$(dirname "$0")/.." && pwd)

s3rver_start() {
	local dir=$1 port=$2 version=${3:-5} cmd
	mkdir -p "$dir/data"
	dir=$(cd "$dir" && pwd)
	local args=(-d "$dir/data" -a 127.0.0.1 -p "$port" --configure-bucket testbucket)
	for b in ${S3RVER_BUCKETS:-}; do
		args+=(--configure-bucket "$b")
	done
	case $version in
	5)
		local mod=$top/build/tools/s3rver5/node_modules/@20minutes/s3rver
		[ -d "$mod" ] || { echo "no $mod: run scripts/install-deps.sh" >&2; exit 1; }
		# The package ships no bin/: its CLI module, run by hand.  It
		# makes continuation tokens with DES, which OpenSSL 3 keeps in its
		# legacy provider: without it every truncated listing is a 500.
		cmd=(node --openssl-legacy-provider -e "require('$mod/lib/cli.js').parseAsync(['node', 's3rver', ...process.argv.slice(1)]).catch((e) => { console.error(e); process.exit(1) })" --)
		;;
	3)
		local bin=$top/build/tools/s3rver3/node_modules/.bin/s3rver
		[ -x "$bin" ] || { echo "no $bin: run scripts/install-deps.sh --bench" >&2; exit 1; }
		cmd=(env NODE_OPTIONS=--openssl-legacy-provider "$bin")	# DES tokens, as above
		;;
	*)
		echo "version must be 5 or 3" >&2
		exit 2
		;;
	esac
	setsid "${cmd[@]}" "${args[@]}" </dev/null >"$dir/s3rver.log" 2>&1 &
	local pid=$!
	echo "$pid" >"$dir/s3rver.pid"
	server_wait_port s3rver "$pid" "$port" "$dir/s3rver.log" "$dir/s3rver.pid"
}

s3rver_stop() { server_stop_pidfile "$1/s3rver.pid"; }

case ${1:-} in
start) [ $# -ge 3 ] || { echo "usage: $0 start DIR PORT [5|3]" >&2; exit 2; }
	s3rver_start "$2" "$3" "${4:-5}" ;;
stop) [ $# -ge 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
	s3rver_stop "$2" ;;
*) echo "usage: $0 start DIR PORT [5|3] | stop DIR" >&2; exit 2 ;;
esac
