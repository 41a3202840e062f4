#!/bin/bash
# server-git.sh - git servers on 127.0.0.1 for the git backend's tests and benchmark.
#
#   server-git.sh start DIR PORT   serves the bare repositories in DIR/repos:
#                                  git://127.0.0.1:PORT/NAME.git (git daemon), and
#                                  over smart HTTP on PORT+1 (nginx, fcgiwrap and
#                                  git-http-backend) at http://127.0.0.1:PORT+1/git/NAME.git
#                                  and, behind basic auth (user mlfs, password
#                                  DIR/token), at /private/NAME.git; each
#                                  repository's Git LFS endpoint (URL/info/lfs)
#                                  is lfs-server.py on PORT+2, keeping its
#                                  objects in DIR/lfs; prints the daemon's PID
#                                  once every port answers
#   server-git.sh stop DIR         stops them all
#
# Each runs in its own session, its PID in DIR/*.pid, its log in DIR/*.log.
# nginx's worker runs as www-data: DIR and the folders above it are made
# traversable (o+x) and fcgiwrap's socket is made with umask 0.  See
# ../shared/notes/servers.md §9.
set -eu
. "$(dirname "$0")/server_lib.sh"

BACKEND=/usr/lib/git-core/git-http-backend

git_nginx_conf() {
	local dir=$1 port=$2 loc
	for loc in git private; do
		# each repository's Git LFS endpoint (.../R.git/info/lfs/) goes to
		# lfs-server.py; its hrefs name the host the request named, so those
		# of /private/ come back here (with the same credentials), those of
		# /git/ go to lfs-server.py's own address (another origin)
		cat <<LOC
        location ~ ^/$loc/.*/info/lfs/ {
            $([ $loc = private ] && printf 'auth_basic "git"; auth_basic_user_file %s/htpasswd;' "$dir")
            $([ $loc = private ] && printf 'proxy_set_header Host $http_host;')
            client_max_body_size 0;
            proxy_pass http://127.0.0.1:$((port + 1));
        }
LOC
		cat <<LOC
        location ~ ^/$loc(/.*)\$ {
            $([ $loc = private ] && printf 'auth_basic "git"; auth_basic_user_file %s/htpasswd;' "$dir")
            fastcgi_pass unix:$dir/fcgiwrap.sock;
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME $BACKEND;
            fastcgi_param GIT_PROJECT_ROOT $dir/repos;
            fastcgi_param GIT_HTTP_EXPORT_ALL "";
            fastcgi_param REMOTE_USER \$remote_user;
            fastcgi_param PATH_INFO \$1;
        }
LOC
	done >"$dir/locations.conf"
	cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/nginx-error.log warn;
events { worker_connections 256; }
http {
    access_log $dir/nginx-access.log;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    server {
        listen 127.0.0.1:$port;
        include $dir/locations.conf;
    }
}
CONF
}

git_start() {
	local dir port d pid
	[ $# -eq 2 ] || { echo "usage: server-git.sh start DIR PORT" >&2; exit 2; }
	dir=$(readlink -f "$1")
	port=$2
	mkdir -p "$dir/repos" "$dir/tmp"
	d=$dir
	while [ "$d" != / ]; do chmod o+x "$d"; d=$(dirname "$d"); done
	[ -s "$dir/token" ] || head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/token"
	htpasswd -bc "$dir/htpasswd" mlfs "$(cat "$dir/token")" >/dev/null 2>&1
	chmod 644 "$dir/htpasswd"
	setsid git daemon --verbose --reuseaddr --base-path="$dir/repos" --export-all \
		--listen=127.0.0.1 --port="$port" "$dir/repos" </dev/null >"$dir/daemon.log" 2>&1 &
	echo $! >"$dir/daemon.pid"
	rm -f "$dir/fcgiwrap.sock"
	(umask 0; exec setsid fcgiwrap -s "unix:$dir/fcgiwrap.sock" </dev/null >"$dir/fcgiwrap.log" 2>&1) &
	echo $! >"$dir/fcgiwrap.pid"
	setsid python3 "$(dirname "$0")/lfs-server.py" $((port + 2)) "$dir/lfs" </dev/null \
		>"$dir/lfs.log" 2>&1 &
	echo $! >"$dir/lfs.pid"
	git_nginx_conf "$dir" $((port + 1))
	setsid nginx -c "$dir/nginx.conf" -e "$dir/nginx-error.log" </dev/null >"$dir/nginx.out" 2>&1 &
	echo $! >"$dir/nginx-master.pid"
	pid=$(cat "$dir/daemon.pid")
	server_port_up $((port + 1)) "$(cat "$dir/nginx-master.pid")" ||
		{ tail -5 "$dir/nginx-error.log" "$dir/nginx.out" >&2; git_stop "$dir"; exit 1; }
	server_port_up $((port + 2)) "$(cat "$dir/lfs.pid")" ||
		{ tail -5 "$dir/lfs.log" >&2; git_stop "$dir"; exit 1; }
	server_wait_port "git daemon" "$pid" "$port" "$dir/daemon.log" "$dir/daemon.pid"
}

git_stop() {
	local dir=$1
	server_stop_pidfile "$dir/nginx-master.pid"
	server_stop_pidfile "$dir/fcgiwrap.pid"
	server_stop_pidfile "$dir/daemon.pid"
	server_stop_pidfile "$dir/lfs.pid"
	rm -f "$dir/fcgiwrap.sock"
}

case ${1:-} in
start) shift; git_start "$@" ;;
stop) git_stop "$2" ;;
*) echo "usage: server-git.sh start DIR PORT | stop DIR" >&2; exit 2 ;;
esac
