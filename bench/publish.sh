#!/bin/sh
# publish.sh - multipart upload of one bundle-sized file to s3rver on
# loopback: `fgpack publish` against `aws s3 cp` (Debian awscli), same part
# size and same number of parts in flight, runs alternated, medians and the
# ratio printed. Both sign every part's payload (plain http endpoint).
# fgpack publish also hashes the whole file first (for the lock entry) and
# lists + HEADs the result afterwards; that work is inside its time. The
# server (s3rver, node) is the bottleneck on a small machine, so the client's
# CPU time is printed too.
#   FG_BENCH_PUBLISH_MB  file size in MiB (default 2048)
#   FG_BENCH_PART_MB     part size in MiB (default 64)
#   FG_BENCH_JOBS        parts in flight (default 8)
#   FG_BENCH_RUNS        runs per tool (default 3)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
MB=${FG_BENCH_PUBLISH_MB:-2048}
PART=${FG_BENCH_PART_MB:-64}
JOBS=${FG_BENCH_JOBS:-8}
RUNS=${FG_BENCH_RUNS:-3}
AWS=/usr/bin/aws
[ -x "$AWS" ] || AWS=aws
W=$(mktemp -d "${TMPDIR:-/tmp}/fgbench.XXXXXX")
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
mkdir -p "$W/s3" "$W/home"
node --openssl-legacy-provider tests/servers/s3rver.js "$PORT" "$W/s3" bench >"$W/s3rver.log" 2>&1 &
S3PID=$!
trap 'kill $S3PID 2>/dev/null; rm -rf "$W"' EXIT INT TERM
i=0
until python3 -c "import socket,sys; s=socket.socket(); sys.exit(s.connect_ex(('127.0.0.1',$PORT)))" 2>/dev/null; do
	i=$((i + 1)); [ $i -lt 100 ] || { echo "s3rver did not start" >&2; exit 1; }; sleep 0.1
done
EP=http://127.0.0.1:$PORT
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1
export AWS_SHARED_CREDENTIALS_FILE=$W/none FGPACK_HOME=$W/home
cat >"$W/aws.conf" <<CONF
[default]
s3 =
  multipart_threshold = ${PART}MB
  multipart_chunksize = ${PART}MB
  max_concurrent_requests = $JOBS
CONF
export AWS_CONFIG_FILE=$W/aws.conf
# a real (if minimal) bundle: bundle.json + one incompressible weight file, tar.zst
mkdir -p "$W/b/components/weights"
head -c $((MB * 1048576)) /dev/urandom >"$W/b/components/weights/model.safetensors"
echo '{"schema": 1, "name": "bench"}' >"$W/b/bundle.json"
(cd "$W/b" && tar -cf - bundle.json components) | zstd -q -1 -T0 >"$W/bench.fgb"
rm -rf "$W/b"
echo "publish bench: $(($(stat -c %s "$W/bench.fgb") / 1048576)) MiB bundle, ${PART} MiB parts, $JOBS in flight, $RUNS runs each, s3rver on loopback, $(nproc) cores"

# wall time, and the client's own CPU time (user + system) from /usr/bin/time
T=/usr/bin/time
fg_t="" aws_t="" fg_c="" aws_c=""
r=0
while [ $r -lt "$RUNS" ]; do
	r=$((r + 1))
	# a failed upload (s3rver sometimes answers 500 under load) is reported
	# and the pair is run again, at most twice
	if ! $T -f "%e %U %S" -o "$W/fg.time" ./fgpack publish "$W/bench.fgb" hf://buckets/ns/bench/fg \
		--endpoint "$EP" --part-size "${PART}M" --jobs "$JOBS" --json >"$W/fg.json" ||
		! $T -f "%e %U %S" -o "$W/aws.time" "$AWS" --endpoint-url "$EP" s3 cp --only-show-errors \
			"$W/bench.fgb" s3://bench/aws/bench.fgb; then
		fails=$((${fails:-0} + 1))
		echo "run $r failed (server said: $(grep -c ' 500 ' "$W/s3rver.log") HTTP 500 so far); again" >&2
		[ "$fails" -le 2 ] || exit 1
		"$AWS" --endpoint-url "$EP" s3 rm --only-show-errors --recursive s3://bench/ >/dev/null || true
		r=$((r - 1))
		continue
	fi
	read -r fw fu fs <"$W/fg.time"
	read -r aw au as <"$W/aws.time"
	fg_t="$fg_t $fw" aws_t="$aws_t $aw"
	fg_c="$fg_c $(echo "$fu + $fs" | bc)" aws_c="$aws_c $(echo "$au + $as" | bc)"
	parts=$(python3 -c "import json; d=json.load(open('$W/fg.json')); print(d['stats']['parts_total'] - 1)")
	echo "run $r: fgpack $fw s wall, $(echo "$fu + $fs" | bc) s cpu ($parts parts)   aws s3 cp $aw s wall, $(echo "$au + $as" | bc) s cpu   load $(cut -d' ' -f1 /proc/loadavg)"
	"$AWS" --endpoint-url "$EP" s3 rm --only-show-errors --recursive s3://bench/ >/dev/null
done
python3 - "$MB" "$fg_t" "$aws_t" "$fg_c" "$aws_c" <<'PY'
import statistics, sys
mb = float(sys.argv[1])
fg, aw, fc, ac = (statistics.median(map(float, a.split())) for a in sys.argv[2:6])
print(f"median wall: fgpack publish {fg:.2f} s ({mb / fg:.0f} MiB/s), aws s3 cp {aw:.2f} s ({mb / aw:.0f} MiB/s)")
print(f"median client cpu: fgpack {fc:.2f} s, aws s3 cp {ac:.2f} s")
print(f"ratio aws/fgpack: wall {aw / fg:.2f}x, client cpu {ac / fc:.2f}x (above 1: fgpack better)")
PY
