#!/bin/sh
# bench/pull_h2.sh OLD NEW - two fgpack binaries pulling one file over HTTPS
# from nginx speaking HTTP/2, through tests/servers/throttle.py, which caps
# each TCP connection at RATE bytes/s (what a long path does to one flow).
# Alternated N rounds: wall seconds of each run (/usr/bin/time), the number
# of TCP connections each run opened (the relay's log), then the medians and
# their ratio. A build that multiplexes every range over one connection gets
# one connection's rate whatever -j says; one that opens -j connections gets
# up to -j times it. docs/bench.md, pull, has the runs it made.
# Env: SIZE (bytes, default 67108864), RATE (bytes/s per connection, default
# 16777216), N (rounds, default 3), JOBS (pull -j, default 4).
set -eu
. "$(dirname "$0")/ab_args.inc" # $old, $new (or a usage line, or skipped under make bench)
cd "$(dirname "$0")/.."
. tests/lib.sh # WORK, test_ca, nginx_conf, nginx_start, free_port, wait_port; cleans up on exit
mkdir -p "$WORK/www/w"
head -c "${SIZE:-67108864}" /dev/urandom >"$WORK/www/w/big.bin"
test_ca "$WORK"
tls=$(free_port)
relay=$(free_port)
nginx_conf '$connection $request_method $status' <<EOF
    server {
        listen 127.0.0.1:$tls ssl http2;
        ssl_certificate $WORK/srv.pem;
        ssl_certificate_key $WORK/srv.key;
        root $WORK/www;
    }
}
EOF
nginx_start
python3 tests/servers/throttle.py --listen "$relay" --to "127.0.0.1:$tls" --rate "${RATE:-16777216}" \
	--log "$WORK/conns.log" &
at_exit "kill $! 2>/dev/null"
wait_port "$tls" && wait_port "$relay"
printf '{"name": "h2", "env": {"WEIGHTS_BUCKET": "https://127.0.0.1:%s/w/big.bin"}}\n' "$relay" >"$WORK/m.json"
echo "pull over HTTPS + HTTP/2, every TCP connection capped at ${RATE:-16777216} bytes/s; $(stat -c %s "$WORK/www/w/big.bin") bytes, -j ${JOBS:-4}"
for i in $(seq "${N:-3}"); do
	for who in old new; do
		b=$old
		[ $who = new ] && b=$new
		rm -rf "$WORK/store" "$WORK/m.lock"
		: >"$WORK/conns.log"
		/usr/bin/time -f "$who %e" env CURL_CA_BUNDLE="$WORK/ca.pem" FGPACK_HOME="$WORK/store" FGPACK_NO_PROGRESS=1 \
			"$b" pull "$WORK/m.json" --lock "$WORK/m.lock" -j "${JOBS:-4}" >/dev/null 2>>"$WORK/t.txt"
		sleep 0.3 # the relay logs a connection when it closes
		echo "$who conns $(wc -l <"$WORK/conns.log")" >>"$WORK/c.txt"
	done
done
med() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
for who in old new; do
	printf '%-4s wall runs: %s | median %s s | TCP connections per run: %s\n' "$who" \
		"$(grep "^$who " "$WORK/t.txt" | cut -d' ' -f2 | tr '\n' ' ')" \
		"$(grep "^$who " "$WORK/t.txt" | cut -d' ' -f2 | med)" \
		"$(grep "^$who conns" "$WORK/c.txt" | cut -d' ' -f3 | tr '\n' ' ')"
done
o=$(grep '^old ' "$WORK/t.txt" | cut -d' ' -f2 | med)
n=$(grep '^new ' "$WORK/t.txt" | cut -d' ' -f2 | med)
echo "new over old: $(awk -v o="$o" -v n="$n" 'BEGIN { printf "%.2fx faster", o / n }')"
