#!/bin/sh
# bake.sh - `fgpack bake int4` on an E4B-shaped synthetic bf16 checkpoint
# (real tensor names and shapes from tests/int4/int4ref.py; BAKE_LAYERS of the
# 42 decoder layers, default 8 to fit a small disk), in two forms:
#   - plain:  a folder of ordinary files (every input byte is hashed);
#   - pulled: the same files pulled into an fgpack store (file://) and
#             hard-linked out of it by `fgpack pull --into`, as a user's
#             checkpoint is; inputs whose store stamp holds are named by their
#             blob instead of hashed (docs/formats/int4.md),
# side by side, in alternated rounds (cat, cp, sha256sum, bake plain, bake
# pulled, [baseline binary]), with
#   - cat of the safetensors files to /dev/null (the read floor),
#   - cp of them to a new folder (read + write: copy_file_range in the kernel),
#   - sha256sum of them (coreutils, one core),
#   - numpy running the same quantizer (tests/int4/int4ref.py quant, one run).
# Prints per row the median wall time, GB/s of input (wall), user and system
# CPU seconds, GB per CPU-second and peak RSS (/usr/bin/time), then the ratios
# and the issue's targets, with the load average (the 2 cores are shared).
#   BAKE_LAYERS=42 sh bench/bake.sh     # the full E4B body (about 16 GB input)
#   BAKE_DIR=/path                       # where the checkpoints go
#   BAKE_RUNS=3                          # alternated rounds; medians shown
#   BAKE_SHA_RUNS=1                      # rounds that include sha256sum (20 s each)
#   BAKE_SKIP_NUMPY=1                    # leave numpy out (over a minute)
#   BAKE_BASELINE=/path/to/old/fgpack    # add its plain bake to every round
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
FGPACK=${FGPACK:-$top/fgpack}
layers=${BAKE_LAYERS:-8}
runs=${BAKE_RUNS:-3}
dir=${BAKE_DIR:-/tmp/fgpack-bench-bake}
src=$dir/e4b-L$layers
store=$dir/store-L$layers
pulled=$dir/pulled-L$layers/m
t_start=$(date +%s)
mkdir -p "$dir"
[ -x /usr/bin/time ] || { echo "bake.sh: needs /usr/bin/time (Debian package time)" >&2; exit 1; }
if [ ! -f "$src/config.json" ]; then
	echo "== generating an E4B-shaped checkpoint with $layers layers in $src" >&2
	$PY "$top/tests/int4/int4ref.py" make "$src.part" --shape e4b --layers "$layers" --shards 4
	mv "$src.part" "$src"
fi
if [ ! -f "$pulled/config.json" ]; then
	echo "== pulling it into the store $store (file://), hard-linked under $pulled" >&2
	printf '{"name": "bench", "env": {"WEIGHTS_BUCKET": "file://%s", "LOCAL_MODEL_DIR": "/m"}}\n' \
		"$src" >"$dir/pull-L$layers.json"
	FGPACK_HOME=$store "$FGPACK" pull "$dir/pull-L$layers.json" --lock "$dir/pull-L$layers.lock" \
		--into "$dir/pulled-L$layers" >/dev/null
fi
bytes=$(cat "$src"/*.safetensors | wc -c)
largest=$($PY - "$src" <<'EOF'
import sys, os, json, struct
m = 0
for f in os.listdir(sys.argv[1]):
    if f.endswith(".safetensors"):
        with open(os.path.join(sys.argv[1], f), "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            for k, v in json.loads(fh.read(n)).items():
                if k != "__metadata__":
                    m = max(m, v["data_offsets"][1] - v["data_offsets"][0])
print(m)
EOF
)

# one NAME CMD...: one timed run (outputs removed and dirty pages written back
# first, so one run's writeback does not land in the next); appends
# "wall user sys maxrss_kb" to NAME.runs.
one() {
	name=$1
	shift
	rm -rf "$dir/out" "$dir/out.intoto.json" "$dir/cp-out"
	sync
	/usr/bin/time -f '%e %U %S %M' -o "$dir/$name.t" "$@" >"$dir/$name.out" 2>"$dir/$name.err" || {
		cat "$dir/$name.err" >&2
		exit 1
	}
	cat "$dir/$name.t" >>"$dir/$name.runs"
}
# med NAME: "wall user sys rss", each the median over NAME.runs
med() {
	for col in 1 2 3 4; do
		cut -d' ' -f$col "$dir/$1.runs" | sort -g | awk '{ v[NR] = $1 } END { printf "%s ", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
	done
}
row() { # label wall user sys rss
	awk -v n="$1" -v w="$2" -v u="$3" -v s="$4" -v r="$5" -v b="$bytes" 'BEGIN {
		printf "| %-44s | %7.2f | %6.2f | %6.2f | %6.2f | %6.2f | %7.0f |\n", n, w, b / 1e9 / w, u, s, b / 1e9 / (u + s + 1e-9), r / 1024 }'
}

# the bakes: one store for both, so only the input folder differs
bake() { # NAME FGPACK SRC [options]
	bn=$1 bf=$2 bs=$3
	shift 3
	one "$bn" env FGPACK_HOME="$store" "$bf" bake int4 "$bs" "$dir/out" -j 2 "$@"
}
rounds="cat cp sha256sum plain pulled"
[ -n "${BAKE_BASELINE:-}" ] && rounds="$rounds baseline"
for n in $rounds fsync numpy; do : >"$dir/$n.runs"; done
cat "$src"/*.safetensors "$pulled"/*.safetensors >/dev/null # warm the page cache
load0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average before: $load0"
i=0
while [ $i -lt "$runs" ]; do
	one cat sh -c "cat '$src'/*.safetensors >/dev/null"
	one cp sh -c "mkdir '$dir/cp-out' && cp '$src'/*.safetensors '$dir/cp-out/'"
	[ $i -lt "${BAKE_SHA_RUNS:-1}" ] && one sha256sum sh -c "sha256sum '$src'/*.safetensors >/dev/null"
	bake plain "$FGPACK" "$src" --no-sync
	cp "$dir/plain.out" "$dir/plain.digest"
	bake pulled "$FGPACK" "$pulled" --no-sync
	[ "$(cut -d' ' -f1 "$dir/plain.digest")" = "$(cut -d' ' -f1 "$dir/pulled.out")" ] ||
		{ echo "bake.sh: the plain and pulled bakes differ" >&2; exit 1; }
	if [ -n "${BAKE_BASELINE:-}" ]; then
		bake baseline "$BAKE_BASELINE" "$src" --no-sync
		[ "$(cut -d' ' -f1 "$dir/plain.digest")" = "$(cut -d' ' -f1 "$dir/baseline.out")" ] ||
			{ echo "bake.sh: the baseline binary's bake differs" >&2; exit 1; }
	fi
	echo "  round $((i + 1)) of $runs done, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	i=$((i + 1))
done
bake fsync "$FGPACK" "$pulled"
named=$(grep -o 'not hashed): [0-9]* files, [0-9.]* GB' "$dir/pulled.err" || echo "not hashed): none")
if [ -z "${BAKE_SKIP_NUMPY:-}" ]; then
	one numpy $PY "$top/tests/int4/int4ref.py" quant "$src" "$dir/out"
fi
load1=$(cut -d' ' -f1-3 /proc/loadavg)
rm -rf "$dir/out" "$dir/out.intoto.json" "$dir/cp-out"

echo
echo "input: $(awk -v b="$bytes" 'BEGIN { printf "%.3f GB", b / 1e9 }') of bf16 safetensors ($layers of 42 E4B layers), page cache warm;"
echo "median of $runs alternated rounds (sha256sum: ${BAKE_SHA_RUNS:-1}, fsync and numpy: 1 run); load average $load0 before, $load1 after"
echo "pulled bake: inputs named by their store blob ($named"
echo
echo "| run                                          |  wall s |  GB/s  | user s |  sys s | GB/CPU-s | peak RSS MB |"
echo "| -------------------------------------------- | ------- | ------ | ------ | ------ | -------- | ----------- |"
label() {
	case $1 in
	cat) echo "cat *.safetensors > /dev/null (read floor)" ;;
	cp) echo "cp *.safetensors DIR (read + write floor)" ;;
	sha256sum) echo "sha256sum *.safetensors (coreutils)" ;;
	plain) echo "fgpack bake int4 -j2 --no-sync, plain folder" ;;
	pulled) echo "fgpack bake int4 -j2 --no-sync, pulled" ;;
	baseline) echo "baseline binary, plain folder" ;;
	fsync) echo "fgpack bake int4 -j2 (fsync), pulled, 1 run" ;;
	numpy) echo "numpy, same quantizer, 1 run" ;;
	esac
}
for n in $rounds fsync numpy; do
	[ -s "$dir/$n.runs" ] || continue
	# shellcheck disable=SC2046
	row "$(label $n)" $(med $n)
	eval "w_$n=\$(med $n | cut -d' ' -f1)"
	eval "c_$n=\$(med $n | awk '{ print \$2 + \$3 }')"
	eval "r_$n=\$(med $n | cut -d' ' -f4)"
done
echo
# shellcheck disable=SC2154
awk -v b="$bytes" -v wc="$w_cat" -v cc="$c_cat" -v wp="$w_cp" -v ws="$w_sha256sum" \
    -v w1="$w_plain" -v c1="$c_plain" -v w2="$w_pulled" -v c2="$c_pulled" \
    -v wn="${w_numpy:-0}" -v cn="${c_numpy:-0}" -v wb="${w_baseline:-0}" -v cb="${c_baseline:-0}" \
    -v r1="$r_plain" -v r2="$r_pulled" -v big="$largest" -v l="$layers" 'BEGIN {
	printf "ratios (medians)         plain folder        pulled\n"
	printf "  fgpack / cat     wall  %6.2fx            %6.2fx\n", w1 / wc, w2 / wc
	printf "  fgpack / cat     CPU   %6.2fx            %6.2fx\n", c1 / cc, c2 / cc
	printf "  fgpack / cp      wall  %6.2fx            %6.2fx\n", w1 / wp, w2 / wp
	printf "  fgpack / sha256sum wall %5.2fx            %6.2fx\n", w1 / ws, w2 / ws
	if (wn > 0) printf "  numpy / fgpack   wall  %6.2fx            %6.2fx   (CPU %.1fx, %.1fx)\n", wn / w1, wn / w2, cn / c1, cn / c2
	if (wb > 0) printf "  baseline / fgpack wall %6.2fx            %6.2fx   (CPU %.2fx, %.2fx)\n", wb / w1, wb / w2, cb / c1, cb / c2
	printf "targets: >= 1 GB/s of input (wall): plain %.2f, pulled %.2f GB/s -> %s\n", b / 1e9 / w1, b / 1e9 / w2,
		(b / 1e9 / w2 >= 1) ? "met (pulled)" : "not met"
	printf "         within 1.5x of cat (wall): plain %.2fx, pulled %.2fx -> %s\n", w1 / wc, w2 / wc,
		(w2 / wc <= 1.5) ? "met (pulled)" : "not met"
	if (l == 42) printf "         full E4B body in < 10 s: pulled %.1f s -> %s\n", w2, (w2 < 10) ? "met" : "not met"
	else printf "         full E4B body (14.956 GB) in < 10 s: %.1f s at the pulled rate (an extrapolation; BAKE_LAYERS=42 measures it)\n", 14.956 * w2 / (b / 1e9)
	printf "peak RSS: plain %.0f MB, pulled %.0f MB; limit largest tensor (%.0f MB) x 3 + 256 MB = %.0f MB\n",
		r1 / 1024, r2 / 1024, big / 1e6, (3 * big + 256e6) / 1e6
}'
echo "bench/bake.sh took $(($(date +%s) - t_start)) s"
