#!/bin/sh
# serve-hub.sh - serve a folder laid out as a Hub with nginx on free loopback ports.
#   serve-hub.sh start HUBDIR STATE [hubtree.py options...]  prints "PORT CDNPORT"
#   serve-hub.sh stop STATE
# HUBDIR/buckets/<ns>/<name>/...          one folder per bucket
# HUBDIR/models/<ns>/<repo>@<commit>/...  one folder per model repo revision
# Adding a file to a bucket is copying it there; listings are regenerated at
# start. mtimes are fixed (2026-01-01) so a lock of the same content is the
# same bytes. STATE (created) holds the generated site, nginx.conf, logs.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3  # pyenv shims cost seconds under load
ports() { $PY -c 'import socket
ss=[socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1",0))
print(" ".join(str(s.getsockname()[1]) for s in ss))'; }
case "${1:-}" in
start)
	hub=$(cd "$2" && pwd); state=$3; shift 3
	mkdir -p "$state"
	set -- --mtime 2026-01-01T00:00:00.000Z "$@"
	for b in "$hub"/buckets/*/*; do
		[ -d "$b" ] || continue
		set -- "$@" --bucket "$(basename "$(dirname "$b")")/$(basename "$b")=$b"
	done
	for m in "$hub"/models/*/*@*; do
		[ -d "$m" ] || continue
		set -- "$@" --model "$(basename "$(dirname "$m")")/$(basename "$m")=$m"
	done
	rm -rf "$state/site"
	$PY "$here/hubtree.py" "$state/site" "$@"
	set -- $(ports)
	p=$1; c=$2
	sh "$here/nginx-hub.sh" start "$state/site" "$state/nginx" "$p" "$c"
	echo "$p $c"
	;;
stop)
	sh "$here/nginx-hub.sh" stop "$2/nginx"
	;;
*) echo "usage: $0 start HUBDIR STATE [hubtree options] | stop STATE" >&2; exit 2 ;;
esac
