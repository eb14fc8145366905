#!/bin/sh
# bundle_engine.sh - the engine that pack puts into a bundle is the
# self-contained build (make engine): ldd and the ELF dynamic section name
# glibc's own libraries only, every glibc symbol version it needs is 2.17 or
# older, and the engine taken out of the bundle replays the bundle's golden
# transcript and serves it. The same checks fail on the dynamic ./fgpack, so
# they can fail. See docs/formats/bundle.md.
. "$(dirname "$0")/../lib.sh"

MODEL=$TOP/tests/fixtures/oracle/bf16
ALLOWED='linux-vdso.so.1 libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 ld-linux-x86-64.so.2'

# self_contained FILE: 0 when FILE needs nothing beyond glibc <= 2.17
self_contained() {
	objdump -p "$1" >"$WORK/p.txt" || return 1
	for lib in $(awk '$1 == "NEEDED" { print $2 }' "$WORK/p.txt"); do
		case " $ALLOWED " in *" $lib "*) ;; *) echo "# NEEDED $lib" ; return 1 ;; esac
	done
	ldd "$1" >"$WORK/ldd.txt" 2>&1 || return 1
	grep -q 'not found' "$WORK/ldd.txt" && return 1
	for lib in $(awk '{ n = $1; sub(".*/", "", n); print n }' "$WORK/ldd.txt"); do
		case " $ALLOWED " in *" $lib "*) ;; *) echo "# ldd: $lib"; return 1 ;; esac
	done
	# version references: glibc's only, none newer than 2.17
	objdump -T "$1" | sed -n 's/.*(\([A-Za-z_]*[0-9][0-9.]*\)).*/\1/p' | sort -u >"$WORK/ver.txt"
	grep -v '^GLIBC_' "$WORK/ver.txt" | sed 's/^/# version /' | grep . && return 1
	sed 's/^GLIBC_//' "$WORK/ver.txt" | sort -V | tail -n 1 >"$WORK/max.txt"
	[ "$(printf '%s\n2.17\n' "$(cat "$WORK/max.txt")" | sort -V | tail -n 1)" = 2.17 ] ||
		{ echo "# needs GLIBC_$(cat "$WORK/max.txt")"; return 1; }
}

check "pack the tiny model" sh -c "'$FGPACK' pack --model '$MODEL' -o '$WORK/g.fgb' >'$WORK/g.id' 2>'$WORK/pack.err'"
check_fails "pack warned about nothing" grep -q warning "$WORK/pack.err"
mkdir -p "$WORK/x"
check "take engine/fgpack out of the bundle" sh -c "zstd -dc '$WORK/g.fgb' | tar -x -C '$WORK/x' engine/fgpack bundle.json"
E=$WORK/x/engine/fgpack
check "bundle.json: engine.static true" python3 -c "import json,sys; e=json.load(open('$WORK/x/bundle.json'))['engine']; sys.exit(0 if e['static'] is True and 'glibc 2.17' in e['requires'] else 1)"
check "the bundled engine is self-contained (ldd, NEEDED, glibc <= 2.17)" self_contained "$E"
check_fails "the same check rejects the dynamic fgpack" self_contained "$FGPACK"
objdump -T "$E" | grep -o 'GLIBC_[0-9.]*' | sort -V | uniq -c | sed 's/^/# /'
check "the engine says it is the engine build" sh -c "'$E' --version | grep -q ' engine$'"
check "verbs outside the engine say so" sh -c "'$E' pack 2>&1 | grep -q 'not in the engine build'"

cd "$WORK" || exit 1
check_exit "the bundled engine verifies its bundle" 0 "$E" verify g.fgb --max-new 16 --warmup 2 --summary "$WORK/s.json"
check_grep "its replay holds at the logits level" '"level": "logits"' "$WORK/s.json"
check_grep "verdict verified" '"verdict": "verified"' "$WORK/s.json"

# a transcript recorded on an H200 by this engine (verify --device cuda
# --record; docs/gpu.md): packed with --golden, replayed here on the CPU
H200=$TOP/tests/fixtures/golden/h200-bf16.json
check "pack --golden with the H200 transcript" sh -c "'$FGPACK' pack --model '$MODEL' --golden '$H200' -o '$WORK/h.fgb' >/dev/null"
check "bundle.json names the H200 as the recording device" sh -c "zstd -dc '$WORK/h.fgb' | tar -xO bundle.json | grep -q '\"gpu\": \"NVIDIA H200'"
"$E" verify h.fgb --no-bench --summary "$WORK/h.json" >/dev/null 2>&1
check "the CPU replays the H200 transcript: exit 0" [ $? -eq 0 ]
check_grep "... at the tokens level (another device class)" '"level": "tokens"' "$WORK/h.json"
check_grep "... verdict verified-tokens" '"verdict": "verified-tokens"' "$WORK/h.json"
check_exit "verify --record writes this device's transcript" 0 "$E" verify h.fgb --no-bench --record "$WORK/mine.json" --summary -
check_exit "verify --transcript replays it at the logits level" 0 sh -c "'$E' verify h.fgb --no-bench --transcript '$WORK/mine.json' --summary '$WORK/m.json' && grep -q '\"level\": \"logits\"' '$WORK/m.json'"
check "the H200 transcript is another device class here, named in the summary" python3 -c "
import json, sys
g = json.load(open(sys.argv[1]))['golden']
assert g['same_device_class'] is False and g['device_differences'].startswith('kind: cuda -> cpu'), g" "$WORK/h.json"
# identity is not class: the same transcript claiming another driver, CPU
# model and engine build still replays at the logits level, with a note
python3 - "$WORK/mine.json" "$WORK/drv.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["device"].update(driver_version="999.1.2", engine_build="0000000", cpu="Some Other CPU")
json.dump(t, open(sys.argv[2], "w"))
PY
"$E" verify h.fgb --no-bench --transcript "$WORK/drv.json" --summary "$WORK/drv.s.json" >/dev/null 2>"$WORK/drv.err"
check "another driver version, CPU model, engine build: exit 0" [ $? -eq 0 ]
check "... level logits, same device class" python3 -c "
import json, sys
g = json.load(open(sys.argv[1]))['golden']
assert g['level'] == 'logits' and g['same_device_class'] is True, g
assert 'driver_version: 999.1.2 -> (not recorded)' in g['device_differences'], g" "$WORK/drv.s.json"
check_grep "... a note names what differs" 'note: recorded on the same device class; identity differs \(not a failure\): cpu: Some Other CPU -> ' "$WORK/drv.err"
check_fails "pack --golden refuses a file that is no transcript" sh -c "'$FGPACK' pack --model '$MODEL' --golden '$WORK/h.json' -o '$WORK/bad.fgb' 2>/dev/null"

PORT=$(free_port)
"$E" serve g.fgb --port "$PORT" 2>"$WORK/serve.err" &
SPID=$!
at_exit "kill $SPID 2>/dev/null"
check "the bundled engine serves" wait_port "$PORT"
check_grep "... its files checked, the bundle read in lanes (its engine starts a frame of its own)" 'fgpack serve: [0-9]* files checked against bundle.json in .*[^0-9][2-9][0-9]* lanes' "$WORK/serve.err"
check "GET /health answers" sh -c "curl -sf http://127.0.0.1:$PORT/health >/dev/null"
check_grep "... it names the bundle by its id, computed by the lanes from the id's states (the sha256 of its tar)" "^fgpack serve: bundle $(zstd -dc g.fgb | sha256sum | cut -c1-64)\$" "$WORK/serve.err"
check "a completion from token ids" sh -c "curl -sf http://127.0.0.1:$PORT/v1/completions -H 'content-type: application/json' -d '{\"prompt\": [2, 17, 30], \"max_tokens\": 4}' | grep -q '\"choices\"'"
kill "$SPID"
wait "$SPID"
check "SIGTERM: exit 0" [ $? -eq 0 ]
# a bundle without the id's states (as packed before 2026-12-04): the id
# read from start to end beside the extraction, the same id
FG_TAR_ID_STATES=0 "$FGPACK" pack --model "$MODEL" --no-golden --engine "$E" -o "$WORK/nost.fgb" >/dev/null 2>&1
PORT=$(free_port)
"$E" serve "$WORK/nost.fgb" --port "$PORT" 2>"$WORK/serve0.err" &
SPID=$!
at_exit "kill $SPID 2>/dev/null"
check "a bundle without the id's states serves" wait_port "$PORT"
check_grep "... named by its id, read beside the extraction" "^fgpack serve: bundle $(zstd -dc "$WORK/nost.fgb" | sha256sum | cut -c1-64)\$" "$WORK/serve0.err"
kill "$SPID"
wait "$SPID"

# no engine beside fgpack and none named: pack bundles the fgpack that runs,
# by its own path, and warns that it is not the self-contained build
mkdir -p "$WORK/alone"
cp "$FGPACK" "$WORK/alone/fgpack"
check "pack with no engine beside it: bundles itself" sh -c "env -u FGPACK_ENGINE '$WORK/alone/fgpack' pack --model '$MODEL' --no-golden -o '$WORK/self.fgb' >/dev/null 2>'$WORK/self.err'"
check_grep "... and warns" "warning: the engine $WORK/alone/fgpack is not the self-contained build" "$WORK/self.err"
check "... the bundled engine is that fgpack" sh -c "zstd -dc '$WORK/self.fgb' | tar -xO engine/fgpack | cmp - '$WORK/alone/fgpack'"
finish
