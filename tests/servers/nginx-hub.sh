#!/bin/sh
# nginx-hub.sh - start/stop nginx as the current user serving a hubtree.py tree.
#   nginx-hub.sh start ROOT PREFIX PORT CDNPORT   (waits until both ports answer)
#   nginx-hub.sh stop PREFIX
# PREFIX holds nginx.conf, nginx.pid, access.log ("METHOD URI STATUS BYTES RANGE auth=")
# and error.log. Needs only nginx-light.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
case "${1:-}" in
start)
	root=$(cd "$2" && pwd); prefix=$3; port=$4; cdn=$5
	mkdir -p "$prefix/tmp"
	prefix=$(cd "$prefix" && pwd)
	sed -e "s|@ROOT@|$root|g" -e "s|@PREFIX@|$prefix|g" -e "s|@PORT@|$port|g" \
	    -e "s|@CDNPORT@|$cdn|g" "$here/nginx.conf.in" >"$prefix/nginx.conf"
	# As root, workers would drop to nobody and could not read a 0700 temp tree.
	if [ "$(id -u)" -eq 0 ]; then
		nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/error.log" -g 'user root;'
	else
		nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/error.log"
	fi
	for p in "$port" "$cdn"; do
		i=0
		until curl -s -o /dev/null "http://127.0.0.1:$p/"; do
			i=$((i + 1)); [ $i -lt 100 ] || { echo "nginx did not start on $p" >&2; cat "$prefix/error.log" >&2; exit 1; }
			sleep 0.05
		done
	done
	;;
stop)
	prefix=$2
	[ -f "$prefix/nginx.pid" ] && kill "$(cat "$prefix/nginx.pid")" 2>/dev/null || true
	;;
*) echo "usage: $0 start ROOT PREFIX PORT CDNPORT | stop PREFIX" >&2; exit 2 ;;
esac
