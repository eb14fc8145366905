#!/bin/sh
# publish_vhost.sh - S3 virtual-hosted addressing (docs/cli.md "publish"):
# fgpack publish, --ls and --get against tests/servers/s3faultd.py serving
# buckets by Host (<bucket>.s3.localhost, <bucket>.s3.<region>.amazonaws.com)
# and refusing path-style requests to those hosts (its vhostonly rule), so
# a request that kept the bucket in its path fails.
# - --addressing-style virtual at http://s3.localhost:PORT (libcurl, like
#   curl, resolves every *.localhost name to the loopback itself), and the
#   same from addressing_style in the AWS CLI's config file;
# - auto at a non-AWS endpoint stays path-style (botocore's auto);
# - auto at AWS's own host (http://s3.us-east-1.amazonaws.com:PORT, reached
#   through --connect-to, curl's option) goes virtual-hosted, and signs for
#   the region the host names;
# - a bucket in another region: 301 PermanentRedirect (AWS: x-amz-bucket-region;
#   the bucket is served only at its region's endpoint) moves both styles to
#   s3.<region>.amazonaws.com; 400 AuthorizationHeaderMalformed at
#   s3.localhost is signed again at the same host.
# botocore 1.43.11's choices (tests/unit/test_s3.c "addressing") were read
# from the URL of a HeadObject caught in a before-send handler:
#   c = botocore.session.get_session().create_client('s3', endpoint_url=EP,
#       config=Config(s3={'addressing_style': STYLE}))
#   c.meta.events.register('before-send', lambda request, **kw: seen(request.url))
. "$(dirname "$0")/../lib.sh"
S=$TOP/tests/servers
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH && export PATH
export AWS_ACCESS_KEY_ID=AKIAFGPACKVHOST AWS_SECRET_ACCESS_KEY=vhostSecret/1 FGPACK_HOME=$WORK/home
export AWS_CONFIG_FILE=$WORK/none AWS_SHARED_CREDENTIALS_FILE=$WORK/none
unset AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3 AWS_PROFILE AWS_SESSION_TOKEN AWS_REGION
mkdir -p "$WORK/s3" "$WORK/src/d" "$WORK/out"
head -c $((11 * 1024 * 1024 + 333)) /dev/urandom >"$WORK/src/big.bin"   # 3 parts of 5 MiB
echo one >"$WORK/src/d/f 1.txt"
echo two >"$WORK/src/d/é+~.txt"
V='{"fault":"vhostonly"}'
echo "[$V]" >"$WORK/rules.json"
port=$(free_port)
python3 "$S/s3faultd.py" --port "$port" --root "$WORK/s3" --log "$WORK/s3.log" --faults "$WORK/rules.json" \
	--vhost s3.localhost --vhost s3.us-east-1.amazonaws.com --vhost s3.eu-west-1.amazonaws.com \
	2>>"$WORK/s3faultd.err" &
at_exit "kill $!"
wait_port "$port" || { echo "not ok 1 - s3faultd did not start"; cat "$WORK/s3faultd.err"; exit 1; }
T=hf://buckets/ns1/vbk
LH=http://s3.localhost:$port
AWSEP=http://s3.us-east-1.amazonaws.com:$port
CT="--connect-to ::127.0.0.1:$port"   # every host:port to the test server, as curl --connect-to
sha() { sha256sum "$1" | cut -d' ' -f1; }
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
rules() { printf '%s\n' "$1" >"$WORK/rules.json"; : >"$WORK/s3.log"; }
# hosts: the distinct Host headers of the answered requests (status < 300), sorted
hosts() { python3 -c "import json,sys; print(' '.join(sorted({r['host'] for r in map(json.loads, open(sys.argv[1])) if 0 < r['status'] < 300})))" "$WORK/s3.log"; }
# inpath: how many requests carried the bucket in their path
inpath() { python3 -c "import json,sys; print(sum(r['path'].startswith('/vbk/') or r['path'].split('?')[0] == '/vbk' for r in map(json.loads, open(sys.argv[1]))))" "$WORK/s3.log"; }

# 1. --addressing-style virtual at a custom endpoint: multipart, a folder, list, get
rules "[$V]"
check "virtual: multipart publish --verify" "$FGPACK" publish "$WORK/src/big.bin" "$T/v" --endpoint "$LH" \
	--addressing-style virtual --part-size 5M --jobs 2 --verify --json
cp "$WORK/.out" "$WORK/out/v.json"
check "virtual: 3 parts sent" test "$(jget "$WORK/out/v.json" "d['stats']['parts_sent']" 2>/dev/null)" = 3
check "virtual: the server's file is the source" cmp -s "$WORK/s3/vbk/v%2Fbig.bin" "$WORK/src/big.bin"
check "virtual: every request to Host vbk.s3.localhost:$port" test "$(hosts)" = "vbk.s3.localhost:$port"
check "virtual: no request with the bucket in its path" test "$(inpath)" = 0
check "virtual: a folder with odd names" "$FGPACK" publish "$WORK/src/d" "$T/d" --endpoint "$LH" \
	--addressing-style virtual --verify
check "virtual: --ls lists the bucket at /?list-type=2" "$FGPACK" publish --ls "$T/d" --endpoint "$LH" \
	--addressing-style virtual --page-size 1 --json
check "virtual: both keys listed in 2 pages" test "$(jget "$WORK/.out" "sorted(o['key'] for o in d['objects']), d['pages']" 2>/dev/null)" = \
	"(['d/f 1.txt', 'd/é+~.txt'], 2)"
check_grep "virtual: the listing went to /?...list-type=2" '"path": "/\?encoding-type=url&list-type=2' "$WORK/s3.log"
check "virtual: --get --range" "$FGPACK" publish --get "$T/v/big.bin" -o "$WORK/out/range.bin" \
	--range 5000000-5999999 --endpoint "$LH" --addressing-style virtual
check "virtual: the right million bytes" sh -c "tail -c +5000001 '$WORK/src/big.bin' | head -c 1000000 | cmp - '$WORK/out/range.bin'"

# 2. the same from the AWS CLI's config file; the flag wins over it
printf '[profile vh]\ns3 =\n    addressing_style = virtual\n' >"$WORK/awsconfig"
rules "[$V]"
check "config file: addressing_style = virtual" env AWS_CONFIG_FILE="$WORK/awsconfig" AWS_PROFILE=vh \
	"$FGPACK" publish --get "$T/d/f 1.txt" -o "$WORK/out/f1" --endpoint "$LH"
check "config file: read back" cmp -s "$WORK/out/f1" "$WORK/src/d/f 1.txt"
check_exit "config file virtual, --addressing-style path: path-style (refused here)" 1 env AWS_CONFIG_FILE="$WORK/awsconfig" \
	AWS_PROFILE=vh "$FGPACK" publish --get "$T/d/f 1.txt" -o "$WORK/out/f1" --endpoint "$LH" --addressing-style path
check_grep "  the server's refusal is the message" "HTTP 400 InvalidRequest" "$WORK/.out"
check_exit "bad --addressing-style: usage error" 2 "$FGPACK" publish --get "$T/d/f 1.txt" -o "$WORK/out/f1" \
	--endpoint "$LH" --addressing-style Virtual

# 3. auto at a custom endpoint is path-style (botocore's auto)
rules "[$V]"
check_exit "auto at s3.localhost: path-style (refused by this vhost-only server)" 1 "$FGPACK" publish --get \
	"$T/d/f 1.txt" -o "$WORK/out/f1" --endpoint "$LH"
check "  the bucket was in the path" test "$(inpath)" -ge 1

# 4. auto at AWS's own host: virtual-hosted, signed for the host's region
rules "[$V]"
check "auto at s3.us-east-1.amazonaws.com (--connect-to): publish" "$FGPACK" publish "$WORK/src/big.bin" "$T/a" \
	--endpoint "$AWSEP" $CT --part-size 5M --verify
check "  every request to Host vbk.s3.us-east-1.amazonaws.com:$port" test "$(hosts)" = "vbk.s3.us-east-1.amazonaws.com:$port"
check "  signed for us-east-1" test "$(python3 -c "import json,sys; print({r['region'] for r in map(json.loads, open(sys.argv[1]))})" "$WORK/s3.log")" = "{'us-east-1'}"
rules "[$V, {\"fault\":\"region\",\"name\":\"eu-west-1\"}]"
check "auto at s3.eu-west-1.amazonaws.com, no --region: publish" "$FGPACK" publish "$WORK/src/d/f 1.txt" "$T/r0" \
	--endpoint "http://s3.eu-west-1.amazonaws.com:$port" $CT
check "  signed for eu-west-1 from the first request (no 400)" test "$(python3 -c "import json,sys; rs=[json.loads(l) for l in open(sys.argv[1])]; print(sum(r['status'] == 400 for r in rs), {r['region'] for r in rs})" "$WORK/s3.log")" = "0 {'eu-west-1'}"

# 5. the bucket lives in eu-west-1; the endpoint says us-east-1: AWS answers
# 301 PermanentRedirect (x-amz-bucket-region) until both the signature and
# the host name eu-west-1
for style in virtual path; do
	# path-style: the server takes the bucket from the path, as AWS still does
	r='{"fault":"region","name":"eu-west-1","style":"301"}'
	if [ $style = virtual ]; then rules "[$V, $r]"; else rules "[$r]"; fi
	check "301 to eu-west-1, $style: publish" "$FGPACK" publish "$WORK/src/big.bin" "$T/r301$style" \
		--endpoint "$AWSEP" $CT --part-size 5M --addressing-style "$style" --verify
	want=vbk.s3.eu-west-1.amazonaws.com:$port
	[ $style = path ] && want=s3.eu-west-1.amazonaws.com:$port
	check "  one 301, then every request to $want" test "$(python3 -c "import json,sys; rs=[json.loads(l) for l in open(sys.argv[1])]; print(sum(r['status'] == 301 for r in rs), {r['host'] for r in rs if r['status'] != 301})" "$WORK/s3.log")" = "1 {'$want'}"
	check "  the server's file is the source" cmp -s "$WORK/s3/vbk/r301$style%2Fbig.bin" "$WORK/src/big.bin"
done

# 6. 400 AuthorizationHeaderMalformed naming the region at a custom
# endpoint: signed again at the same virtual host
rules "[$V, {\"fault\":\"region\",\"name\":\"eu-central-1\"}]"
check "400 naming eu-central-1, virtual at s3.localhost: publish" "$FGPACK" publish "$WORK/src/big.bin" "$T/r400" \
	--endpoint "$LH" --addressing-style virtual --part-size 5M --verify
check "  one 400, then eu-central-1 at vbk.s3.localhost:$port" test "$(python3 -c "import json,sys; rs=[json.loads(l) for l in open(sys.argv[1])]; print(sum(r['status'] == 400 for r in rs), {(r['host'], r['region']) for r in rs if r['status'] != 400})" "$WORK/s3.log")" = "1 {('vbk.s3.localhost:$port', 'eu-central-1')}"
finish
