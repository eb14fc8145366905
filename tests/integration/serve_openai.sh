#!/bin/sh
# serve_openai.sh - fgpack serve (built with ASan+UBSan here) driven by the
# official openai npm client, curl for edge cases, 50 concurrent clients
# against the bounded queue, a client that disconnects mid-stream, and a
# SIGTERM that drains.
. "$(dirname "$0")/../lib.sh"

# an ASan build of fgpack: lib/ and cmd/ objects in build/asan (shared with
# `make asan`), linked with the kernel objects `make fgpack` already built
CMDOBJ=$(cd "$TOP" && ls cmd/*.c | sed 's|^|build/asan/|; s|\.c$|.o|')
ASAN="-fsanitize=address,undefined -fno-omit-frame-pointer"
mkvar() { (cd "$TOP" && make -s --no-print-directory "$@" --eval 'fgvars: ; @echo $(FGV)' fgvars); }
KOBJ=$(mkvar FGV='$(KERNEL_OBJS)')
LIBS=$(mkvar BUILD=build/asan FGV='$(LDLIBS)')
if ! (cd "$TOP" && make -s -j2 BUILD=build/asan OPT=-O1 EXTRA_CFLAGS="$ASAN" build/asan/libfg.a $CMDOBJ >"$WORK/asan-build.log" 2>&1 &&
	make -s -j2 $KOBJ >>"$WORK/asan-build.log" 2>&1 &&
	cc $ASAN -o "$WORK/fgpack-asan" $CMDOBJ build/asan/libfg.a $KOBJ $LIBS >>"$WORK/asan-build.log" 2>&1); then
	not_ok "build fgpack with ASan"; tail -20 "$WORK/asan-build.log"; finish; exit 1
fi
ok "build fgpack with ASan"

# the tiny model, with a Gemma-kind tokenizer padded to the model's 512 ids
M=$WORK/model
cp -r "$TOP/tests/fixtures/oracle/bf16" "$M"
python3 - "$TOP/tests/fixtures/tokenizer_tiny.json" "$M/tokenizer.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
v = t["model"]["vocab"]
for i in range(max(v.values()) + 1, 512):
    v["\u2581w%d" % i] = i
json.dump(t, open(sys.argv[2], "w"), ensure_ascii=False)
EOF
check "pack the tiny model" sh -c "'$FGPACK' pack --model '$M' -o '$WORK/t.fgb' >'$WORK/t.id'"
ID=$(cat "$WORK/t.id")
check "the eval text is encoded with the model's tokenizer" sh -c "zstd -dc '$WORK/t.fgb' | tar xOf - eval/eval.ids.json | grep -q '\"tokenizer\": \"tokenizer.json [0-9a-f]\{64\}\"'"

PORT=$(free_port)
B=http://127.0.0.1:$PORT
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "$WORK/fgpack-asan" serve "$WORK/t.fgb" --port "$PORT" --queue 4 --max-body 4096 --name tiny 2>"$WORK/serve.err" &
SPID=$!
at_exit "kill $SPID 2>/dev/null"
i=0; while [ $i -lt 300 ] && ! grep -q listening "$WORK/serve.err"; do sleep 0.1; i=$((i + 1)); done
check "serve a bundle (ASan build) starts" wait_port "$PORT"
check_grep "health ok" '"status":"ok"' "$(curl -s "$B/health" >"$WORK/h.json"; echo "$WORK/h.json")"
check_grep "health names the bundle served by its id" "\"bundle\":\"$ID\"" "$WORK/h.json"
check_grep "stderr names it too" "^fgpack serve: bundle $ID\$" "$WORK/serve.err"
curl -s "$B/v1/models" >"$WORK/models.json"
check "/v1/models: the model with the bundle's id" python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))['data'][0]
assert m['id'] == 'tiny' and m['bundle'] == sys.argv[2], m" "$WORK/models.json" "$ID"

# the official client
if (cd "$TOP/tests/node" && node serve_openai.mjs "$B/v1" "$ID") >"$WORK/node.out" 2>&1; then :; fi
while IFS= read -r line; do
	case "$line" in
	"ok "*) ok "${line#ok * - }" ;;
	"not ok "*) not_ok "${line#not ok * - }" ;;
	"#"*) echo "$line" ;;
	esac
done <"$WORK/node.out"
grep -q "passed, 0 failed" "$WORK/node.out" || { not_ok "openai client script ran to the end"; tail -5 "$WORK/node.out"; }

# verify --url: the bundle's transcript replayed against this running server
# (fgpack itself the client), its fingerprint checked, tokens/s over HTTP
check_exit "verify --url against the server of this bundle: exit 0" 0 "$FGPACK" verify "$WORK/t.fgb" --url "$B/v1" --warmup 2 --summary "$WORK/url.json"
check "... tokens level, every step; the server's fingerprint is the bundle; all timed requests completed" python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
assert d['verdict'] == 'verified-tokens' and d['golden']['level'] == 'tokens' and d['golden']['steps'] > 0, d
assert d['server']['system_fingerprint'] == d['bundle'] == sys.argv[2] and d['server']['model'] == 'tiny', d
assert d['completed'] == '4/4' and d['tps'] > 0 and d['warmup'] == 2, d" "$WORK/url.json" "$ID"
# the perplexity on the bundled eval ids, as the server scores them (echo,
# logprobs, max_tokens 0), equals the engine's own figure of verify
"$FGPACK" verify "$WORK/t.fgb" --warmup 1 --max-new 4 --summary "$WORK/eng.json" >/dev/null 2>&1
check "verify --url: the eval perplexity through the server equals verify's engine figure (same ids, 1e-5 relative)" python3 -c "
import json, sys
u, e = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert u['ppl_tokens'] == e['ppl_tokens'] > 100 and u['ppl_tokenizer'] == e['ppl_tokenizer'], (u, e)
assert abs(u['ppl'] - e['ppl']) <= 1e-5 * e['ppl'], (u['ppl'], e['ppl'])" "$WORK/url.json" "$WORK/eng.json"
check "another bundle checked against this server: exit 3" sh -c "'$FGPACK' pack --model '$M' --prompts 2 -o '$WORK/t2.fgb' >/dev/null 2>&1; '$FGPACK' verify '$WORK/t2.fgb' --url '$B' --no-bench --summary '$WORK/url2.json' 2>'$WORK/url2.err'; [ \$? -eq 3 ]"
check_grep "... the server says which bundle it serves" "says it serves $ID, not this bundle" "$WORK/url2.err"
"$FGPACK" verify "$WORK/t.fgb" --url http://127.0.0.1:1 --summary - >"$WORK/down.out" 2>&1
check "no server at the URL: exit 1" [ $? -eq 1 ]
check "... in one line naming the URL" sh -c "[ \$(wc -l <'$WORK/down.out') -eq 1 ] && grep -q '^fgpack verify: http://127.0.0.1:1/v1/models: ' '$WORK/down.out'"
check_exit "--url with --no-replay: usage" 2 "$FGPACK" verify "$WORK/t.fgb" --url "$B" --no-replay

# curl: edge cases
code() { curl -s -o "$WORK/body" -w '%{http_code}' "$@"; }
check "malformed JSON: 400" [ "$(code "$B/v1/completions" -d '{"prompt": ')" = 400 ]
check_grep "malformed JSON: OpenAI error object" '"error":\{"code":null,"message":"request body: .*","param":null,"type":"invalid_request_error"\}' "$WORK/body"
head -c 6000 /dev/zero | tr '\0' a >"$WORK/big"
check "body over --max-body: 413" [ "$(code "$B/v1/completions" --data-binary @"$WORK/big")" = 413 ]
check "unknown route: 404" [ "$(code "$B/v1/nothing")" = 404 ]
check "GET on completions: 405" [ "$(code "$B/v1/completions")" = 405 ]
check "prompt longer than the context: 400" [ "$(code "$B/v1/completions" -d "{\"prompt\": [$(seq -s, 2 200)]}")" = 400 ]
check_grep "prompt too long: param named" '"param":"prompt"' "$WORK/body"
check "stop of a bad type: 400" [ "$(code "$B/v1/completions" -d '{"prompt":"hi","stop":5}')" = 400 ]
check "token id out of range: 400" [ "$(code "$B/v1/completions" -d '{"prompt":[2,99999]}')" = 400 ]
check "a batch of one (a list of one id list, as lm-eval sends): the same answer as the ids alone" python3 - "$B" <<'EOF'
import json, sys, urllib.request
base = sys.argv[1]
def post(d):
    return json.load(urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", json.dumps(d).encode())))
d = {"max_tokens": 1, "echo": True, "logprobs": 1, "ignore_eos": True}
a = post(dict(d, prompt=[2, 17, 33, 90]))["choices"][0]
b = post(dict(d, prompt=[[2, 17, 33, 90]]))["choices"][0]
assert a == b, (a, b)
EOF
check "a batch of 3 prompts (ids, text, ids; echo and logprobs): choice i = prompt i's own answer, usage summed" python3 - "$B" <<'EOF'
import json, sys, urllib.request
base = sys.argv[1]
def post(d):
    return json.load(urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", json.dumps(d).encode())))
d = {"max_tokens": 5, "echo": True, "logprobs": 2, "ignore_eos": True, "return_token_ids": True}
ps = [[2, 17, 33], "hello abc", [2, 90, 91, 92]]
one = [post(dict(d, prompt=p)) for p in ps]
b = post(dict(d, prompt=ps))
assert [c["index"] for c in b["choices"]] == [0, 1, 2], b["choices"]
for i, o in enumerate(one):
    c = dict(b["choices"][i]); c["index"] = 0
    assert c == o["choices"][0], (i, c, o["choices"][0])
for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
    assert b["usage"][k] == sum(o["usage"][k] for o in one), (k, b["usage"])
assert "prompt_token_ids" not in b and all("prompt_token_ids" in c for c in b["choices"]), b
EOF
check "a batch that streams: 400 naming prompt" sh -c "[ \"\$(curl -s -o '$WORK/body' -w '%{http_code}' '$B/v1/completions' -d '{\"prompt\":[[2,3],[2,4]],\"stream\":true}')\" = 400 ] && grep -q '\"param\":\"prompt\"' '$WORK/body'"
check "a batch with a bad prompt: 400 naming which" sh -c "[ \"\$(curl -s -o '$WORK/body' -w '%{http_code}' '$B/v1/completions' -d '{\"prompt\":[[2,3],[2,99999]]}')\" = 400 ] && grep -q 'prompt 1 of the batch' '$WORK/body'"
check "a batch of 1025 prompts: 400 naming the limit" python3 - "$B" <<'EOF'
import json, sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "/v1/completions", json.dumps({"prompt": [""] * 1025}, separators=(",", ":")).encode()))
    sys.exit(1)
except urllib.error.HTTPError as e:
    body = e.read().decode()
    assert e.code == 400 and "at most 1024" in body, (e.code, body)
EOF
check "a batch of 40 prompts (queue of 4): every choice in order" python3 - "$B" <<'EOF'
import json, sys, urllib.request
base = sys.argv[1]
ps = [[2, 10 + i] for i in range(40)]
b = json.load(urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", json.dumps({"prompt": ps, "max_tokens": 2, "ignore_eos": True, "return_token_ids": True}).encode())))
assert [c["index"] for c in b["choices"]] == list(range(40)), b
assert [c["prompt_token_ids"] for c in b["choices"]] == ps, b
assert b["usage"]["completion_tokens"] == 80, b["usage"]
EOF
check "n=2: 400" [ "$(code "$B/v1/completions" -d '{"prompt":"hi","n":2}')" = 400 ]

# greedy serving equals the golden transcript the bundle carries; stop strings
zstd -dc "$WORK/t.fgb" | tar xOf - golden/transcript.json >"$WORK/golden.json"
check "served tokens equal the golden transcript (up to eos)" python3 - "$B" "$WORK/golden.json" <<'EOF'
import json, sys, urllib.request
base, g = sys.argv[1], json.load(open(sys.argv[2]))
for p in g["prompts"]:
    body = json.dumps({"prompt": p["ids"], "max_tokens": len(p["tokens"])}).encode()
    r = json.load(urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", body)))
    got, want = r["choices"][0]["token_ids"], p["tokens"]
    assert got == want[:len(got)], (got, want)
    assert len(got) == len(want) or want[len(got)] in (1, 106, 5), (got, want)
EOF
# vLLM's ignore_eos: generation runs past the eos and end-of-turn ids, as
# the golden transcript does (`run --ignore-eos`); they are counted and left
# out of the text (vLLM's default skip_special_tokens)
check "ignore_eos: the golden transcript token for token, past the eos (one prompt at least stops early without it)" python3 - "$B" "$WORK/golden.json" <<'EOF'
import json, sys, urllib.request
base, g = sys.argv[1], json.load(open(sys.argv[2]))
def post(d):
    return json.load(urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", json.dumps(d).encode())))
early = 0
for p in g["prompts"]:
    want = p["tokens"]
    r = post({"prompt": p["ids"], "max_tokens": len(want), "ignore_eos": True})
    c = r["choices"][0]
    assert c["token_ids"] == want, (c["token_ids"], want)
    assert r["usage"]["completion_tokens"] == len(want) and c["finish_reason"] == "length", r
    assert "<eos>" not in c["text"] and "<end_of_turn>" not in c["text"], c["text"]
# a prompt whose greedy run reaches an eos id: without ignore_eos it stops
# there, the eos id counted and in token_ids (as vLLM's output holds it) but
# not in the text; with it, the same ids up to there, then on to max_tokens
eos = set(g.get("eos_token_ids") or []) | {1, 106}
for t in range(3, 400):
    r = post({"prompt": [2, t], "max_tokens": 24, "ignore_eos": True})
    ids = r["choices"][0]["token_ids"]
    k = next((i for i, x in enumerate(ids) if x in eos), None)
    if k is None or k == len(ids) - 1:
        continue
    pr = post({"prompt": [2, t], "max_tokens": 24})
    plain = pr["choices"][0]
    assert plain["token_ids"] == ids[:k + 1] and plain["finish_reason"] == "stop", (plain, ids)
    assert pr["usage"]["completion_tokens"] == k + 1 and plain["stop_reason"] is None, pr
    assert len(ids) == 24 and r["usage"]["completion_tokens"] == 24, r
    assert r["choices"][0]["text"].startswith(plain["text"]), (r["choices"][0]["text"], plain["text"])
    early = 1
    break
assert early, "no prompt reaches an eos: the check would prove nothing"
EOF
check "min_tokens (vLLM's eos mask, not greedy): 400 naming it and ignore_eos" sh -c "[ \"\$(curl -s -o '$WORK/body' -w '%{http_code}' '$B/v1/completions' -d '{\"prompt\":[2],\"min_tokens\":8}')\" = 400 ] && grep -q '\"param\":\"min_tokens\"' '$WORK/body' && grep -q 'ignore_eos' '$WORK/body'"
check "min_tokens 0: accepted" [ "$(curl -s -o /dev/null -w '%{http_code}' "$B/v1/completions" -d '{"prompt":[2],"max_tokens":2,"min_tokens":0}')" = 200 ]
# skip_special_tokens (vLLM and transformers, true by default): the text of
# a greedy answer holding special ids (<pad>, <bos>, <unk>, <start_of_turn>
# here) leaves them out, or with false keeps them, exactly as
# `tokenize --decode --transformers [--skip-special]` decodes the same ids
# (that decode is held to the tokenizers library's own in tokenizer_ref.sh:
# an invalid byte run gives one U+FFFD per byte token); a <0x00> byte comes
# back as \u0000 instead of ending the text.
check "skip_special_tokens: special ids left out of the text by default, kept with false, as transformers decodes them; NUL bytes kept" python3 - "$B" "$WORK" "$FGPACK" "$M/tokenizer.json" <<'EOF'
import json, subprocess, sys, urllib.request
base, work, fg, tj = sys.argv[1:5]
def post(d):
    return json.load(urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", json.dumps(d).encode())))
special, rows, prompts, nul = {0, 2, 3, 4}, [], [], 0
for t in range(3, 512):
    c = post({"prompt": [2, t], "max_tokens": 24})["choices"][0]
    if not special & set(c["token_ids"]):
        continue
    k = post({"prompt": [2, t], "max_tokens": 24, "skip_special_tokens": False})["choices"][0]
    assert k["token_ids"] == c["token_ids"], (k, c)
    rows.append((c["token_ids"], c["text"], k["text"]))
    prompts.append([2, t])
    nul += "\0" in c["text"]
    if len(rows) >= 12 and nul:
        break
assert len(rows) >= 3 and nul, (len(rows), nul)
open(work + "/sp.ids", "w").write("".join(json.dumps(r[0]) + "\n" for r in rows))
def decode(*flags):
    out = subprocess.run([fg, "tokenize", "--tokenizer", tj, "--decode", "--lines", "--transformers", *flags],
                         stdin=open(work + "/sp.ids"), capture_output=True, check=True)
    return [json.loads(x) for x in out.stdout.decode().splitlines()]
for (ids, dflt, keep), want_d, want_k in zip(rows, decode("--skip-special"), decode()):
    assert dflt == want_d, (ids, dflt, want_d)
    assert keep == want_k, (ids, keep, want_k)
    assert dflt != keep and any(x in keep for x in ("<pad>", "<bos>", "<unk>", "<start_of_turn>")), (dflt, keep)
# streamed, the same text, with and without the special tokens
for (ids, dflt, keep), prompt in zip(rows, prompts):
    for skip, want in ((True, dflt), (False, keep)):
        body = {"prompt": prompt, "max_tokens": 24, "stream": True, "skip_special_tokens": skip}
        text = ""
        for line in urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", json.dumps(body).encode())):
            line = line.decode().strip()
            if line.startswith("data: {"):
                text += json.loads(line[6:])["choices"][0]["text"]
        assert text == want, (prompt, skip, text, want)
EOF
# stream_options (OpenAI's include_usage; vLLM's continuous_usage_stats) and
# token_ids in every chunk: the counts a benchmark harness reads, exactly
check "stream_options: usage in a last chunk of no choices (include_usage), in every chunk (continuous_usage_stats); token_ids of the chunks add up to the answer's" python3 - "$B" <<'EOF'
import json, sys, urllib.request
base = sys.argv[1]
def post(path, d):
    return urllib.request.urlopen(urllib.request.Request(base + path, json.dumps(d).encode()))
def chunks(path, d):
    out = []
    for line in post(path, d):
        line = line.decode().strip()
        if line.startswith("data: {"):
            out.append(json.loads(line[6:]))
    return out
for path, body in (("/v1/completions", {"prompt": [2, 7], "max_tokens": 9, "ignore_eos": True}),
                   ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 9})):
    whole = json.load(post(path, body))
    want_ids, want_usage = whole["choices"][0]["token_ids"], whole["usage"]
    # no stream_options: the counts in the last chunk (as before)
    cs = chunks(path, dict(body, stream=True))
    assert cs[-1]["usage"] == want_usage and all("usage" not in c for c in cs[:-1]), cs
    assert sum((c["choices"][0].get("token_ids", []) for c in cs), []) == want_ids, (cs, want_ids)
    # include_usage: null in every chunk, then one chunk of no choices with the counts
    cs = chunks(path, dict(body, stream=True, stream_options={"include_usage": True}))
    assert cs[-1]["choices"] == [] and cs[-1]["usage"] == want_usage, cs[-1]
    assert all(c["usage"] is None and len(c["choices"]) == 1 for c in cs[:-1]), cs
    assert cs[-2]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"], cs[-2]
    assert sum((c["choices"][0].get("token_ids", []) for c in cs[:-1]), []) == want_ids
    # continuous_usage_stats: every chunk counts the ids given so far
    cs = chunks(path, dict(body, stream=True, stream_options={"include_usage": True, "continuous_usage_stats": True}))
    seen = 0
    for c in cs[:-1]:
        seen += len(c["choices"][0].get("token_ids", []))
        assert c["usage"]["completion_tokens"] == seen and c["usage"]["prompt_tokens"] == want_usage["prompt_tokens"], (c, seen)
    assert seen == len(want_ids) and cs[-1]["usage"] == want_usage and cs[-1]["choices"] == [], cs[-1]
EOF
check "return_token_ids where vLLM puts the prompt ids: a completion's choice, the first stream chunk (a completion's choice, a chat's top level)" python3 - "$B" <<'EOF'
import json, sys, urllib.request
base = sys.argv[1]
def post(path, d):
    return urllib.request.urlopen(urllib.request.Request(base + path, json.dumps(d).encode()))
r = json.load(post("/v1/completions", {"prompt": [2, 7, 9], "max_tokens": 3, "return_token_ids": True}))
assert r["choices"][0]["prompt_token_ids"] == r["prompt_token_ids"] == [2, 7, 9], r
def first(path, d):
    for line in post(path, dict(d, stream=True, return_token_ids=True)):
        line = line.decode().strip()
        if line.startswith("data: {"):
            return json.loads(line[6:])
assert first("/v1/completions", {"prompt": [2, 7, 9], "max_tokens": 3})["choices"][0]["prompt_token_ids"] == [2, 7, 9]
c = json.load(post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "return_token_ids": True}))
assert first("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})["prompt_token_ids"] == c["prompt_token_ids"], c
EOF
# logprobs, held to transformers: the tiny model's oracle logits
# (tests/fixtures/oracle/bf16: transformers' fp32 logits after every token of
# 4 prompts and their 32-token greedy continuations) give each generated
# token's log-probability and the top 5, and, with echo and max_tokens 0,
# each prompt token's; the C engine's logits are within 5e-3 of those
# (docs/engine.md), so are these
check "logprobs: generated tokens' and (echo, max_tokens 0) prompt tokens' log-probabilities and top 5 as transformers' logits give them; streamed the same; chat's form" python3 "$TOP/tests/integration/serve_logprobs.py" "$B" "$TOP/tests/fixtures/oracle/bf16"
for bad in '{"prompt":[2],"logprobs":21}' '{"prompt":[2],"logprobs":true}' '{"prompt":[2],"max_tokens":0}' '{"prompt":[2],"echo":1}'; do
	check "bad logprobs/echo request $bad: 400" [ "$(curl -s -o /dev/null -w '%{http_code}' "$B/v1/completions" -d "$bad")" = 400 ]
done
check "prompt_logprobs with stream: 400 naming it" sh -c "[ \"\$(curl -s -o '$WORK/body' -w '%{http_code}' '$B/v1/completions' -d '{\"prompt\":[2,5],\"prompt_logprobs\":1,\"stream\":true}')\" = 400 ] && grep -q '\"param\":\"prompt_logprobs\"' '$WORK/body'"
check "return_tokens_as_token_ids: logprobs name tokens token_id:<id> (completion and chat), the same values and text offsets" python3 - "$B" <<'EOF'
import json, sys, urllib.request
base = sys.argv[1]
def post(path, d):
    return json.load(urllib.request.urlopen(urllib.request.Request(base + path, json.dumps(d).encode())))
d = {"prompt": [2, 17, 33, 90], "max_tokens": 12, "ignore_eos": True, "logprobs": 3, "echo": True}
a = post("/v1/completions", d)["choices"][0]
b = post("/v1/completions", dict(d, return_tokens_as_token_ids=True))["choices"][0]
ids = [2, 17, 33, 90] + a["token_ids"]
assert b["token_ids"] == a["token_ids"] and b["text"] == a["text"]
la, lb = a["logprobs"], b["logprobs"]
assert lb["tokens"] == ["token_id:%d" % i for i in ids], lb["tokens"]
assert lb["token_logprobs"] == la["token_logprobs"] and lb["text_offset"] == la["text_offset"]
for x, y in zip(la["top_logprobs"][1:], lb["top_logprobs"][1:]):
    assert len(y) == 3 and all(k.startswith("token_id:") for k in y), y
    # by text, ids alike merge (every lone invalid byte is U+FFFD); by id none do
    assert list(y.values()) == sorted(y.values(), reverse=True) and set(x.values()) <= set(y.values()), (x, y)
c = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 6, "logprobs": True, "top_logprobs": 2,
     "return_tokens_as_token_ids": True}
r = post("/v1/chat/completions", c)["choices"][0]
ent = r["logprobs"]["content"]
assert [e["token"] for e in ent] == ["token_id:%d" % i for i in r["token_ids"][:len(ent)]], ent
assert all(len(e["top_logprobs"]) == 2 and e["top_logprobs"][0]["token"].startswith("token_id:") for e in ent), ent
EOF
check "return_tokens_as_token_ids of a bad type: 400 naming it" sh -c "[ \"\$(curl -s -o '$WORK/body' -w '%{http_code}' '$B/v1/completions' -d '{\"prompt\":[2],\"return_tokens_as_token_ids\":1}')\" = 400 ] && grep -q '\"param\":\"return_tokens_as_token_ids\"' '$WORK/body'"
check "chat top_logprobs without logprobs: 400" [ "$(curl -s -o /dev/null -w '%{http_code}' "$B/v1/chat/completions" -d '{"messages":[{"role":"user","content":"x"}],"top_logprobs":2}')" = 400 ]
check "echo: the prompt's text before the answer's" python3 -c "
import json, sys, urllib.request
def post(d):
    return json.load(urllib.request.urlopen(urllib.request.Request(sys.argv[1] + '/v1/completions', json.dumps(d).encode())))
a = post({'prompt': 'hello abc', 'max_tokens': 3})['choices'][0]['text']
b = post({'prompt': 'hello abc', 'max_tokens': 3, 'echo': True})['choices'][0]['text']
assert b == 'hello abc' + a, (a, b)" "$B"
# fields that change the answer's form or tokens and cannot be honoured:
# refused by name; their neutral values accepted (clients send them so)
for f in '"suffix":"x"' '"logit_bias":{"5":10}' '"best_of":2' '"response_format":{"type":"json_object"}' \
	'"presence_penalty":0.5' '"frequency_penalty":-1' '"repetition_penalty":1.1' '"length_penalty":0.5' \
	'"use_beam_search":true' '"allowed_token_ids":[5,6]' '"bad_words":["a"]' '"guided_json":{"type":"object"}' \
	'"guided_regex":"a+"' '"guided_choice":["a"]' '"guided_grammar":"x"' '"structured_outputs":{"regex":"a"}' \
	'"logits_processors":["x"]' '"include_stop_str_in_output":true' '"truncate_prompt_tokens":4' \
	'"prompt_embeds":"AAAA"' '"functions":[{"name":"f"}]'; do
	name=$(echo "$f" | sed 's/^"\([a-z_]*\)".*/\1/')
	check "$f: 400 naming $name" sh -c "[ \"\$(curl -s -o '$WORK/body' -w '%{http_code}' '$B/v1/completions' -d '{\"prompt\":[2],$f}')\" = 400 ] && grep -q '\"param\":\"$name\"' '$WORK/body'"
done
check "neutral values of those fields: accepted" [ "$(curl -s -o /dev/null -w '%{http_code}' "$B/v1/chat/completions" -d '{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"suffix":null,"logit_bias":{},"best_of":1,"response_format":{"type":"text"}}')" = 200 ]
check "neutral values of the penalties and vLLM's extensions, and the sampling-only fields: accepted" [ "$(curl -s -o /dev/null -w '%{http_code}' "$B/v1/chat/completions" -d '{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"presence_penalty":0,"frequency_penalty":0.0,"repetition_penalty":1,"length_penalty":1.0,"use_beam_search":false,"allowed_token_ids":null,"bad_words":[],"guided_json":null,"structured_outputs":null,"include_stop_str_in_output":false,"truncate_prompt_tokens":null,"functions":[],"temperature":0,"top_p":1,"top_k":-1,"min_p":0,"seed":7,"add_generation_prompt":true,"continue_final_message":false,"echo":false,"add_special_tokens":false,"tool_choice":"none","function_call":"auto","stop_token_ids":[]}')" = 200 ]
# vLLM's chat extensions that change the prompt, and tool choices: only
# their defaults
for f in '"add_generation_prompt":false' '"continue_final_message":true' '"echo":true' '"add_special_tokens":true' \
	'"tool_choice":"required"' '"tool_choice":{"type":"function","function":{"name":"f"}}' '"function_call":{"name":"f"}' \
	'"add_generation_prompt":"no"'; do
	name=$(echo "$f" | sed 's/^"\([a-z_]*\)".*/\1/')
	check "chat $f: 400 naming $name" sh -c "[ \"\$(curl -s -o '$WORK/body' -w '%{http_code}' '$B/v1/chat/completions' -d '{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],$f}')\" = 400 ] && grep -q '\"param\":\"$name\"' '$WORK/body'"
done
for bad in '"stop_token_ids":5' '"stop_token_ids":[-1]' '"stop_token_ids":["a"]' '"stop_token_ids":[1.5]' '"stop_token_ids":[100000000]' '"add_special_tokens":"no"'; do
	name=$(echo "$bad" | sed 's/^"\([a-z_]*\)".*/\1/')
	check "completion $bad: 400 naming $name" sh -c "[ \"\$(curl -s -o '$WORK/body' -w '%{http_code}' '$B/v1/completions' -d '{\"prompt\":\"x\",$bad}')\" = 400 ] && grep -q '\"param\":\"$name\"' '$WORK/body'"
done
# vLLM's stop_token_ids end generation at the first of them (ignore_eos or
# not), the id kept in token_ids and usage, not in the text; stop_reason
# names it (a stop string: the string; an eos or the length: null)
check "stop_token_ids: stop at the id, counted, left out of the text, stop_reason the id (streamed too)" python3 - "$B" <<'EOF2'
import json, sys, urllib.request
base = sys.argv[1]
def post(d, path="/v1/completions"):
    return json.load(urllib.request.urlopen(urllib.request.Request(base + path, json.dumps(d).encode())))
def stream(d, path="/v1/completions"):
    body = urllib.request.urlopen(urllib.request.Request(base + path, json.dumps(dict(d, stream=True)).encode())).read().decode()
    return [json.loads(l[6:]) for l in body.split("\n") if l.startswith("data: ") and l != "data: [DONE]"]
d = {"prompt": "hello abc", "max_tokens": 24, "ignore_eos": True}
full = post(d)["choices"][0]
ids = full["token_ids"]
assert full["stop_reason"] is None and full["finish_reason"] == "length", full
k = next(i for i in range(2, len(ids)) if ids[i] not in ids[:i])
r = post(dict(d, stop_token_ids=[ids[k], 100000 % 512]))
c = r["choices"][0]
assert c["token_ids"] == ids[:k + 1] and c["finish_reason"] == "stop" and c["stop_reason"] == ids[k], (c, ids, k)
assert r["usage"]["completion_tokens"] == k + 1, r
assert c["text"] == post(dict(d, max_tokens=k))["choices"][0]["text"], (c, k)
ch = stream(dict(d, stop_token_ids=[ids[k]]))
got = [i for x in ch for y in x["choices"] for i in y.get("token_ids", [])]
assert got == ids[:k + 1], (got, ids, k)
assert ch[-1]["choices"][0]["stop_reason"] == ids[k] and all(y["stop_reason"] is None for x in ch[:-1] for y in x["choices"]), ch
assert "".join(y["text"] for x in ch for y in x["choices"]) == c["text"], ch
t = full["text"]
stop = t[3:6]
s = post(dict(d, stop=["\u0001never", stop]))["choices"][0]
assert s["finish_reason"] == "stop" and s["stop_reason"] == stop, s
m = post({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 12, "ignore_eos": True}, "/v1/chat/completions")["choices"][0]
mid = m["token_ids"]
k = next(i for i in range(1, len(mid)) if mid[i] not in mid[:i])
n = post({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 12, "ignore_eos": True, "stop_token_ids": [mid[k]]},
         "/v1/chat/completions")["choices"][0]
assert n["token_ids"] == mid[:k + 1] and n["stop_reason"] == mid[k], (n, mid)
EOF2
check "add_special_tokens false: a string prompt without <bos> (true, the default: with it)" python3 - "$B" <<'EOF2'
import json, sys, urllib.request
base = sys.argv[1]
def post(d):
    return json.load(urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", json.dumps(d).encode())))
a = post({"prompt": "hello abc", "max_tokens": 2, "return_token_ids": True})
b = post({"prompt": "hello abc", "max_tokens": 2, "return_token_ids": True, "add_special_tokens": False})
assert a["prompt_token_ids"][0] == 2 and a["prompt_token_ids"][1:] == b["prompt_token_ids"], (a, b)
assert b["usage"]["prompt_tokens"] == a["usage"]["prompt_tokens"] - 1, (a, b)
EOF2
# vLLM's /tokenize and /detokenize: the ids the generation endpoints give
# the model, and transformers' decode (special tokens kept)
check "/tokenize: a prompt's ids and a chat's as the endpoints render them; /detokenize: the text of ids" python3 - "$B" <<'EOF2'
import json, sys, urllib.request
base = sys.argv[1]
def post(path, d):
    return json.load(urllib.request.urlopen(urllib.request.Request(base + path, json.dumps(d).encode())))
mx = json.load(urllib.request.urlopen(base + "/v1/models"))["data"][0]["max_model_len"]
for p in ("hello abc", "two  spaces\nand a line", ""):
    want = post("/v1/completions", {"prompt": p or "x", "max_tokens": 1, "return_token_ids": True})["prompt_token_ids"]
    t = post("/tokenize", {"prompt": p or "x"})
    assert t == {"count": len(want), "max_model_len": mx, "tokens": want}, (t, want)
    u = post("/tokenize", {"prompt": p, "add_special_tokens": False})["tokens"]
    assert p == "" and u == [] or u == t["tokens"][1:], (p, u, t)
    assert post("/detokenize", {"tokens": u})["prompt"] == p, (p, u)
msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]
want = post("/v1/chat/completions", {"messages": msgs, "max_tokens": 1, "return_token_ids": True})["prompt_token_ids"]
assert post("/tokenize", {"messages": msgs, "add_generation_prompt": True})["tokens"] == want
c = post("/v1/completions", {"prompt": [2, 17, 33], "max_tokens": 24, "ignore_eos": True, "skip_special_tokens": False})["choices"][0]
assert post("/detokenize", {"tokens": c["token_ids"]})["prompt"] == c["text"], c
EOF2
for bad in 'tokenize {}' 'tokenize {"prompt":5}' 'tokenize {"prompt":"x","add_special_tokens":1}' 'tokenize {"messages":[{"role":"user","content":"x"}],"add_generation_prompt":false}' \
	'detokenize {"tokens":[-1]}' 'detokenize {"tokens":[100000]}' 'detokenize {"tokens":"1"}' 'detokenize []'; do
	path=${bad%% *}
	check "/$bad: 400" [ "$(curl -s -o /dev/null -w '%{http_code}' "$B/$path" -d "${bad#* }")" = 400 ]
done
check "GET /tokenize: 405" [ "$(curl -s -o /dev/null -w '%{http_code}' "$B/tokenize")" = 405 ]
check "/v1/models/<id>: the served model, as in the list; another id: 404 naming model; /version and /ping: 200" python3 - "$B" <<'EOF2'
import json, sys, urllib.request, urllib.error
base = sys.argv[1]
lst = json.load(urllib.request.urlopen(base + "/v1/models"))
m = lst["data"][0]
one = json.load(urllib.request.urlopen(base + "/v1/models/" + urllib.request.quote(m["id"])))
assert one == m, (one, m)
try:
    urllib.request.urlopen(base + "/v1/models/not-" + m["id"])
    raise AssertionError("no 404")
except urllib.error.HTTPError as e:
    assert e.code == 404 and json.load(e)["error"]["param"] == "model"
v = json.load(urllib.request.urlopen(base + "/version"))
assert v["version"] and v["build"], v
assert urllib.request.urlopen(base + "/ping").status == 200
EOF2
check "stream_options without stream: 400 naming it" sh -c "[ \"\$(curl -s -o '$WORK/body' -w '%{http_code}' '$B/v1/completions' -d '{\"prompt\":[2],\"stream_options\":{\"include_usage\":true}}')\" = 400 ] && grep -q '\"param\":\"stream_options\"' '$WORK/body'"
check "stream_options of a bad type: 400" [ "$(curl -s -o /dev/null -w '%{http_code}' "$B/v1/completions" -d '{"prompt":[2],"stream":true,"stream_options":{"include_usage":"yes"}}')" = 400 ]
check "skip_special_tokens of a bad type: 400 naming it" sh -c "[ \"\$(curl -s -o '$WORK/body' -w '%{http_code}' '$B/v1/completions' -d '{\"prompt\":[2],\"skip_special_tokens\":1}')\" = 400 ] && grep -q '\"param\":\"skip_special_tokens\"' '$WORK/body'"
check "ignore_eos of a bad type: 400 naming it" sh -c "[ \"\$(curl -s -o '$WORK/body' -w '%{http_code}' '$B/v1/completions' -d '{\"prompt\":[2],\"ignore_eos\":\"yes\"}')\" = 400 ] && grep -q '\"param\":\"ignore_eos\"' '$WORK/body'"
check "stop string cuts the text and finishes with stop" python3 - "$B" <<'EOF'
import json, sys, urllib.request
base = sys.argv[1]
def post(d):
    return json.load(urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", json.dumps(d).encode())))
full = post({"prompt": "hello abc", "max_tokens": 24})["choices"][0]
t = full["text"]
assert len(t) >= 6, t
stop = t[3:6]
cut = post({"prompt": "hello abc", "max_tokens": 24, "stop": [stop]})["choices"][0]
assert cut["text"] == t[:t.index(stop)] and cut["finish_reason"] == "stop", (t, stop, cut)
s = post({"prompt": "hello abc", "max_tokens": 3})["choices"][0]
assert s["finish_reason"] == "stop" or len(s["token_ids"]) == 3, s
EOF
check "stop strings at many offsets and lengths (across tokens and byte runs), one or two, streamed and not: the text cut before the first to be whole, never holding it" python3 - "$B" <<'EOF'
import json, sys, urllib.request
base = sys.argv[1]
def post(d):
    return json.load(urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", json.dumps(d).encode())))
def stream(d):
    r = urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", json.dumps(dict(d, stream=True)).encode()))
    text, fin = "", None
    for line in r.read().decode().split("\n"):
        if line.startswith("data: {"):
            c = json.loads(line[6:])["choices"]
            if c:
                text += c[0]["text"]
                fin = c[0]["finish_reason"] or fin
    return text, fin
t = post({"prompt": "hello abc", "max_tokens": 40, "ignore_eos": True})["choices"][0]["text"]
assert len(t) >= 20, t
# a stop string is found as soon as it is whole: alone, its first
# occurrence; with a second one, the one whose first occurrence ends
# before the other's begins (which completes first is then certain)
n = 0
for off in range(0, len(t) - 8, 3):
    for ln in (1, 2, 5, 8):
        stop = t[off:off + ln]
        other = t[off + ln + 2:off + ln + 5]
        cases = [([stop], t.index(stop))]
        a0, b0 = t.index(stop), t.index(other) if len(other) == 3 else None
        if b0 is not None and a0 + len(stop) <= b0:
            cases.append(([other, stop], a0))
        elif b0 is not None and b0 + len(other) <= a0:
            cases.append(([other, stop], b0))
        for stops, cut in cases:
            d = {"prompt": "hello abc", "max_tokens": 40, "ignore_eos": True, "stop": stops}
            a = post(d)["choices"][0]
            assert a["text"] == t[:cut] and a["finish_reason"] == "stop", (t, stops, a)
            assert stream(d) == (t[:cut], "stop"), (t, stops, stream(d))
            n += 1
assert n >= 40, n
EOF

# 50 concurrent clients against a queue of 4
check "50 concurrent clients: every answer is 200 or 429, some of each" python3 - "$B" <<'EOF'
import json, sys, threading, urllib.error, urllib.request
base, codes, bad = sys.argv[1], [], []
def one(i):
    req = urllib.request.Request(base + "/v1/completions", json.dumps({"prompt": [2, 10 + i], "max_tokens": 40}).encode())
    try:
        r = urllib.request.urlopen(req, timeout=120)
        d = json.load(r)
        c = d["choices"][0]
        if c["finish_reason"] not in ("stop", "length") or (c["finish_reason"] == "length" and len(c["token_ids"]) != 40):
            bad.append(d)
        codes.append(200)
    except urllib.error.HTTPError as e:
        d = json.load(e)
        if e.code != 429 or d["error"]["type"] != "rate_limit_error":
            bad.append((e.code, d))
        codes.append(e.code)
    except Exception as e:
        bad.append(repr(e)); codes.append(0)
ts = [threading.Thread(target=one, args=(i,)) for i in range(50)]
for t in ts: t.start()
for t in ts: t.join()
print(sorted(codes), bad[:3])
assert not bad and len(codes) == 50 and codes.count(200) >= 5 and codes.count(429) >= 1
EOF
check_grep "server healthy after the burst" '"status":"ok"' "$(curl -s "$B/health" >"$WORK/h2.json"; echo "$WORK/h2.json")"

# a streaming client that disconnects stops its generation
check "disconnect mid-stream cancels the generation" python3 - "$PORT" <<'EOF'
import json, socket, sys, time, urllib.request
port = int(sys.argv[1])
def health():
    return json.load(urllib.request.urlopen("http://127.0.0.1:%d/health" % port))["stats"]
before = health()
body = json.dumps({"prompt": [2], "max_tokens": 120, "stream": True}).encode()
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
got = b""
while b"data:" not in got:
    got += s.recv(4096)
s.close()
for _ in range(100):
    after = health()
    if after["requests"] > before["requests"]:
        break
    time.sleep(0.1)
print(before, after)
assert after["cancelled"] == before["cancelled"] + 1
assert after["tokens"] - before["tokens"] < 120
EOF

# a client waiting for a non-streaming answer that disconnects stops its
# generation too
check "disconnect while waiting (not streaming) cancels the generation" python3 - "$PORT" <<'EOF'
import json, socket, sys, time, urllib.request
port = int(sys.argv[1])
def health():
    return json.load(urllib.request.urlopen("http://127.0.0.1:%d/health" % port))["stats"]
before = health()
body = json.dumps({"prompt": [2], "max_tokens": 127}).encode()
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
time.sleep(0.02)
s.close()
for _ in range(100):
    after = health()
    if after["requests"] > before["requests"]:
        break
    time.sleep(0.05)
print(before, after)
assert after["cancelled"] == before["cancelled"] + 1
assert after["tokens"] - before["tokens"] < 127
EOF

# SIGTERM drains: a request in flight completes, then the server exits 0
curl -s -o "$WORK/inflight.json" -w '%{http_code}' "$B/v1/completions" -d '{"prompt": [2, 3], "max_tokens": 120}' >"$WORK/inflight.code" &
CPID=$!
i=0; while [ $i -lt 600 ] && [ ! -s "$WORK/inflight.code" ] && ! curl -s "$B/health" | grep -q '"running":true'; do sleep 0.05; i=$((i + 1)); done
kill -TERM $SPID
wait $CPID
wait $SPID
src=$?
check "SIGTERM: the in-flight request still got 200" [ "$(cat "$WORK/inflight.code")" = 200 ]
check_grep "SIGTERM: and its answer" '"finish_reason"' "$WORK/inflight.json"
check "SIGTERM: server exited 0" [ "$src" -eq 0 ]
check "SIGTERM: port closed" sh -c "! curl -s -m 2 '$B/health' >/dev/null"
if grep -Eq 'AddressSanitizer|LeakSanitizer|runtime error' "$WORK/serve.err"; then
	not_ok "no ASan/UBSan report"; grep -E -A12 'AddressSanitizer|LeakSanitizer|runtime error' "$WORK/serve.err" | head -40 | sed 's/^/#   /'
else
	ok "no ASan/UBSan report"
fi

# a pruned LM head (a keepset, the challenge's 12k head in small): ids outside
# it can never be emitted, and log-probabilities say so: -9999 (-inf) and the
# rank after every kept id; the alternatives are kept ids
python3 -c "
import json
ids = sorted(set(range(0, 266)) | set(range(266, 512, 3)))
json.dump({'keep_ids': ids, 'pruned_vocab_K': len(ids), 'full_vocab': 512}, open('$WORK/keep.json', 'w'))"
"$FGPACK" bake prune-head "$M" --keepset "$WORK/keep.json" "$WORK/pruned" --no-sync >/dev/null 2>&1 && cp "$M/tokenizer.json" "$WORK/pruned/"
PORT2=$(free_port)
"$FGPACK" serve --model "$WORK/pruned" --port "$PORT2" 2>"$WORK/serve2.err" &
SPID2=$!
at_exit "kill $SPID2 2>/dev/null"
check "serve a pruned-head model" wait_port "$PORT2"
check "pruned head: an id outside the keepset has log-probability -9999 and the last rank; alternatives and answers are kept ids" python3 - "http://127.0.0.1:$PORT2" "$WORK/keep.json" <<'EOF'
import json, sys, urllib.request
base, keep = sys.argv[1], set(json.load(open(sys.argv[2]))["keep_ids"])
def post(d):
    return json.load(urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", json.dumps(d).encode())))
out = [i for i in range(266, 512) if i not in keep][:6]
c = post({"prompt": [2] + out, "max_tokens": 8, "ignore_eos": True, "prompt_logprobs": 4, "logprobs": 2})["choices"][0]
assert set(c["token_ids"]) <= keep, c["token_ids"]
for i, e in enumerate(c["prompt_logprobs"][1:], 1):
    me = e[str(out[i - 1])]
    assert me["logprob"] == -9999 and me["rank"] == len(keep) + 1, me
    assert all(int(k) in keep and v["logprob"] > -9999 for k, v in e.items() if int(k) != out[i - 1]), e
assert all(v > -9999 for d in c["logprobs"]["top_logprobs"] for v in d.values()), c["logprobs"]
EOF
kill $SPID2 2>/dev/null
# a model folder without tokenizer.json: token-id prompts only, and answers
# carry no text (the server once read the missing tokenizer at start)
mkdir -p "$WORK/notok" && cp "$M/config.json" "$M/model.safetensors" "$WORK/notok/"
PORT3=$(free_port)
"$FGPACK" serve --model "$WORK/notok" --port "$PORT3" 2>"$WORK/serve3.err" &
SPID3=$!
at_exit "kill $SPID3 2>/dev/null"
check "serve a model without a tokenizer" wait_port "$PORT3"
check "no tokenizer: token ids in, token ids and log-probabilities out, streamed and not, with a stop string" python3 - "http://127.0.0.1:$PORT3" <<'EOF'
import json, sys, urllib.request
base = sys.argv[1]
def post(d):
    return urllib.request.urlopen(urllib.request.Request(base + "/v1/completions", json.dumps(d).encode())).read().decode()
c = json.loads(post({"prompt": [2, 17, 33], "max_tokens": 6, "ignore_eos": True, "logprobs": 2, "stop": ["x"]}))["choices"][0]
assert len(c["token_ids"]) == 6 and c["text"] == "" and len(c["logprobs"]["token_logprobs"]) == 6, c
s = post({"prompt": [2, 17, 33], "max_tokens": 6, "ignore_eos": True, "stream": True})
ids = [i for l in s.split("\n") if l.startswith("data: {") for ch in json.loads(l[6:])["choices"] for i in ch.get("token_ids") or []]
assert ids == c["token_ids"], (ids, c["token_ids"])
EOF
kill $SPID3 2>/dev/null
finish
