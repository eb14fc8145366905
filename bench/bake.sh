#!/bin/sh
# bake.sh - `fgpack bake int4` on an E4B-shaped synthetic bf16 checkpoint
# (real tensor names and shapes from tests/int4/int4ref.py; BAKE_LAYERS of the
# 42 decoder layers, default 8 to fit a small disk), side by side with
#   - cat of the same safetensors files to /dev/null (the read floor),
#   - the vectorised numpy implementation of the same quantizer
#     (tests/int4/int4ref.py quant, Debian's python3-numpy).
# Reports wall time, GB/s of bf16 input, CPU seconds and peak RSS
# (/usr/bin/time -v), and the machine's load average (the 2 cores are shared).
#   BAKE_LAYERS=42 sh bench/bake.sh     # the full E4B body (about 16 GB input)
#   BAKE_DIR=/path                       # where the checkpoints go
#   BAKE_SKIP_NUMPY=1                    # leave numpy out (it takes minutes)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
FGPACK=${FGPACK:-$top/fgpack}
layers=${BAKE_LAYERS:-8}
dir=${BAKE_DIR:-/tmp/fgpack-bench-bake}
src=$dir/e4b-L$layers
mkdir -p "$dir"
[ -x /usr/bin/time ] || { echo "bake.sh: needs /usr/bin/time (Debian package time)" >&2; exit 1; }
if [ ! -f "$src/config.json" ]; then
	echo "== generating an E4B-shaped checkpoint with $layers layers in $src" >&2
	$PY "$top/tests/int4/int4ref.py" make "$src.part" --shape e4b --layers "$layers" --shards 4
	mv "$src.part" "$src"
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

# run NAME CMD...: one timed run; prints "NAME wall user sys maxrss_kb".
run() {
	name=$1
	shift
	/usr/bin/time -v "$@" >"$dir/$name.out" 2>"$dir/$name.time" || {
		cat "$dir/$name.time" >&2
		exit 1
	}
	awk -v n="$name" '
		/Elapsed \(wall clock\)/ { split($NF, t, ":"); w = (length(t) == 3) ? t[1] * 3600 + t[2] * 60 + t[3] : t[1] * 60 + t[2] }
		/User time/ { u = $NF } /System time/ { s = $NF } /Maximum resident/ { r = $NF }
		END { printf "%s %.2f %.2f %.2f %d\n", n, w, u, s, r }' "$dir/$name.time"
}

cat "$src"/*.safetensors >/dev/null # warm the page cache: every run reads from memory
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-22s %8s %8s %8s %8s %10s %8s\n' run wall_s GB/s user_s sys_s peakRSS_MB GB/cpu_s
report() { # name wall user sys rss
	awk -v n="$1" -v w="$2" -v u="$3" -v s="$4" -v r="$5" -v b="$bytes" 'BEGIN {
		printf "%-22s %8.2f %8.2f %8.2f %8.2f %10.0f %8.2f\n", n, w, b / 1e9 / w, u, s, r / 1024, b / 1e9 / (u + s + 1e-9) }'
}
set -- $(run cat sh -c "cat '$src'/*.safetensors >/dev/null")
[ $# -eq 5 ] || exit 1
report "cat > /dev/null" "$2" "$3" "$4" "$5"
cat_wall=$2
rm -rf "$dir/out-nosync" "$dir/out-nosync.intoto.json"
set -- $(run bake_nosync "$FGPACK" bake int4 "$src" "$dir/out-nosync" -j 2 --no-sync)
[ $# -eq 5 ] || exit 1
report "fgpack -j2 --no-sync" "$2" "$3" "$4" "$5"
bake_wall=$2
bake_rss=$5
rm -rf "$dir/out-sync" "$dir/out-sync.intoto.json"
set -- $(run bake_sync "$FGPACK" bake int4 "$src" "$dir/out-sync" -j 2)
[ $# -eq 5 ] || exit 1
report "fgpack -j2 (fsync)" "$2" "$3" "$4" "$5"
cmp "$dir/bake_nosync.out" "$dir/bake_sync.out" >/dev/null 2>&1 ||
	[ "$(cut -d' ' -f1 "$dir/bake_nosync.out")" = "$(cut -d' ' -f1 "$dir/bake_sync.out")" ] ||
	{ echo "bake.sh: the two bakes differ" >&2; exit 1; }
if [ -z "${BAKE_SKIP_NUMPY:-}" ]; then
	rm -rf "$dir/out-numpy"
	set -- $(run numpy $PY "$top/tests/int4/int4ref.py" quant "$src" "$dir/out-numpy")
[ $# -eq 5 ] || exit 1
	report "numpy (same quantizer)" "$2" "$3" "$4" "$5"
	numpy_wall=$2
	rm -rf "$dir/out-numpy"
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v b="$bytes" -v l="$layers" -v big="$largest" -v r="$bake_rss" 'BEGIN {
	printf "input %.3f GB (%d of 42 layers), largest tensor %.0f MB; peak RSS limit 3x + 256 MB = %.0f MB, used %.0f MB\n",
		b / 1e9, l, big / 1e6, (3 * big + 256e6) / 1e6, r / 1024 }'
awk -v c="$cat_wall" -v f="$bake_wall" -v n="${numpy_wall:-0}" 'BEGIN {
	printf "ratios: fgpack/cat wall %.2fx", f / c
	if (n > 0) printf ", numpy/fgpack wall %.2fx", n / f
	printf "\n" }'
rm -rf "$dir/out-nosync" "$dir/out-sync" "$dir"/out-*.intoto.json
