#!/bin/sh
# bake.sh - `fgpack bake int4` on an E4B-shaped synthetic bf16 checkpoint
# (real tensor names and shapes from tests/int4/int4ref.py; BAKE_LAYERS of the
# 42 decoder layers, default 8 to fit a small disk), in two forms:
#   - plain:  a folder of ordinary files (every input byte is hashed);
#   - pulled: the same files pulled into an fgpack store (file://) and
#             hard-linked out of it by `fgpack pull --into`, as a user's
#             checkpoint is; inputs whose store stamp holds are named by their
#             blob instead of hashed (docs/formats/int4.md),
#   - seen:   the plain folder again, its inputs named by the store's seen
#             records that the plain bakes keep (--rehash on those: they
#             hash every input whatever the store says),
# side by side, in alternated rounds (cat, cp, sha256sum, bake plain, bake
# pulled, [baseline binary]), with
#   - cat of the safetensors files to /dev/null (the read floor),
#   - cp of them to a new folder (read + write: copy_file_range in the kernel),
#   - sha256sum of them (coreutils, one core),
#   - numpy running the same quantizer (tests/int4/int4ref.py quant, one run),
# and the two floors the bake cannot go below whatever its design, measured
# on the bake's own output in the same rounds:
#   - write: dd of as many bytes as the bake writes into a new file, its size
#     reserved first with fallocate as the bake does (the page cache's cost
#     for new pages; on this VM it swings several-fold with the state of the
#     host memory, so the printed floor shows it beside, not in, the sum);
#   - outsha: openssl dgst -sha256 of the bake's output files (the digest the
#     statement needs: one SHA-256 stream per file, each on one core).
# Prints per row the median wall time, GB/s of input (wall), user and system
# CPU seconds, GB per CPU-second and peak RSS (/usr/bin/time), then the ratios
# and the issue's targets, with the load average (the 2 cores are shared).
#   BAKE_LAYERS=42 sh bench/bake.sh     # the full E4B body (about 16 GB input)
#   BAKE_DIR=/path                       # where the checkpoints go
#   BAKE_RUNS=3                          # alternated rounds; medians shown
#   BAKE_SHA_RUNS=1                      # rounds that include sha256sum (20 s each)
#   BAKE_SKIP_NUMPY=1                    # leave numpy out (over a minute)
#   BAKE_SKIP_FSYNC=1                    # leave the durable (fsync) bake out
#   BAKE_BASELINE=/path/to/old/fgpack    # add its plain bake to every round
#   BAKE_ROWS="cat pulled"               # only these rows (default: all); the
#                                        # full body: without plain, cp and
#                                        # sha256sum the source folder may be
#                                        # removed once pulled (disk)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/e4b_checkpoint.inc"
FGPACK=${FGPACK:-$top/fgpack}
layers=${BAKE_LAYERS:-8}
runs=${BAKE_RUNS:-3}
dir=${BAKE_DIR:-/tmp/fgpack-bench-bake}
src=$dir/e4b-L$layers
store=$dir/store-L$layers
pulled=$dir/pulled-L$layers/m
rows=${BAKE_ROWS:-cat cp sha256sum plain pulled seen}
has() { case " $rows " in *" $1 "*) return 0 ;; esac; return 1; }
t_start=$(date +%s)
mkdir -p "$dir"
[ -x /usr/bin/time ] || { echo "bake.sh: needs /usr/bin/time (Debian package time)" >&2; exit 1; }
if [ ! -f "$pulled/config.json" ] || has plain || has cp || has sha256sum; then
	e4b_checkpoint "$dir" "$layers"
fi
if [ ! -f "$pulled/config.json" ]; then
	echo "== pulling it into the store $store (file://), hard-linked under $pulled" >&2
	printf '{"name": "bench", "env": {"WEIGHTS_BUCKET": "file://%s", "LOCAL_MODEL_DIR": "/m"}}\n' \
		"$src" >"$dir/pull-L$layers.json"
	FGPACK_HOME=$store "$FGPACK" pull "$dir/pull-L$layers.json" --lock "$dir/pull-L$layers.lock" \
		--into "$dir/pulled-L$layers" >/dev/null
fi
bytes=$(cat "$pulled"/*.safetensors | wc -c)
largest=$($PY - "$pulled" <<'EOF'
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
	[ -n "${keep_out:-}" ] || rm -rf "$dir/out" "$dir/out.intoto.json"
	rm -rf "$dir/cp-out" "$dir/wfloor"
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
rounds=$rows
[ -n "${BAKE_BASELINE:-}" ] && rounds="$rounds baseline"
has pulled && rounds="$rounds outsha write"
for n in cat cp sha256sum plain pulled seen outsha write baseline fsync numpy; do : >"$dir/$n.runs"; done
cat "$pulled"/*.safetensors >/dev/null # warm the page cache
has plain && cat "$src"/*.safetensors >/dev/null
catdir=$pulled
has plain && catdir=$src
load0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average before: $load0"
i=0
while [ $i -lt "$runs" ]; do
	has cat && one cat sh -c "cat '$catdir'/*.safetensors >/dev/null"
	has cp && one cp sh -c "mkdir '$dir/cp-out' && cp '$src'/*.safetensors '$dir/cp-out/'"
	has sha256sum && [ $i -lt "${BAKE_SHA_RUNS:-1}" ] && one sha256sum sh -c "sha256sum '$src'/*.safetensors >/dev/null"
	if has plain; then
		bake plain "$FGPACK" "$src" --no-sync --rehash
		cp "$dir/plain.out" "$dir/plain.digest"
	fi
	# the plain folder named by its seen records (kept by the plain bake
	# before, for files changed 2 s or more before it; builds before
	# 2026-12-05 keep none and hash every input here)
	if has seen && has plain; then
		bake seen "$FGPACK" "$src" --no-sync
		[ "$(cut -d' ' -f1 "$dir/plain.digest")" = "$(cut -d' ' -f1 "$dir/seen.out")" ] ||
			{ echo "bake.sh: the plain and seen bakes differ" >&2; exit 1; }
	fi
	if has pulled; then
		bake pulled "$FGPACK" "$pulled" --no-sync
		if has plain; then
			[ "$(cut -d' ' -f1 "$dir/plain.digest")" = "$(cut -d' ' -f1 "$dir/pulled.out")" ] ||
				{ echo "bake.sh: the plain and pulled bakes differ" >&2; exit 1; }
		fi
		# the floors, on this bake's output (still in the page cache)
		outbytes=$(cat "$dir"/out/*.safetensors | wc -c)
		largest_out=$(for f in "$dir"/out/*.safetensors; do wc -c <"$f"; done | sort -n | tail -n 1)
		keep_out=1 one outsha sh -c "openssl dgst -sha256 '$dir'/out/*.safetensors >/dev/null"
		one write sh -c "fallocate -l $outbytes '$dir/wfloor' && dd if=/dev/zero of='$dir/wfloor' bs=256k count=$((outbytes / 262144)) conv=notrunc 2>/dev/null"
	fi
	if [ -n "${BAKE_BASELINE:-}" ]; then
		bake baseline "$BAKE_BASELINE" "$src" --no-sync --rehash
		[ "$(cut -d' ' -f1 "$dir/plain.digest")" = "$(cut -d' ' -f1 "$dir/baseline.out")" ] ||
			{ echo "bake.sh: the baseline binary's bake differs" >&2; exit 1; }
	fi
	echo "  round $((i + 1)) of $runs done, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	i=$((i + 1))
done
has pulled && [ -z "${BAKE_SKIP_FSYNC:-}" ] && bake fsync "$FGPACK" "$pulled"
named=$(grep -o 'not hashed): [0-9]* files, [0-9.]* GB' "$dir/pulled.err" 2>/dev/null || echo "not hashed): none")
seen_named=$(grep -o 'unchanged since (not hashed): [0-9]* files, [0-9.]* GB' "$dir/seen.err" 2>/dev/null | tail -n 1 || true)
if [ -z "${BAKE_SKIP_NUMPY:-}" ] && [ -f "$src/config.json" ]; then
	one numpy $PY "$top/tests/int4/int4ref.py" quant "$src" "$dir/out"
fi
load1=$(cut -d' ' -f1-3 /proc/loadavg)
rm -rf "$dir/out" "$dir/out.intoto.json" "$dir/cp-out" "$dir/wfloor"
ncpu=$(nproc)

echo
echo "input: $(awk -v b="$bytes" 'BEGIN { printf "%.3f GB", b / 1e9 }') of bf16 safetensors ($layers of 42 E4B layers), page cache warm; $ncpu cores"
echo "median of $runs alternated rounds (sha256sum: ${BAKE_SHA_RUNS:-1}, fsync and numpy: 1 run); load average $load0 before, $load1 after"
has seen && has plain && echo "seen bake (last round): inputs hashed before and ${seen_named:-unchanged since (not hashed): none}"
has pulled && echo "pulled bake: inputs named by their store blob ($named; output $(awk -v b="$outbytes" -v m="$largest_out" 'BEGIN { printf "%.3f GB, largest file %.3f GB", b / 1e9, m / 1e9 }')"
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
	seen) echo "fgpack bake int4 -j2 --no-sync, plain, seen" ;;
	outsha) echo "openssl dgst -sha256 of the bake's output" ;;
	write) echo "fallocate + dd of the output's bytes" ;;
	baseline) echo "baseline binary, plain folder" ;;
	fsync) echo "fgpack bake int4 -j2 (fsync), pulled, 1 run" ;;
	numpy) echo "numpy, same quantizer, 1 run" ;;
	esac
}
for n in cat cp sha256sum plain pulled seen outsha write baseline fsync numpy; do
	[ -s "$dir/$n.runs" ] || continue
	# shellcheck disable=SC2046
	row "$(label $n)" $(med $n)
	eval "w_$n=\$(med $n | cut -d' ' -f1)"
	eval "c_$n=\$(med $n | awk '{ print \$2 + \$3 }')"
	eval "r_$n=\$(med $n | cut -d' ' -f4)"
	eval "u_$n=\$(med $n | cut -d' ' -f2)"
done
echo "(GB/s and GB/CPU-s are of the input's $(awk -v b="$bytes" 'BEGIN { printf "%.3f GB", b / 1e9 }') in every row, also for the two output rows)"
echo
# shellcheck disable=SC2154
awk -v b="$bytes" -v wc="${w_cat:-0}" -v cc="${c_cat:-0}" -v wp="${w_cp:-0}" -v ws="${w_sha256sum:-0}" \
    -v w1="${w_plain:-0}" -v c1="${c_plain:-0}" -v w2="${w_pulled:-0}" -v c2="${c_pulled:-0}" \
    -v wn="${w_numpy:-0}" -v cn="${c_numpy:-0}" -v wb="${w_baseline:-0}" -v cb="${c_baseline:-0}" \
    -v wo="${w_outsha:-0}" -v co="${u_outsha:-0}" -v ww="${w_write:-0}" -v cw="${c_write:-0}" \
    -v ob="${outbytes:-0}" -v om="${largest_out:-0}" -v ncpu="$ncpu" \
    -v r1="${r_plain:-0}" -v r2="${r_pulled:-0}" -v big="$largest" -v l="$layers" '
function x(a, c) { return (a > 0 && c > 0) ? sprintf("%6.2fx", a / c) : "     -" }
BEGIN {
	printf "ratios (medians)         plain folder        pulled\n"
	if (wc > 0) printf "  fgpack / cat     wall  %s            %s\n", x(w1, wc), x(w2, wc)
	if (cc > 0) printf "  fgpack / cat     CPU   %s            %s\n", x(c1, cc), x(c2, cc)
	if (wp > 0) printf "  fgpack / cp      wall  %s            %s\n", x(w1, wp), x(w2, wp)
	if (ws > 0) printf "  fgpack / sha256sum wall %s            %s\n", x(w1, ws), x(w2, ws)
	if (wn > 0) printf "  numpy / fgpack   wall  %s            %s   (CPU %s, %s)\n", x(wn, w1), x(wn, w2), x(cn, c1), x(cn, c2)
	if (wb > 0) printf "  baseline / fgpack wall %s            %s   (CPU %s, %s)\n", x(wb, w1), x(wb, w2), x(cb, c1), x(cb, c2)
	if (co > 0 && cc > 0) {
		# The floor: what any bake of this input must spend, measured above:
		# read the input (cat) and hash the output (one SHA-256 stream per
		# file: the user CPU of openssl dgst, its reads left out as the bake
		# hashes its own buffers). Writing the output (dd) is shown beside
		# it, not added: on this VM the kernel time of writing new pages
		# swings 10x with the state of the host memory from run to run.
		# Quantizing is not counted: a lower bound.
		fl = cc + co
		chain = co * om / ob  # the largest output file: one stream, one core
		fw = fl / ncpu > chain ? fl / ncpu : chain
		fl2 = fl + cw
		fw2 = fl2 / ncpu > chain ? fl2 / ncpu : chain
		printf "floor (measured parts, medians): read %.2f + output sha256 %.2f = %.2f CPU-s; on %d cores at best\n", cc, co, fl, ncpu
		printf "  %.2f s wall = %.2fx cat (the largest output file alone: %.2f s of hashing, one core);\n", fw, fw / wc, chain
		printf "  with the write of the output (dd, %.2f CPU-s this run): %.2f CPU-s, %.2f s wall = %.2fx cat\n", cw, fl2, fw2, fw2 / wc
		printf "  the output sha256 alone split over %d cores: %.2f s = %.2fx cat; 1.5x cat = %.2f s -> %s\n", ncpu, co / ncpu, co / ncpu / wc, 1.5 * wc,
			(co / ncpu <= 1.5 * wc) ? "not excluded by the hash alone" : "below it: not reachable by any bake that hashes its output"
		if (w2 > 0) printf "  pulled bake / floor without the write: wall %.2fx (%.2f s over %.2f s), CPU %.2fx (%.2f over %.2f CPU-s)\n", w2 / fw, w2, fw, c2 / fl, c2, fl
	}
	if (w1 > 0 || w2 > 0) {
		best = (w2 > 0) ? w2 : w1
		printf "targets: >= 1 GB/s of input (wall): plain %s, pulled %s GB/s -> %s\n", (w1 > 0) ? sprintf("%.2f", b / 1e9 / w1) : "-",
			(w2 > 0) ? sprintf("%.2f", b / 1e9 / w2) : "-", (b / 1e9 / best >= 1) ? "met" : "not met"
		if (wc > 0) printf "         within 1.5x of cat (wall): plain %s, pulled %s -> %s\n", x(w1, wc), x(w2, wc),
			(best / wc <= 1.5) ? "met" : "not met"
		if (l == 42) printf "         full E4B body in < 10 s: %.1f s -> %s\n", best, (best < 10) ? "met" : "not met"
		else printf "         full E4B body (14.956 GB) in < 10 s: %.1f s at this rate (an extrapolation; BAKE_LAYERS=42 measures it)\n", 14.956 * best / (b / 1e9)
		printf "peak RSS: plain %s MB, pulled %s MB; limit largest tensor (%.0f MB) x 3 + 256 MB = %.0f MB\n",
			(r1 > 0) ? sprintf("%.0f", r1 / 1024) : "-", (r2 > 0) ? sprintf("%.0f", r2 / 1024) : "-", big / 1e6, (3 * big + 256e6) / 1e6
	}
}'
echo "bench/bake.sh took $(($(date +%s) - t_start)) s"
