#!/bin/sh
# publish_s3.sh - fgpack publish against s3rver (npm; our launcher adds a SigV4 check),
# with Debian's awscli as the independent client: small and multipart
# uploads, listing with paging, kill -9 mid-upload then resume (only missing
# parts sent), bad keys refused before any upload, awscli <-> fgpack round
# trips, virtual-hosted requests (s3rver takes the bucket from an AWS-style
# Host), and no secret in anything fgpack writes or prints.
. "$(dirname "$0")/../lib.sh"
cd "$TOP" || exit 1
[ -d tests/node/node_modules/s3rver ] || { echo "not ok 1 - s3rver not installed (run tests/deps.sh)"; exit 1; }
AWS=/usr/bin/aws
[ -x "$AWS" ] || AWS=aws

# distinctive fake credentials, accepted by our s3rver launcher
AK=AKIAFGPACKFAKE7Q2X
SK='fgpackFakeSecret/9z+Qw=='
TOKEN=hf_fgpackFakeHubToken0123456789
PORT=$(free_port)
mkdir -p "$WORK/s3" "$WORK/home" "$WORK/out"
FG_S3RVER_KEY=$AK FG_S3RVER_SECRET=$SK node --openssl-legacy-provider tests/servers/s3rver.js \
	"$PORT" "$WORK/s3" pubb other >"$WORK/s3rver.log" 2>&1 &
S3PID=$!
at_exit "kill $S3PID 2>/dev/null"
wait_port "$PORT" || { echo "not ok 1 - s3rver did not start"; cat "$WORK/s3rver.log"; exit 1; }
EP=http://127.0.0.1:$PORT
export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK HF_TOKEN=$TOKEN FGPACK_HOME=$WORK/home
export AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=$WORK/none AWS_SHARED_CREDENTIALS_FILE=$WORK/none
unset AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3 AWS_PROFILE AWS_SESSION_TOKEN
sha() { sha256sum "$1" | cut -d' ' -f1; }
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
log=$WORK/out/fgpack.log   # every fgpack stderr goes here too, for the secrets check

# 1. small file
printf 'hello bucket\n' >"$WORK/small.txt"
check "small file publish --verify" sh -c "'$FGPACK' publish '$WORK/small.txt' hf://buckets/ns1/pubb/s --endpoint $EP --verify --json >'$WORK/out/small.json' 2>>'$log'"
check "small: one object, verified" test "$(jget "$WORK/out/small.json" "d['objects'][0]['verified'] and d['objects'][0]['key']")" = "s/small.txt"
check "small: reference printed" test "$(jget "$WORK/out/small.json" "d['reference']")" = "hf://buckets/ns1/pubb/s/small.txt"
"$AWS" --endpoint-url "$EP" s3 cp s3://pubb/s/small.txt "$WORK/out/small.aws" >/dev/null 2>&1
check "small: awscli downloads the same sha256" test "$(sha "$WORK/out/small.aws")" = "$(sha "$WORK/small.txt")"

# 2. multipart, parts in parallel
head -c 23000000 /dev/urandom >"$WORK/big.bin"
check "multipart publish (5M parts, 4 jobs)" sh -c "'$FGPACK' publish '$WORK/big.bin' hf://buckets/ns1/pubb/m --endpoint $EP --part-size 5M --jobs 4 --verify --json >'$WORK/out/big.json' 2>>'$log'"
check "multipart: 5 parts sent" test "$(jget "$WORK/out/big.json" "d['stats']['parts_sent'], d['stats']['multipart']")" = "(5, True)"
"$AWS" --endpoint-url "$EP" s3 cp s3://pubb/m/big.bin "$WORK/out/big.aws" >/dev/null 2>&1
check "multipart: awscli downloads the same sha256" test "$(sha "$WORK/out/big.aws")" = "$(sha "$WORK/big.bin")"
check "multipart: lock entry has the file sha256" test "$(jget "$WORK/out/big.json" "d['lock_entry']['files'][0]['sha256']")" = "$(sha "$WORK/big.bin")"

# 3. a folder of 25 files; listing in pages of 7
mkdir -p "$WORK/many/sub dir"
i=0; while [ $i -lt 24 ]; do echo "$i" >"$WORK/many/f$i"; i=$((i + 1)); done
echo unicode >"$WORK/many/sub dir/é+~.txt"
check "folder publish" sh -c "'$FGPACK' publish '$WORK/many' hf://buckets/ns1/pubb/many --endpoint $EP >'$WORK/out/many.txt' 2>>'$log'"
check_grep "folder: lock entry printed" '"tree_digest"' "$WORK/out/many.txt"
check "list with paging" sh -c "'$FGPACK' publish --ls hf://buckets/ns1/pubb/many --endpoint $EP --page-size 7 --json >'$WORK/out/ls.json' 2>>'$log'"
check "list: 25 objects in 4 pages" test "$(jget "$WORK/out/ls.json" "len(d['objects']), d['pages']")" = "(25, 4)"
check_grep "list: unicode key listed" 'many/sub dir/é\+~.txt' "$WORK/out/ls.json"
check "awscli sees the same 25 keys" test "$("$AWS" --endpoint-url "$EP" s3 ls --recursive s3://pubb/many/ 2>/dev/null | wc -l)" -eq 25

# 3b. a bundle: bundle.json and attestations/ members go beside it, and its .sig
mkdir -p "$WORK/bsrc/attestations" "$WORK/bsrc/components"
echo '{"schema":1}' >"$WORK/bsrc/bundle.json"
echo '{"_type":"https://in-toto.io/Statement/v1"}' >"$WORK/bsrc/attestations/bake.intoto.json"
head -c 100000 /dev/urandom >"$WORK/bsrc/components/w.bin"
tar -C "$WORK/bsrc" -cf - bundle.json attestations components | zstd -q >"$WORK/demo.fgb"
echo '{"payloadType":"x"}' >"$WORK/demo.fgb.sig"
check "bundle publish" sh -c "'$FGPACK' publish '$WORK/demo.fgb' hf://buckets/ns1/pubb/b --endpoint $EP --json >'$WORK/out/b.json' 2>>'$log'"
check "bundle: .fgb, bundle.json, attestation and .sig uploaded" test "$(jget "$WORK/out/b.json" "sorted(o['key'] for o in d['objects'])")" = \
	"['b/attestations/bake.intoto.json', 'b/bundle.json', 'b/demo.fgb', 'b/demo.fgb.sig']"
check "bundle: reference names the .fgb" test "$(jget "$WORK/out/b.json" "d['reference']")" = "hf://buckets/ns1/pubb/b/demo.fgb"
"$AWS" --endpoint-url "$EP" s3 cp s3://pubb/b/bundle.json "$WORK/out/bj.aws" >/dev/null 2>&1
check "bundle: bundle.json as in the bundle" cmp -s "$WORK/out/bj.aws" "$WORK/bsrc/bundle.json"

# 4. keys the gateway refuses are refused before any upload
mkdir -p "$WORK/bad"
echo a >"$WORK/bad/ok.txt"
echo b >"$WORK/bad/back\\slash.txt"
before=$(grep -c 'Stored object' "$WORK/s3rver.log")
check_exit "key with a backslash refused" 1 "$FGPACK" publish "$WORK/bad" hf://buckets/ns1/pubb/bad --endpoint "$EP"
check_grep "says why" "refusing to upload .*contains '\\\\'" "$WORK/.out"
check "nothing was stored" test "$(grep -c 'Stored object' "$WORK/s3rver.log")" -eq "$before"
check_exit "target path with '..' refused" 1 "$FGPACK" publish "$WORK/small.txt" hf://buckets/ns1/pubb/a/../b --endpoint "$EP"

# 5. kill -9 in the middle of a multipart upload, then resume
head -c 31457280 /dev/urandom >"$WORK/resume.bin"   # 6 parts of 5 MiB
"$FGPACK" publish "$WORK/resume.bin" hf://buckets/ns1/pubb/r --endpoint "$EP" --part-size 5M \
	--jobs 1 --limit-rate 4M >/dev/null 2>>"$log" &
UP=$!
n=0; i=0
while [ $i -lt 300 ]; do
	n=$(cat "$WORK"/home/uploads/*.journal 2>/dev/null | grep -c '^part ')
	[ "$n" -ge 2 ] && break
	sleep 0.1; i=$((i + 1))
done
kill -9 $UP 2>/dev/null; wait $UP 2>/dev/null
check "killed after 2+ parts were recorded ($n)" test "$n" -ge 2 -a "$n" -lt 6
stored_before=$(grep -c 'Stored part' "$WORK/s3rver.log")
check "resume" sh -c "'$FGPACK' publish '$WORK/resume.bin' hf://buckets/ns1/pubb/r --endpoint $EP --part-size 5M --verify --json >'$WORK/out/resume.json' 2>>'$log'"
sent=$(jget "$WORK/out/resume.json" "d['stats']['parts_sent']")
resumed=$(jget "$WORK/out/resume.json" "d['stats']['parts_resumed']")
check "resume: $resumed parts taken from the journal, $sent sent, 6 in all" test "$resumed" -ge 2 -a $((sent + resumed)) -eq 6
check "resume: server stored only the missing parts" test $(($(grep -c 'Stored part' "$WORK/s3rver.log") - stored_before)) -eq "$sent"
check "resume: journal removed after completion" test -z "$(ls "$WORK/home/uploads/" 2>/dev/null)"
"$AWS" --endpoint-url "$EP" s3 cp s3://pubb/r/resume.bin "$WORK/out/resume.aws" >/dev/null 2>&1
check "resume: awscli downloads the same sha256" test "$(sha "$WORK/out/resume.aws")" = "$(sha "$WORK/resume.bin")"

# 6. what awscli uploads, fgpack fetches (GET, and GET with Range)
head -c 9000000 /dev/urandom >"$WORK/fromaws.bin"
"$AWS" --endpoint-url "$EP" s3 cp "$WORK/fromaws.bin" "s3://other/up/from aws.bin" >/dev/null 2>&1
check "fgpack gets what awscli put" sh -c "'$FGPACK' publish --get 'hf://buckets/ns1/other/up/from aws.bin' -o '$WORK/out/got.bin' --endpoint $EP 2>>'$log'"
check "get: same sha256" test "$(sha "$WORK/out/got.bin")" = "$(sha "$WORK/fromaws.bin")"
check "ranged get" sh -c "'$FGPACK' publish --get 'hf://buckets/ns1/other/up/from aws.bin' -o '$WORK/out/range.bin' --range 1000-8999 --endpoint $EP 2>>'$log'"
check "ranged get: the right 8000 bytes" sh -c "tail -c +1001 '$WORK/fromaws.bin' | head -c 8000 | cmp - '$WORK/out/range.bin'"
# the download's temporary file is made new: a link planted at its first
# name (exec keeps the pid the name is made of) is not written through
echo keep >"$WORK/victim"
check "get past a link planted at its temporary name" sh -c 'ln -s "$1" "$2.tmp.$$" && exec "$3" publish --get "hf://buckets/ns1/other/up/from aws.bin" -o "$2" --endpoint "$4"' sh "$WORK/victim" "$WORK/out/planted.bin" "$FGPACK" "$EP"
check "  the link's target untouched" test "$(cat "$WORK/victim")" = keep
check "  the object got whole" cmp "$WORK/fromaws.bin" "$WORK/out/planted.bin"
rm -f "$WORK"/out/planted.bin.tmp.*
# -o a FIFO or a character device (what /dev/null is): written through, the
# node left as it was, never the temporary file renamed over it
special_outputs "publish --get" "'$FGPACK' publish --get 'hf://buckets/ns1/other/up/from aws.bin' -o \"\$OUT\" --endpoint $EP" "$WORK/fromaws.bin"
mkfifo "$WORK/rfifo"
timeout 30 cat "$WORK/rfifo" >"$WORK/rfifo.got" &
rcat=$!
check_exit "ranged get to a FIFO (it cannot seek) is refused" 1 timeout 20 "$FGPACK" publish --get 'hf://buckets/ns1/other/up/from aws.bin' -o "$WORK/rfifo" --range 1000-8999 --endpoint "$EP"
check_grep "  in one line naming it" "^fgpack publish: .*rfifo cannot seek: --range needs a file" "$WORK/.out"
wait $rcat
check "  the FIFO stays a FIFO and got nothing" sh -c "test -p '$WORK/rfifo' && ! test -s '$WORK/rfifo.got'"
check_exit "get of a missing key fails" 1 "$FGPACK" publish --get hf://buckets/ns1/other/nope -o "$WORK/out/nope" --endpoint "$EP"
check_grep "missing key: HTTP 404" "HTTP 404" "$WORK/.out"

# 6b. virtual-hosted: auto at AWS's own host name (reached through
# --connect-to, as curl's) puts the bucket in the Host; s3rver takes it from
# pubb.s3.us-east-1.amazonaws.com, and its verifier checks the signature
# over that Host and a canonical URI without the bucket
AWSEP=http://s3.us-east-1.amazonaws.com:$PORT
check "virtual-hosted multipart publish --verify" sh -c "'$FGPACK' publish '$WORK/big.bin' hf://buckets/ns1/pubb/vh --endpoint $AWSEP --connect-to ::127.0.0.1:$PORT --part-size 5M --jobs 4 --verify --json >'$WORK/out/vh.json' 2>>'$log'"
check "virtual-hosted: 5 parts sent" test "$(jget "$WORK/out/vh.json" "d['stats']['parts_sent']")" = 5
check_grep "virtual-hosted: parts went to /vh/big.bin, signatures verified" '^sigv4 ok PUT /vh/big\.bin\?partNumber=5&' "$WORK/s3rver.log"
check_grep "virtual-hosted: the listing went to /?" '^sigv4 ok GET /\?.*list-type=2' "$WORK/s3rver.log"
"$AWS" --endpoint-url "$EP" s3 cp s3://pubb/vh/big.bin "$WORK/out/vh.aws" >/dev/null 2>&1
check "virtual-hosted: awscli (path-style) downloads the same sha256" test "$(sha "$WORK/out/vh.aws")" = "$(sha "$WORK/big.bin")"
check "virtual-hosted: publish --get of what awscli put" sh -c "'$FGPACK' publish --get 'hf://buckets/ns1/other/up/from aws.bin' -o '$WORK/out/vhgot.bin' --endpoint $AWSEP --connect-to ::127.0.0.1:$PORT 2>>'$log'"
check "virtual-hosted: get: same sha256" test "$(sha "$WORK/out/vhgot.bin")" = "$(sha "$WORK/fromaws.bin")"

# every request so far (fgpack's and awscli's) passed the server-side SigV4 check
check "server verified $(grep -c '^sigv4 ok' "$WORK/s3rver.log") signatures, no mismatch" \
	test "$(grep -c '^sigv4 ok' "$WORK/s3rver.log")" -gt 50 -a "$(grep -c '^sigv4 MISMATCH' "$WORK/s3rver.log")" -eq 0

# 7. wrong secret: refused by the server, and the message holds no secret
AWS_SECRET_ACCESS_KEY=wrong-${SK}x "$FGPACK" publish "$WORK/small.txt" hf://buckets/ns1/pubb/w --endpoint "$EP" >"$WORK/out/wrong.out" 2>"$WORK/out/wrong.err"
check "wrong secret fails" test $? -eq 1
check_grep "wrong secret: says SignatureDoesNotMatch" "HTTP 403 SignatureDoesNotMatch" "$WORK/out/wrong.err"
# credentials file instead of the environment
printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$AK" "$SK" >"$WORK/creds"
check "credentials from AWS_SHARED_CREDENTIALS_FILE" env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY \
	AWS_SHARED_CREDENTIALS_FILE="$WORK/creds" "$FGPACK" publish "$WORK/small.txt" hf://buckets/ns1/pubb/c --endpoint "$EP"
rm -f "$WORK/creds"

# 8. secrets: nothing fgpack printed or wrote holds the secret, token or key id
leak=$(grep -rlF -e "$SK" -e "$TOKEN" -e "$AK" "$WORK/out" "$WORK/home" 2>/dev/null)
check "no secret in any output, log, journal or lock entry" test -z "$leak"
[ -n "$leak" ] && echo "#   leaked into: $leak"
# and the check can see a leak
echo "$SK" >"$WORK/out/canary"
check "the secrets grep finds a planted secret" test -n "$(grep -rlF -e "$SK" "$WORK/out")"
finish
