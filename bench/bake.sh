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
#   BAKE_RUNS=3 BAKE_NUMPY_RUNS=1        # runs per row; the table shows medians
# Beside cat (the read floor) it times cp of the same files (read + write into
# the page cache) and sha256sum of the inputs (one core's hashing floor):
# the bake reads, writes and hashes every byte in and out.
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
printf '%-26s %8s %8s %8s %8s %10s %8s\n' run wall_s GB/s user_s sys_s peakRSS_MB GB/cpu_s
report() { # name wall user sys rss
	awk -v n="$1" -v w="$2" -v u="$3" -v s="$4" -v r="$5" -v b="$bytes" 'BEGIN {
		printf "%-26s %8.2f %8.2f %8.2f %8.2f %10.0f %8.2f\n", n, w, b / 1e9 / w, u, s, r / 1024, b / 1e9 / (u + s + 1e-9) }'
}
# median NAME RUNS CMD...: RUNS timed runs (outputs removed before each, the
# kernel's dirty pages written back so one run's writeback does not land in the
# next); prints "NAME wall user sys rss", each the median over the runs.
median() {
	mname=$1
	mruns=$2
	shift 2
	: >"$dir/$mname.runs"
	i=0
	while [ $i -lt "$mruns" ]; do
		rm -rf "$dir/out" "$dir/out.intoto.json" "$dir/cp-out"
		sync
		run "$mname" "$@" >>"$dir/$mname.runs"
		i=$((i + 1))
	done
	for col in 2 3 4 5; do
		cut -d' ' -f$col "$dir/$mname.runs" | sort -g | awk '{ v[NR] = $1 } END { printf "%s ", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
	done >"$dir/$mname.med"
	echo "$mname $(cat "$dir/$mname.med")"
}
runs=${BAKE_RUNS:-3}
echo "median of $runs runs each (numpy: ${BAKE_NUMPY_RUNS:-1})"
set -- $(median cat "$runs" sh -c "cat '$src'/*.safetensors >/dev/null")
report "cat > /dev/null" "$2" "$3" "$4" "$5"
cat_wall=$2
cat_cpu=$(echo "$3 $4" | awk '{ print $1 + $2 }')
set -- $(median cp "$runs" sh -c "mkdir '$dir/cp-out' && cp '$src'/*.safetensors '$dir/cp-out/'")
report "cp (read + write)" "$2" "$3" "$4" "$5"
cp_wall=$2
set -- $(median sha256sum "$runs" sh -c "sha256sum '$src'/*.safetensors >/dev/null")
report "sha256sum (inputs only)" "$2" "$3" "$4" "$5"
sha_wall=$2
set -- $(median bake_nosync "$runs" "$FGPACK" bake int4 "$src" "$dir/out" -j 2 --no-sync)
report "fgpack -j2 --no-sync" "$2" "$3" "$4" "$5"
bake_wall=$2
bake_cpu=$(echo "$3 $4" | awk '{ print $1 + $2 }')
bake_rss=$5
cp "$dir/bake_nosync.out" "$dir/digest.nosync"
set -- $(median bake_sync 1 "$FGPACK" bake int4 "$src" "$dir/out" -j 2)
report "fgpack -j2 (fsync, 1 run)" "$2" "$3" "$4" "$5"
[ "$(cut -d' ' -f1 "$dir/digest.nosync")" = "$(cut -d' ' -f1 "$dir/bake_sync.out")" ] ||
	{ echo "bake.sh: the two bakes differ" >&2; exit 1; }
if [ -z "${BAKE_SKIP_NUMPY:-}" ]; then
	set -- $(median numpy "${BAKE_NUMPY_RUNS:-1}" $PY "$top/tests/int4/int4ref.py" quant "$src" "$dir/out")
	report "numpy (same quantizer)" "$2" "$3" "$4" "$5"
	numpy_wall=$2
	numpy_cpu=$(echo "$3 $4" | awk '{ print $1 + $2 }')
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v b="$bytes" -v l="$layers" -v big="$largest" -v r="$bake_rss" 'BEGIN {
	printf "input %.3f GB (%d of 42 layers), largest tensor %.0f MB; peak RSS limit 3x + 256 MB = %.0f MB, used %.0f MB\n",
		b / 1e9, l, big / 1e6, (3 * big + 256e6) / 1e6, r / 1024 }'
awk -v c="$cat_wall" -v cc="$cat_cpu" -v p="$cp_wall" -v h="$sha_wall" -v f="$bake_wall" -v fc="$bake_cpu" \
    -v n="${numpy_wall:-0}" -v nc="${numpy_cpu:-0}" 'BEGIN {
	printf "ratios (medians): fgpack/cat wall %.2fx, CPU %.2fx; fgpack/cp wall %.2fx; fgpack/sha256sum wall %.2fx", f / c, fc / cc, f / p, f / h
	if (n > 0) printf "; numpy/fgpack wall %.2fx, CPU %.2fx", n / f, nc / fc
	printf "\n" }'
rm -rf "$dir/out" "$dir/out.intoto.json" "$dir/cp-out"
