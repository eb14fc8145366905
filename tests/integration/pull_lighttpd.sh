#!/bin/sh
# pull_lighttpd.sh - plain URLs served by lighttpd (a second real server beside
# pull_url.sh's nginx), plain http on loopback, run as this test's own process
# from a config written here. Checks a 24 MiB file fetched as parallel 206
# ranges, the lock holding lighttpd's ETag and Last-Modified exactly as sent,
# --locked noticing a same-size change, a pin mismatch leaving nothing behind,
# a 404 in one line, a file lighttpd sends without validators (an extension
# its mimetype.assign does not name), and a pull killed with SIGKILL half way
# resumed from the journal (lighttpd's own per-connection rate limit makes
# the first pull slow enough to kill). Skips when lighttpd is not installed.
. "$(dirname "$0")/../lib.sh"
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH && export PATH
LIGHTTPD=$(command -v lighttpd || { [ -x /usr/sbin/lighttpd ] && echo /usr/sbin/lighttpd; })
if [ -z "$LIGHTTPD" ]; then
	ok "lighttpd pulls # SKIP lighttpd not installed"
	finish
	exit 0
fi
www=$WORK/www
mkdir -p "$www/w" "$www/r" "$WORK/lt"
python3 - "$www" <<'PY'
import os, random, sys
r = random.Random(5)
www = sys.argv[1]
blk = r.randbytes(1 << 20)
for name in ('w/model.safetensors', 'w/model.gguf', 'r/model.safetensors'):  # 24 MiB: 6 ranges of 4 MiB
    with open(os.path.join(www, name), 'wb') as f:
        for i in range(24):
            f.write(blk[i:] + blk[:i])
    blk = blk[::-1]
PY
big=$www/w/model.safetensors
big_sha=$(sha256sum "$big" | cut -d' ' -f1)
# lighttpd sends ETag and Last-Modified only for a file modified at least a
# second ago whose extension mimetype.assign names; an mtime in the past
touch -d '2024-01-02 03:04:05' "$big" "$www/w/model.gguf" "$www/r/model.safetensors"

port=$(free_port)
# .gguf is left out of mimetype.assign on purpose: lighttpd then answers
# application/octet-stream with neither ETag nor Last-Modified. /r/ is rate
# limited per connection (KiB/s) so that a pull there can be killed half way.
cat >"$WORK/lt/lighttpd.conf" <<EOF
server.modules = ( "mod_accesslog", "mod_staticfile" )
server.document-root = "$www"
server.bind = "127.0.0.1"
server.port = $port
server.pid-file = "$WORK/lt/lighttpd.pid"
server.errorlog = "$WORK/lt/error.log"
accesslog.filename = "$WORK/lt/access.log"
accesslog.format = "%p %m %U %>s %b \"%{Range}i\""
mimetype.assign = ( ".safetensors" => "application/octet-stream", ".json" => "application/json" )
\$HTTP["url"] =~ "^/r/" { connection.kbytes-per-second = 1536 }
EOF
[ "$(id -u)" -eq 0 ] && echo 'server.username = ""' >>"$WORK/lt/lighttpd.conf"
"$LIGHTTPD" -D -f "$WORK/lt/lighttpd.conf" >"$WORK/lt/stderr" 2>&1 &
at_exit "kill $! 2>/dev/null"
wait_port "$port" || { not_ok "lighttpd starts"; cat "$WORK/lt/stderr" "$WORK/lt/error.log"; finish; exit 1; }
log=$WORK/lt/access.log
# lighttpd buffers its access log; SIGHUP makes it flush and reopen the
# file: logged() prints the log so far
logged() { kill -HUP "$(cat "$WORK/lt/lighttpd.pid")"; sleep 0.3; cat "$log"; }

export FGPACK_HOME="$WORK/store" FGPACK_CHUNK=4194304
unset HF_HUB_OFFLINE HF_TOKEN CURL_CA_BUNDLE SSL_CERT_FILE
man() { _mf=$1; shift; env_manifest "$_mf" l "$@"; } # man FILE KEY=VALUE...: a manifest with these env entries
U="http://127.0.0.1:$port/w/model.safetensors"
man "$WORK/lt.json" "WEIGHTS_BUCKET=$U" LOCAL_MODEL_DIR=/tmp/l/model "WEIGHTS_SHA256=$big_sha"

# what lighttpd sends for the file, as curl sees it
curl -sI "$U" | tr -d '\r' >"$WORK/head.txt"
etag=$(sed -n 's/^ETag: //p' "$WORK/head.txt")
lm=$(sed -n 's/^Last-Modified: //p' "$WORK/head.txt")
check_grep "lighttpd sends a strong ETag (a quoted number)" '^ETag: "[0-9]+"$' "$WORK/head.txt"
check_grep "  and Last-Modified, the file's mtime" '^Last-Modified: Tue, 02 Jan 2024 03:04:05 GMT$' "$WORK/head.txt"

check "pull from lighttpd" "$FGPACK" pull "$WORK/lt.json" --lock "$WORK/lt.lock" --into "$WORK/out" -j 4
check "file materialized intact" cmp "$big" "$WORK/out/tmp/l/model/model.safetensors"
logged >"$WORK/log1"
r=$(grep -c "^$port GET /w/model.safetensors 206 4194304 \"bytes=" "$WORK/log1")
[ "$r" -eq 6 ] && ok "fetched as 6 range answers of 4 MiB (206)" || not_ok "fetched as 6 range answers of 4 MiB (got $r)"
if grep -q "^$port GET /w/model.safetensors 200 " "$WORK/log1"; then not_ok "  no whole-file GET"; else ok "  no whole-file GET"; fi
# "https" is the kind of every plain URL, http:// too (lib/ref.h)
check_grep "lock: kind https (a plain URL)" '"kind": "https"' "$WORK/lt.lock"
check_grep "lock: sha256" "\"sha256\": \"$big_sha\"" "$WORK/lt.lock"
check_grep "lock: size" '"size": 25165824' "$WORK/lt.lock"
check_grep "lock: url" "\"url\": \"$U\"" "$WORK/lt.lock"
check "lock: etag exactly as lighttpd sent it ($etag)" python3 -c "
import json, sys
def find(o):
    if isinstance(o, dict):
        if o.get('url') == sys.argv[2]: yield o
        for v in o.values(): yield from find(v)
    elif isinstance(o, list):
        for v in o: yield from find(v)
e = list(find(json.load(open(sys.argv[1]))))
assert len(e) == 1, e
assert e[0]['etag'] == sys.argv[3], (e[0].get('etag'), sys.argv[3])
assert e[0]['last_modified'] == sys.argv[4], (e[0].get('last_modified'), sys.argv[4])" "$WORK/lt.lock" "$U" "$etag" "$lm"
check "--locked passes while unchanged" "$FGPACK" pull "$WORK/lt.json" --lock "$WORK/lt.lock" --locked
check "lock written again is the same bytes" "$FGPACK" lock "$WORK/lt.json" -o "$WORK/lt2.lock"
check "  same bytes" cmp "$WORK/lt.lock" "$WORK/lt2.lock"

# content changes with the same size and a new mtime: lighttpd's ETag moves
cp "$big" "$WORK/big.orig"
python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(100); f.write(b'CHANGED'); f.close()" "$big"
touch -d '2024-02-03 04:05:06' "$big"
# lighttpd's stat cache ("simple" engine) may answer with the old stat for
# up to a couple of seconds: wait until it sends the new ETag
i=0
while [ $i -lt 50 ]; do
	etag2=$(curl -sI "$U" | tr -d '\r' | sed -n 's/^ETag: //p')
	[ "$etag2" != "$etag" ] && break
	sleep 0.1; i=$((i + 1))
done
[ -n "$etag2" ] && [ "$etag2" != "$etag" ] && ok "lighttpd's ETag changed ($etag -> $etag2)" || not_ok "lighttpd's ETag changed ($etag -> $etag2)"
cp "$WORK/lt.lock" "$WORK/lt.before"
check_exit "--locked after the content changed fails with exit 3" 3 "$FGPACK" pull "$WORK/lt.json" --lock "$WORK/lt.lock" --locked
check_grep "  names what changed" 'WEIGHTS_BUCKET: model\.safetensors changed on the remote.*ETag' "$WORK/.out"
sed 's/^/# /' "$WORK/.out"
check "  the lock left alone" cmp "$WORK/lt.lock" "$WORK/lt.before"
new_sha=$(sha256sum "$big" | cut -d' ' -f1)
check_exit "pull against the now failing pin fails with exit 3" 3 "$FGPACK" pull "$WORK/lt.json" --lock "$WORK/pin.lock" --into "$WORK/pin"
check_grep "  names file, expected and actual" "model\.safetensors: expected sha256 $big_sha \(WEIGHTS_SHA256\), got $new_sha" "$WORK/.out"
if [ -z "$(find "$WORK/store/blobs" -name "$new_sha")" ] && [ ! -e "$WORK/pin.lock" ] && [ ! -e "$WORK/pin" ] &&
   [ -z "$(ls "$WORK/store/partial" 2>/dev/null)" ]; then ok "  nothing left behind"; else not_ok "  nothing left behind"; fi
cp "$WORK/big.orig" "$big"

# a 404: one line, no lock, nothing stored
man "$WORK/nf.json" "WEIGHTS_BUCKET=http://127.0.0.1:$port/w/missing.safetensors" LOCAL_MODEL_DIR=/tmp/nf
check_exit "a 404 fails" 1 env FGPACK_HOME="$WORK/store_nf" "$FGPACK" pull "$WORK/nf.json" --lock "$WORK/nf.lock" --into "$WORK/nf"
check_grep "  saying 404, naming the file" '^fgpack pull: .*missing\.safetensors.*404' "$WORK/.out"
sed 's/^/# /' "$WORK/.out"
n=$(wc -l <"$WORK/.out")
[ "$n" -eq 1 ] && ok "  in one line" || not_ok "  in one line (got $n)"
if [ ! -e "$WORK/nf.lock" ] && [ ! -e "$WORK/nf" ] && [ -z "$(find "$WORK/store_nf/blobs" -type f 2>/dev/null)" ] &&
   [ -z "$(ls "$WORK/store_nf/partial" 2>/dev/null)" ]; then
	ok "  no lock, nothing placed, nothing stored"; else not_ok "  no lock, nothing placed, nothing stored"; find "$WORK/store_nf" -type f; fi

# an extension lighttpd's mimetype.assign does not name: ranges still, but
# neither ETag nor Last-Modified, so the lock has neither and --locked
# compares the bytes
G="http://127.0.0.1:$port/w/model.gguf"
curl -sI "$G" | tr -d '\r' >"$WORK/head2.txt"
if grep -Eq '^(ETag|Last-Modified):' "$WORK/head2.txt"; then not_ok "an unmapped extension: no validators sent"; else ok "an unmapped extension: no validators sent"; fi
man "$WORK/gg.json" "WEIGHTS_BUCKET=$G" LOCAL_MODEL_DIR=/tmp/g
check "  pulled" "$FGPACK" pull "$WORK/gg.json" --lock "$WORK/gg.lock" --into "$WORK/gg" -j 4
check "  intact" cmp "$www/w/model.gguf" "$WORK/gg/tmp/g/model.gguf"
r=$(logged | grep -c "^$port GET /w/model.gguf 206 4194304 ")
[ "$r" -eq 6 ] && ok "  as 6 range answers" || not_ok "  as 6 range answers (got $r)"
if grep -Eq '"(etag|last_modified)"' "$WORK/gg.lock"; then not_ok "  the lock has no etag or last_modified"; else ok "  the lock has no etag or last_modified"; fi
check "  --locked passes while the bytes are the same" "$FGPACK" pull "$WORK/gg.json" --lock "$WORK/gg.lock" --locked
python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(7); f.write(b'Z'); f.close()" "$www/w/model.gguf"
check_exit "  --locked notices changed bytes" 3 "$FGPACK" pull "$WORK/gg.json" --lock "$WORK/gg.lock" --locked
check_grep "  and says so" 'changed on the remote since the lock \(sha256' "$WORK/.out"

# resume: a pull from the rate-limited /r/ killed with SIGKILL once at
# least one range is journaled and before all are, then pulled again
R="http://127.0.0.1:$port/r/model.safetensors"
r_sha=$(sha256sum "$www/r/model.safetensors" | cut -d' ' -f1)
man "$WORK/r.json" "WEIGHTS_BUCKET=$R" LOCAL_MODEL_DIR=/tmp/r
FGPACK_HOME="$WORK/s2" "$FGPACK" pull "$WORK/r.json" --lock "$WORK/r.lock" -j 2 >"$WORK/k.out" 2>&1 &
kill_when_journaled $! "$WORK/s2" 2
n=$journaled
if [ "$n" -ge 2 ] && [ "$n" -lt 7 ]; then ok "killed with $((n - 1)) of 6 ranges journaled"; else not_ok "killed half way (journal has $n lines)"; cat "$WORK/k.out"; fi
if [ -z "$(find "$WORK/s2/blobs" -type f 2>/dev/null)" ]; then ok "  no blob from the killed pull"; else not_ok "  no blob from the killed pull"; fi
FGPACK_HOME="$WORK/s2" "$FGPACK" pull "$WORK/r.json" --lock "$WORK/r.lock" -j 2 --json >"$WORK/r.out" 2>"$WORK/r.err"
check "re-pull after kill -9 succeeds" test $? -eq 0
net=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['fetch']['bytes_net'])" "$WORK/r.out" 2>/dev/null || echo 999999999)
want=$((25165824 - (n - 1) * 4194304))
[ "$net" -le "$want" ] && ok "  fetched $net bytes, not the $((n - 1)) journaled ranges again" || not_ok "  fetched $net bytes (at most $want wanted)"
check_grep "  the resumed file has the right sha256" "$r_sha" "$WORK/r.lock"
check "  store verify" env FGPACK_HOME="$WORK/s2" "$FGPACK" store verify
if [ -z "$(ls "$WORK/s2/partial" 2>/dev/null)" ]; then ok "  partial/ empty after the resume"; else not_ok "  partial/ empty after the resume"; ls "$WORK/s2/partial"; fi
finish
