#!/bin/sh
# engine_cpu.sh - the CPU engine, measured side by side in one run:
#  1. tokens/s of `fgpack run` on the tiny oracle models (bf16, INT4), -j1/-j2
#  2. ms per layer of a decode step on E4B-shaped layers (hidden 2560, MLP
#     10240, 8/2 heads, head dims 256/512, PLE 256; one sliding + one full
#     layer by default, BENCH_LAYERS=N for more), bf16 and INT4 g128, against
#     numpy (python3-numpy and its BLAS) running the same layers
#  3. bytes of weights read per decode step vs numpy's measured read bandwidth
# Medians of BENCH_REPS runs (default 3). Needs ~600 MB in build/bench/.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
PY=/usr/bin/python3
REPS=${BENCH_REPS:-3}
LAYERS=${BENCH_LAYERS:-2}
dir=build/bench/e4b-$LAYERS
[ -x ./fgpack ] || make -j2 fgpack >/dev/null
if [ ! -f "$dir/int4/model.safetensors" ]; then
	echo "making $dir (E4B-shaped, $LAYERS layers, random weights)..." >&2
	$PY bench/engine_layer.py make "$dir" "$LAYERS"
fi
field() { $PY -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
tps() { # model ids n threads -> median tokens_per_s
	i=0
	while [ $i -lt "$REPS" ]; do
		./fgpack run --model "$1" --ids "$2" -n "$3" -j "$4" --ignore-eos --json | field tokens_per_s
		i=$((i + 1))
	done | median
}
cpu_ms() { # model ids -> median CPU ms (user+sys) of one decode step at -j1:
	# (CPU time of 17 new tokens - CPU time of 1) / 16, which cancels loading and prefill
	i=0
	while [ $i -lt "$REPS" ]; do
		a=$(/usr/bin/time -f "%U %S" ./fgpack run --model "$1" --ids "$2" -n 1 -j 1 --ignore-eos 2>&1 >/dev/null | tail -1)
		b=$(/usr/bin/time -f "%U %S" ./fgpack run --model "$1" --ids "$2" -n 17 -j 1 --ignore-eos 2>&1 >/dev/null | tail -1)
		echo "$a $b" | awk '{printf "%.2f\n", (($3 + $4) - ($1 + $2)) * 1000 / 16}'
		i=$((i + 1))
	done | median
}
echo "# engine CPU bench: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo
echo "## tiny model (tests/fixtures/oracle, 8 layers, hidden 96), 100 tokens after a 1-token prompt"
echo "| weights | -j1 tok/s | -j2 tok/s |"
echo "| --- | --- | --- |"
for v in bf16 int4; do
	echo "| $v | $(tps tests/fixtures/oracle/$v 2 100 1) | $(tps tests/fixtures/oracle/$v 2 100 2) |"
done
echo
bw=$($PY bench/engine_layer.py bandwidth 512)
ids=2,5,9,100,200,300,400,500,600,700,800,900,1000,1100,1200,1300
echo "## E4B-shaped layers ($LAYERS: $((LAYERS - 1)) sliding + 1 full), decode steps after a 16-token prompt"
echo "numpy single-thread read bandwidth: $bw GB/s"
echo
echo "| weights | engine -j1 ms/layer | engine -j2 ms/layer | numpy ms/layer | numpy / engine -j1 | MB read per step | engine -j1 GB/s | % of numpy read bw | engine CPU ms/layer | GB per CPU-second |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for v in bf16 int4; do
	t1=$(tps "$dir/$v" $ids 8 1)
	t2=$(tps "$dir/$v" $ids 8 2)
	np=$($PY bench/engine_layer.py numpy "$dir/$v" 16 "$REPS" | field ms_per_layer)
	bytes=$($PY bench/engine_layer.py bytes "$dir/$v" | field bytes_per_token)
	cpu=$(cpu_ms "$dir/$v" $ids)
	$PY - "$v" "$t1" "$t2" "$np" "$bytes" "$bw" "$LAYERS" "$cpu" <<'PYEOF'
import sys
v, t1, t2, np_ms, b, bw, L, cpu = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7]), float(sys.argv[8])
m1, m2 = 1000 / t1 / L, 1000 / t2 / L
gbs = b * t1 / 1e9
print("| %s | %.1f | %.1f | %.1f | %.2fx | %.0f | %.2f | %.0f%% | %.1f | %.1f |" % (v, m1, m2, np_ms, np_ms / m1, b / 1e6, gbs, 100 * gbs / bw, cpu / L, b / 1e6 / cpu if cpu > 0 else 0))
PYEOF
done
echo
echo "(ms/layer = 1000 / tokens_per_s / layers: it includes the small head over a 2048-token vocab and the"
echo "embedding; numpy runs the layers only, with fp32 weights widened once from bf16, or INT4 dequantized every step;"
echo "CPU ms/layer = user+sys CPU time of one decode step at -j1 / layers, from 17- and 1-token runs)"
