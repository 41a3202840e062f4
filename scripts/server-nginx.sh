#!/bin/bash
# server-nginx.sh - an nginx on 127.0.0.1 for the http backend's tests.
#
#   server-nginx.sh start DIR PORT   serves DIR/www at / (HTML autoindex) and the
#                                    same folder at /json/ (JSON autoindex); its
#                                    conf, logs and pid file live in DIR; prints
#                                    the PID once the port answers
#   server-nginx.sh stop DIR         SIGQUIT to that PID, then waits until it is gone
#
# nginx runs in its own session (setsid) with `daemon off`, so the PID is the
# master's and stopping it never touches the caller.  Its worker runs as
# www-data or nobody, so DIR and every folder above it are made traversable
# (o+x) and DIR/www readable.  See ../shared/notes/servers.md §4.
set -u

die() {
	echo "server-nginx.sh: $*" >&2
	exit 1
}

# Lets the worker user reach DIR: o+x on every folder from / down to DIR.
open_path() {
	local d
	d=$(readlink -f "$1")
	while [ "$d" != / ]; do
		chmod o+x "$d" 2>/dev/null
		d=$(dirname "$d")
	done
	chmod -R o+rX "$1/www"
}

write_conf() {
	local dir=$1 port=$2
	cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 256; }
http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log $dir/access.log;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    server {
        listen 127.0.0.1:$port;
        root $dir/www;
        location / { autoindex on; }
        location /json/ { alias $dir/www/; autoindex on; autoindex_format json; }
    }
}
CONF
}

port_answers() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
	local dir port pid
	[ $# -eq 2 ] || die "usage: server-nginx.sh start DIR PORT"
	dir=$(readlink -f "$1")
	port=$2
	mkdir -p "$dir/www" "$dir/tmp" || die "cannot make $dir"
	open_path "$dir"
	write_conf "$dir" "$port"
	port_answers "$port" && die "port $port is already in use"
	setsid nginx -c "$dir/nginx.conf" -e "$dir/error.log" </dev/null >>"$dir/nginx.out" 2>&1 &
	pid=$!
	for _ in $(seq 1 100); do
		if port_answers "$port"; then
			echo "$pid"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -QUIT "$pid" 2>/dev/null
	cat "$dir/error.log" "$dir/nginx.out" >&2 2>/dev/null
	die "nginx did not come up on 127.0.0.1:$port"
}

stop() {
	local dir pid
	[ $# -eq 1 ] || die "usage: server-nginx.sh stop DIR"
	dir=$(readlink -f "$1")
	pid=$(cat "$dir/nginx.pid" 2>/dev/null) || return 0
	kill -QUIT "$pid" 2>/dev/null || { rm -f "$dir/nginx.pid"; return 0; }
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || break
		# a stopped (SIGSTOP) server cannot quit: let it go on
		kill -CONT "$pid" 2>/dev/null
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null && ! grep -q '^State:.*zombie' "/proc/$pid/status" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null
	fi
	rm -f "$dir/nginx.pid"
}

case "${1:-}" in
start) shift; start "$@" ;;
stop) shift; stop "$@" ;;
*) die "usage: server-nginx.sh start DIR PORT | stop DIR" ;;
esac
