#!/bin/sh
# publish_interop.sh - fgpack publish against S3 servers that answer the way
# MinIO, Ceph RGW, R2 or AWS itself may, not the way s3rver does
# (tests/servers/s3faultd.py modes): 503 SlowDown / 500 InternalError / 400
# RequestTimeout on parts and on complete, CompleteMultipartUpload answering
# 200 with an <Error> body, Retry-After as an HTTP-date, gzip unasked,
# 206s of another range than asked, listings that lag behind writes, a
# relative Location on GetObject, a completed upload whose answer was lost, ETags
# unquoted, header names in lowercase, chunked answers, HEAD without
# Content-Length, no 100-continue ever, listings in pages with XML entities
# and encoding-type=url, a skewed server clock, 307 to another endpoint,
# connections closed after every answer, a bucket in another region than
# signed for (400 naming it, or 301 PermanentRedirect with x-amz-bucket-region), https with a private CA, and a 307 from https to http. Each publish goes to a fresh prefix
# and is read back with publish --get (and from the server's files), so a
# wrong byte shows.
. "$(dirname "$0")/../lib.sh"
S=$TOP/tests/servers
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH && export PATH
export AWS_ACCESS_KEY_ID=AKIAFGPACKINTEROP AWS_SECRET_ACCESS_KEY=interopSecret/1 FGPACK_HOME=$WORK/home
export AWS_CONFIG_FILE=$WORK/none AWS_SHARED_CREDENTIALS_FILE=$WORK/none AWS_REGION=us-east-1
unset AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3 AWS_PROFILE AWS_SESSION_TOKEN
mkdir -p "$WORK/s3" "$WORK/src/d" "$WORK/out"
head -c $((11 * 1024 * 1024 + 777)) /dev/urandom >"$WORK/src/big.bin"   # 3 parts of 5 MiB
for i in 0 1 2; do echo "file $i" >"$WORK/src/d/f$i"; done
echo amp >"$WORK/src/d/a&b <c>.txt"
echo utf >"$WORK/src/d/é+~ü.txt"
echo pct >"$WORK/src/d/p%41.txt"      # would become pA.txt if a listing were decoded twice
echo '[]' >"$WORK/rules.json"
port=$(free_port); port2=$(free_port)
python3 "$S/s3faultd.py" --port "$port" --port "$port2" --root "$WORK/s3" --log "$WORK/s3.log" \
	--faults "$WORK/rules.json" 2>>"$WORK/s3faultd.err" &
at_exit "kill $!"
wait_port "$port" && wait_port "$port2" || { echo "not ok 1 - s3faultd did not start"; cat "$WORK/s3faultd.err"; exit 1; }
EP=http://127.0.0.1:$port
T=hf://buckets/ns1/bk
sha() { sha256sum "$1" | cut -d' ' -f1; }
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
# count OP STATUS: requests of that op with that status in the log
count() { python3 -c "import json,sys; print(sum(1 for l in open(sys.argv[1]) if (lambda r: r['op']==sys.argv[2] and str(r['status'])==sys.argv[3])(json.loads(l))))" "$WORK/s3.log" "$1" "$2"; }
rules() { printf '%s\n' "$1" >"$WORK/rules.json"; : >"$WORK/s3.log"; }
# pub NAME SRC PREFIX: publish SRC under PREFIX (5 MiB parts), --verify, JSON to out/NAME.json
pub() {
	"$FGPACK" publish "$2" "$T/$3" --endpoint "$EP" --part-size 5M --jobs 2 --verify --json \
		>"$WORK/out/$1.json" 2>"$WORK/out/$1.err" || { rc=$?; cat "$WORK/out/$1.err" >&2; return $rc; }
}
# same NAME KEY SRC: the object KEY read back with publish --get (no faults) is SRC
same() {
	cp "$WORK/rules.json" "$WORK/rules.keep"; echo '[]' >"$WORK/rules.json"
	rm -f "$WORK/out/got"
	"$FGPACK" publish --get "$T/$2" -o "$WORK/out/got" --endpoint "$EP" 2>/dev/null
	cp "$WORK/rules.keep" "$WORK/rules.json"
	check "$1: $2 read back, same sha256" test "$(sha "$WORK/out/got" 2>/dev/null)" = "$(sha "$3")"
}

# 0. no faults: a multipart file and a folder of odd names
rules '[]'
check "plain: multipart publish" pub plain "$WORK/src/big.bin" plain
check "plain: 3 parts" test "$(jget "$WORK/out/plain.json" "d['stats']['parts_sent']")" = 3
same plain plain/big.bin "$WORK/src/big.bin"
check "plain: the server's file is the source" cmp -s "$WORK/s3/bk/plain%2Fbig.bin" "$WORK/src/big.bin"
check "plain: folder publish" pub folder "$WORK/src/d" folder
same plain "folder/a&b <c>.txt" "$WORK/src/d/a&b <c>.txt"

# 1. 503 SlowDown twice on a part, 500 InternalError once on complete: retried
rules '[{"op":"part","fault":"status","code":503,"s3code":"SlowDown","times":2},
	{"op":"complete","fault":"status","code":500,"s3code":"InternalError","times":1}]'
check "5xx: publish succeeds" pub slow "$WORK/src/big.bin" slow
check "5xx: 2 parts refused, 1 complete refused" test "$(count part 503) $(count complete 500) $(count complete 200)" = "2 1 1"
check "5xx: 3 retries counted" test "$(jget "$WORK/out/slow.json" "d['stats']['retries']")" -ge 3
same 5xx slow/big.bin "$WORK/src/big.bin"

# 2. 400 RequestTimeout (AWS: the socket was not read within the timeout): retried as SDKs do
rules '[{"op":"part","fault":"status","code":400,"s3code":"RequestTimeout","times":1}]'
check "400 RequestTimeout on a part: retried, publish succeeds" pub rto "$WORK/src/big.bin" rto
same RequestTimeout rto/big.bin "$WORK/src/big.bin"

# 3. complete answers 200 with an <Error> body once: retried, never taken as success
rules '[{"op":"complete","fault":"error200","times":1}]'
check "200+Error once: publish succeeds" pub e200 "$WORK/src/big.bin" e200
check "200+Error once: complete sent twice" test "$(count complete 200)" = 2
same 200+Error e200/big.bin "$WORK/src/big.bin"
# ... and every time: a failure naming the error, no object
rules '[{"op":"complete","fault":"error200"}]'
check_exit "200+Error always: exit 1" 1 pub e200x "$WORK/src/big.bin" e200x
check_grep "200+Error always: says InternalError" "complete multipart upload bk/e200x/big.bin: .*InternalError" "$WORK/out/e200x.err"
check "200+Error always: no object on the server" test ! -e "$WORK/s3/bk/e200x%2Fbig.bin"

# 4. the upload completed but its answer was lost: the retry meets NoSuchUpload
rules '[{"op":"complete","fault":"lost","times":1}]'
check "lost complete answer: publish succeeds" pub lost "$WORK/src/big.bin" lost
same lost lost/big.bin "$WORK/src/big.bin"
# ... but NoSuchUpload with another object of the same size at the key (an
# upload aborted by a lifecycle rule) is a failure, not taken for that case
head -c $((11 * 1024 * 1024 + 777)) /dev/urandom >"$WORK/src/big2.bin"
rules '[{"op":"complete","fault":"status","code":404,"s3code":"NoSuchUpload"}]'
check_exit "NoSuchUpload, another object of that size at the key: exit 1" 1 pub lost2 "$WORK/src/big2.bin" lost
check_grep "NoSuchUpload: says so" "HTTP 404 NoSuchUpload" "$WORK/out/lost2.err"
same "NoSuchUpload" lost/big.bin "$WORK/src/big.bin"
# a lost answer to a single PUT is simply sent again
rules '[{"op":"put","fault":"lost","times":1}]'
check "lost PUT answer: publish succeeds" pub lostput "$WORK/src/d/f0" lostput

# 5. ETags unquoted, header names in lowercase, chunked answers
rules '[{"fault":"unquoted"},{"fault":"lower"},{"fault":"chunked"}]'
check "unquoted ETags, lowercase, chunked: publish" pub lower "$WORK/src/big.bin" lower
check "multipart ETag read from the complete answer" test -n "$(jget "$WORK/out/lower.json" "d['objects'][0]['etag']")"
check "lowercase: folder publish" pub lowerf "$WORK/src/d" lowerf
same lowercase lower/big.bin "$WORK/src/big.bin"

# 6. HEAD without Content-Length (publish checks sizes with HEAD after upload)
rules '[{"fault":"headnolen"}]'
check "HEAD without Content-Length: publish succeeds" pub nolen "$WORK/src/big.bin" nolen
same nolen nolen/big.bin "$WORK/src/big.bin"

# 7. a server that never answers Expect: 100-continue
rules '[{"fault":"no100"}]'
t0=$(date +%s)
check "no 100-continue: publish" pub no100 "$WORK/src/big.bin" no100
t1=$(date +%s)
check "no request carried Expect (curl would wait 1 s each)" test "$(grep -c '"expect": true' "$WORK/s3.log")" -eq 0
check "no 100-continue: $((t1 - t0)) s for 3 parts + checks (under 4)" test $((t1 - t0)) -lt 4

# 8. listings: pages of 2; keys as entities, then as they are (encoding-type=url
# ignored); then encoding-type=url honoured (the default, as AWS) with a
# foreign key holding a character XML 1.0 cannot carry
six="['ent/a&b <c>.txt', 'ent/f0', 'ent/f1', 'ent/f2', 'ent/p%41.txt', 'ent/é+~ü.txt']"
rules '[{"fault":"entities"},{"fault":"nourlenc"},{"fault":"chunked"}]'
check "entities: folder publish (listed after upload)" pub ent "$WORK/src/d" ent
check "entities: --ls in pages of 2" sh -c "'$FGPACK' publish --ls $T/ent --endpoint $EP --page-size 2 --json >'$WORK/out/ls.json'"
check "entities: 6 keys in 3 pages, decoded" test "$(jget "$WORK/out/ls.json" "sorted(o['key'] for o in d['objects']), d['pages']")" = "($six, 3)"
rules '[{"fault":"v1list"}]'
check "a ListObjects v1 server (marker pages, no continuation token): --ls in pages of 2" sh -c "'$FGPACK' publish --ls $T/ent --endpoint $EP --page-size 2 --json >'$WORK/out/lsv1.json'"
check "v1 listing: the same 6 keys in 3 pages" test "$(jget "$WORK/out/lsv1.json" "sorted(o['key'] for o in d['objects']), d['pages']")" = "($six, 3)"
check "v1 listing: later pages asked by marker (the last key)" grep -q 'marker=ent%2Ff0' "$WORK/s3.log"
rules '[]'
check "encoding-type=url: --ls" sh -c "'$FGPACK' publish --ls $T/ent --endpoint $EP --page-size 4 --json >'$WORK/out/ls2.json'"
check "encoding-type=url: the same 6 keys ('+' a space, %2B a '+')" test "$(jget "$WORK/out/ls2.json" "sorted(o['key'] for o in d['objects'])")" = "$six"
check "encoding-type=url asked" grep -q 'encoding-type=url' "$WORK/s3.log"
printf x >"$WORK/s3/bk/ctl%2Fforeign%01key"     # put there by another client
check "a foreign key with U+0001 under the prefix: folder publish" pub ctl "$WORK/src/d" ctl
check "U+0001 key: --ls lists it" sh -c "'$FGPACK' publish --ls $T/ctl --endpoint $EP --json >'$WORK/out/ls3.json'"
check "U+0001 key: listed decoded" test "$(jget "$WORK/out/ls3.json" "[o['key'] for o in d['objects'] if 'foreign' in o['key']]")" = "['ctl/foreign\\x01key']"

# 9. the server's clock is an hour ahead: one clear line, exit 1
rules '[{"fault":"skew","by":3600}]'
check_exit "clock skew: exit 1" 1 pub skew "$WORK/src/d/f1" skew
check_grep "clock skew: RequestTimeTooSkewed and the offset" "RequestTimeTooSkewed.*clock.*(3[56][0-9][0-9]|3600) s" "$WORK/out/skew.err"
check "clock skew: one line" test "$(wc -l <"$WORK/out/skew.err")" -eq 1

# 10. 307 TemporaryRedirect to another endpoint for everything sent to the first
rules "[{\"port\":\"main\",\"fault\":\"redirect\",\"to\":\"http://127.0.0.1:$port2\"}]"
check "307 to another endpoint: publish" pub redir "$WORK/src/big.bin" redir
check "307: parts and complete re-sent there" test "$(python3 -c "import json,sys; print(sum(1 for l in open(sys.argv[1]) if (lambda r: r['port']==$port2 and r['status']==200 and r['op'] in ('part','complete'))(json.loads(l))))" "$WORK/s3.log")" = 4
same 307 redir/big.bin "$WORK/src/big.bin"
check "307: folder publish" pub redirf "$WORK/src/d" redirf

# 11. connection closed after every answer
rules '[{"fault":"close"}]'
check "close after each answer: publish" pub close "$WORK/src/big.bin" close
same close close/big.bin "$WORK/src/big.bin"
# 12. the bucket lives in another region than the one signed for (400
# AuthorizationHeaderMalformed naming it): signed again for it, once
rules '[{"fault":"region","name":"eu-central-1"}]'
check "wrong region: publish" pub region "$WORK/src/big.bin" region
check "wrong region: one 400, then every request signed for eu-central-1" test "$(python3 -c "
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
print(sum(r['status'] == 400 for r in rs), all(r['region'] == 'eu-central-1' for r in rs if r['status'] != 400))" "$WORK/s3.log")" = "1 True"
same region region/big.bin "$WORK/src/big.bin"
# ... or 301 PermanentRedirect without a Location, the region only in
# x-amz-bucket-region (AWS; botocore's S3RegionRedirector reads it there)
rules '[{"fault":"region","name":"eu-central-1","style":"301"}]'
check "wrong region, 301 PermanentRedirect: publish" pub region301 "$WORK/src/big.bin" region301
check "  one 301, then every request signed for eu-central-1" test "$(python3 -c "
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
print(sum(r['status'] == 301 for r in rs), all(r['region'] == 'eu-central-1' for r in rs if r['status'] != 301))" "$WORK/s3.log")" = "1 True"
check "  publish --get in that region (fresh run): read back" "$FGPACK" publish --get "$T/region301/big.bin" -o "$WORK/out/r301" --endpoint "$EP"
check "  the same bytes" cmp "$WORK/out/r301" "$WORK/src/big.bin"

# 12b. 503 SlowDown with Retry-After as an HTTP-date 3 s ahead (RFC 9110
# 10.2.3 allows it beside delay-seconds): the retry waits for that date,
# not for the 200 ms of the first backoff step
rules '[{"op":"put","fault":"status","code":503,"s3code":"SlowDown","retry_after_date":3,"times":1}]'
check "503 with an HTTP-date Retry-After: publish" pub radate "$WORK/src/d/f0" radate
check "  the HTTP-date was waited for (2 s or more)" python3 -c "
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)['op'] == 'put']
gap = rs[1]['time'] - rs[0]['time'] if len(rs) >= 2 and rs[0]['status'] == 503 else -1
print('retried after %.2f s' % gap)
sys.exit(0 if gap >= 1.9 else 1)" "$WORK/s3.log"
same radate radate/f0 "$WORK/src/d/f0"

# 12c. a proxy or CDN that gzips every 200 GET it may (RFC 9110 12.5.3: a
# request without Accept-Encoding accepts any coding): the listing after the
# publish, the --verify read-back and publish --get get the stored bytes
rules '[{"fault":"gzip"}]'
check "gzip unless asked for identity: publish --verify" pub gzip "$WORK/src/d" gzip
rm -f "$WORK/out/got"
check "  publish --get under gzip" "$FGPACK" publish --get "$T/gzip/f1" -o "$WORK/out/got" --endpoint "$EP"
check "  the object as stored" cmp "$WORK/out/got" "$WORK/src/d/f1"
check "  publish --ls under gzip lists every key" test "$("$FGPACK" publish --ls "$T/gzip/" --endpoint "$EP" 2>/dev/null | grep -c 'gzip/')" -ge 6

# 12d. publish --get --range through a store (or CDN) whose 206s carry
# another range than asked: capped at 1 MB (the rest asked for again), or
# starting 1000 bytes early (those dropped); Content-Range says which
python3 -c "
import sys
d = open(sys.argv[1], 'rb').read()
open(sys.argv[2], 'wb').write(d[1000:3001000])" "$WORK/src/big.bin" "$WORK/out/slice"
getrange() {
	rm -f "$WORK/out/got"
	"$FGPACK" publish --get "$T/plain/big.bin" -o "$WORK/out/got" --range 1000-3000999 --endpoint "$EP"
}
rules '[{"op":"get","fault":"rangecap","cap":1000000}]'
check "206s capped at 1 MB: publish --get --range" getrange
check "  the bytes asked for" cmp "$WORK/out/got" "$WORK/out/slice"
check "  the rest asked for twice more" test "$(count get 206)" = 3
rules '[{"op":"get","fault":"rangeback","back":1000}]'
check "a 206 starting 1000 bytes early: publish --get --range" getrange
check "  the bytes asked for" cmp "$WORK/out/got" "$WORK/out/slice"
rules '[]'

# 12e. a store whose listings lag (eventually consistent: new objects listed
# 30 s late, GET and HEAD find them at once): the check after the upload
# asks HEAD for a key the listing does not show yet
rules '[{"fault":"listlag"}]'
check "listings 30 s late: publish --verify" pub lag "$WORK/src/d" lag
check "  each key found by HEAD" test "$(count head 200)" -ge 6
same listlag "lag/a&b <c>.txt" "$WORK/src/d/a&b <c>.txt"

# 12f. GetObject answered with a 302 whose Location is relative (a gateway
# handing it to a CDN path on its own host; RFC 9110 10.2.2 allows a
# relative reference): followed, unsigned, like an absolute one
rules '[{"op":"get","fault":"redirect","cdn":1}]'
rm -f "$WORK/out/got"
check "GET answered with a relative 302: publish --get" "$FGPACK" publish --get "$T/plain/big.bin" -o "$WORK/out/got" --endpoint "$EP"
check "  the object" cmp "$WORK/out/got" "$WORK/src/big.bin"
check "  served from the CDN path" test "$(count cdn 200)" = 1
rules '[]'

# 13. https with a private CA (AWS_CA_BUNDLE as awscli reads it, or
# SSL_CERT_FILE/CURL_CA_BUNDLE as pull does); a 307 from https to plain http
# is not signed again (nothing reaches the http endpoint)
mkdir -p "$WORK/ca" "$WORK/s3tls"
if test_ca "$WORK/ca"; then
	echo '[]' >"$WORK/rules2.json"
	port3=$(free_port); port4=$(free_port)
	python3 "$S/s3faultd.py" --port "$port3" --port "$port4" --tls "$WORK/ca/srv.pem" "$WORK/ca/srv.key" \
		--root "$WORK/s3tls" --log "$WORK/tls.log" --faults "$WORK/rules2.json" 2>>"$WORK/s3faultd.err" &
	at_exit "kill $!"
	wait_port "$port3"
	ET=https://127.0.0.1:$port3
	unset SSL_CERT_FILE CURL_CA_BUNDLE AWS_CA_BUNDLE SSL_CERT_DIR
	check_exit "https, CA not trusted: exit 1" 1 "$FGPACK" publish "$WORK/src/d/f0" "$T/tls" --endpoint "$ET"
	check "https: AWS_CA_BUNDLE trusted: publish" env AWS_CA_BUNDLE="$WORK/ca/ca.pem" "$FGPACK" publish "$WORK/src/big.bin" "$T/tls" --endpoint "$ET" --part-size 5M --verify
	check "https: SSL_CERT_FILE trusted: --ls" env SSL_CERT_FILE="$WORK/ca/ca.pem" "$FGPACK" publish --ls "$T/tls" --endpoint "$ET"
	check "https: CURL_CA_BUNDLE trusted: --get" env CURL_CA_BUNDLE="$WORK/ca/ca.pem" "$FGPACK" publish --get "$T/tls/big.bin" -o "$WORK/out/tls.bin" --endpoint "$ET"
	check "https: same bytes" cmp -s "$WORK/out/tls.bin" "$WORK/src/big.bin"
	printf '%s\n' "[{\"port\":\"main\",\"fault\":\"redirect\",\"to\":\"http://127.0.0.1:$port4\"}]" >"$WORK/rules2.json"
	check_exit "307 from https to http: not followed, exit 1" 1 env AWS_CA_BUNDLE="$WORK/ca/ca.pem" "$FGPACK" publish "$WORK/src/d/f1" "$T/down" --endpoint "$ET"
	check_grep "307 to http: says HTTP 307" "HTTP 307 TemporaryRedirect" "$WORK/.out"
	check "307 to http: nothing reached the http endpoint" test "$(grep -c "\"port\": $port4" "$WORK/tls.log")" -eq 0
else
	not_ok "openssl makes a CA and a certificate"
fi
finish
