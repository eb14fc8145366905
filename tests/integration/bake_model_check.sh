#!/bin/sh
# bake_model_check.sh - `bake int4` and `bake prune-head` refuse, before writing
# anything, a checkpoint that `fgpack run` would refuse: a tensor whose shape
# is not the one config.json implies, or a tensor the model needs that is not
# there (the engine loader's own check, fg_g4_model_check). Each refusal is one
# line naming the tensor, the shard file, the shape found and the one
# expected; exit 1; no output folder, temporary folder or statement left.
# `run` names the file in the same words. Extra tensors stay accepted.
# Altered copies of the tiny oracle fixtures, edited here in shell (the
# safetensors header is JSON: sed on it, then padded and re-prefixed).
. "$(dirname "$0")/../lib.sh"
FIX=$TOP/tests/fixtures/oracle
L=model.language_model.layers
cd "$WORK" || exit 1

le64() { # N: 8 bytes, little-endian (its variables named apart: sh has no locals)
	le_v=$1
	le_i=0
	while [ $le_i -lt 8 ]; do
		printf "\\$(printf '%03o' $((le_v % 256)))"
		le_v=$((le_v / 256))
		le_i=$((le_i + 1))
	done
}
# st_edit SRC DST SED [TAILFILE]: DST is SRC with sed SED applied to its
# header (spaces appended to a multiple of 8 bytes, the length prefix
# rewritten); TAILFILE's bytes, when given, appended to the data.
st_edit() {
	n=$(head -c 8 "$1" | od -An -tu8 | tr -d ' ')
	tail -c +9 "$1" | head -c "$n" | sed "$3" >hdr.tmp
	while [ $(($(wc -c <hdr.tmp) % 8)) -ne 0 ]; do printf ' ' >>hdr.tmp; done
	{ le64 "$(wc -c <hdr.tmp)"; cat hdr.tmp; tail -c +$((9 + n)) "$1"; [ -z "${4:-}" ] || cat "$4"; } >"$2"
	rm -f hdr.tmp
}
# variant NAME SED: a copy of the bf16 fixture with its header edited
variant() {
	mkdir "$1" && cp "$FIX/bf16/config.json" "$FIX/bf16/tokenizer.json" "$1/" &&
		st_edit "$FIX/bf16/model.safetensors" "$1/model.safetensors" "$2"
}
# refused VERB NAME PATTERN SRC: bake VERB of SRC exits 1 with one line
# matching PATTERN and leaves nothing behind
refused() {
	verb=$1
	shift
	rm -rf badout badout.* err
	if [ "$verb" = int4 ]; then
		"$FGPACK" bake int4 "$3" badout --group 32 -j 2 >/dev/null 2>err
	else
		"$FGPACK" bake prune-head "$3" --keepset keep.json badout >/dev/null 2>err
	fi
	rc=$?
	if [ $rc -eq 1 ] && [ "$(wc -l <err)" -eq 1 ] && grep -Eq -- "$2" err && [ ! -e badout ] &&
		[ -z "$(ls -a | grep 'badout')" ]; then
		ok "$1"
	else
		not_ok "$1 (exit $rc)"
		sed 's/^/#   /' err
		ls -a | grep badout | sed 's/^/#   left: /'
	fi
}
printf '{"keep_ids": [0, 1, 2, 3, 5, 8, 13, 106, 300], "pruned_vocab_K": 9, "full_vocab": 512}\n' >keep.json

# layer 0's q_proj is [4 heads x 32][96]: the same bytes claimed as [96][128]
variant q 's/\("'$L'\.0\.self_attn\.q_proj\.weight":{"data_offsets":\[[0-9]*,[0-9]*\],"dtype":"BF16","shape":\[\)128,96\]/\196,128]/'
check "a q_proj of the wrong shape (header edited)" grep -q '"shape":\[96,128\]' q/model.safetensors
Q="q/model.safetensors: tensor $L\\.0\\.self_attn\\.q_proj\\.weight has shape 96 x 128, expected 128 x 96$"
refused int4 "bake int4: a q_proj of the wrong shape is refused, naming file, tensor and both shapes" "$Q" q
refused prune "bake prune-head: the same" "$Q" q
check_exit "run refuses it (exit 1)" 1 "$FGPACK" run --model q --ids 2,17 -n 2
check_grep "... naming the file, the tensor and both shapes" "$Q" "$WORK/.out"

# layer 0's input_layernorm is [96]: claimed as [48][2]
variant norm 's/\("'$L'\.0\.input_layernorm\.weight":{"data_offsets":\[[0-9]*,[0-9]*\],"dtype":"BF16","shape":\[\)96\]/\148,2]/'
N="norm/model.safetensors: tensor $L\\.0\\.input_layernorm\\.weight has dtype BF16 shape \\[48 x 2\\], expected BF16/F16/F32 \\[96\\]$"
refused int4 "bake int4: a norm weight of the wrong shape is refused" "$N" norm
refused prune "bake prune-head: the same" "$N" norm

# layer 0's up_proj under another name: missing (the renamed one is an extra)
variant miss 's/\('$L'\.0\.mlp\.up\)_proj\.weight/\1_xxxx.weight/'
M="miss: tensor $L\\.0\\.mlp\\.up_proj\\.weight is missing from the checkpoint$"
refused int4 "bake int4: a missing tensor is refused" "$M" miss
refused prune "bake prune-head: the same" "$M" miss
check_exit "run refuses it too" 1 "$FGPACK" run --model miss --ids 2,17 -n 2
check_grep "... in the same words" "$M" "$WORK/.out"

# the sharded multimodal fixture: the shard holding the tensor is named
cp -r "$FIX/variants/mm-e4b-sharded" shq
S=$(tr ',' '\n' <shq/model.safetensors.index.json | grep "\"$L.0.self_attn.q_proj.weight\"" | sed 's/.*: *"\([^"]*\)".*/\1/')
check "the index names the shard of layer 0's q_proj" test -f "shq/$S"
shape=$(tail -c +9 "shq/$S" | head -c "$(head -c 8 "shq/$S" | od -An -tu8 | tr -d ' ')" |
	sed 's/.*"'$L'\.0\.self_attn\.q_proj\.weight":{[^}]*"shape":\[\([0-9]*\),\([0-9]*\)\].*/\1 \2/')
set -- $shape
st_edit "$FIX/variants/mm-e4b-sharded/$S" "shq/$S" 's/\("'$L'\.0\.self_attn\.q_proj\.weight":{[^}]*"shape":\[\)'$1,$2'\]/\1'$2,$1']/'
refused int4 "sharded: the shard file is named" "shq/$S: tensor $L\\.0\\.self_attn\\.q_proj\\.weight has shape $2 x $1, expected $1 x $2$" shq

# an extra tensor the model does not read is accepted, as before
printf '\001\002' >extra.bin
end=$(($(wc -c <"$FIX/bf16/model.safetensors") - 8 - $(head -c 8 "$FIX/bf16/model.safetensors" | od -An -tu8 | tr -d ' ')))
mkdir extra && cp "$FIX/bf16/config.json" "$FIX/bf16/tokenizer.json" extra/
st_edit "$FIX/bf16/model.safetensors" extra/model.safetensors 's/^{/{"zz.unrelated.weight":{"data_offsets":['$end,$((end + 2))'],"dtype":"BF16","shape":[1]},/' extra.bin
check "a checkpoint with an extra tensor bakes" sh -c "'$FGPACK' bake int4 extra extra4 --group 32 >/dev/null 2>&1"
check "... which passes it through" grep -q 'zz.unrelated.weight' extra4/model.safetensors
check "... and runs" "$FGPACK" run --model extra4 --ids 2,17 -n 2
check "... and prune-head takes it" sh -c "'$FGPACK' bake prune-head extra extrap --keepset keep.json >/dev/null 2>&1"

# the unaltered fixture still bakes, and the bake runs as the INT4 fixture does
mkdir src && cp "$FIX/bf16/config.json" "$FIX/bf16/model.safetensors" "$FIX/bf16/tokenizer.json" src/
check "the unaltered fixture bakes" sh -c "'$FGPACK' bake int4 src baked --group 32 >/dev/null 2>&1"
check "... to the INT4 fixture's bytes" cmp baked/model.safetensors "$FIX/int4/model.safetensors"
"$FGPACK" run --model baked --ids 2,17,300,5 -n 8 --ignore-eos --json >r1 2>/dev/null
"$FGPACK" run --model "$FIX/int4" --ids 2,17,300,5 -n 8 --ignore-eos --json >r2 2>/dev/null
check "... and runs to the INT4 fixture's tokens" sh -c "grep -o '\"generated_ids\":\[[0-9,]*\]' r1 >g1 && grep -o '\"generated_ids\":\[[0-9,]*\]' r2 >g2 && test -s g1 && cmp g1 g2"
check "prune-head of the bake, and its result runs" sh -c "'$FGPACK' bake prune-head baked --keepset keep.json bakedp >/dev/null 2>&1 && '$FGPACK' run --model bakedp --ids 2,17 -n 2 >/dev/null 2>&1"
finish
