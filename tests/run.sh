#!/bin/sh
# run.sh - the test runner behind `make check` (unit) and `make test` (all).
# Runs every unit binary, every fuzz corpus replay and every integration
# script, counts their "ok"/"not ok" lines, and ends with "N passed, N failed".
# A suite that exits non-zero without printing a "not ok" counts one failure.
# T=<pattern> (environment) runs only suites whose name contains it.
set -u
mode=${1:-all}
build=${FG_BUILD:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
logdir=$build/test-logs
mkdir -p "$logdir"
pass=0
fail=0
failed_suites=""

run_suite() { # name, command...
	name=$1
	shift
	case "$name" in *"${T:-}"*) ;; *) return 0 ;; esac
	log="$logdir/$(echo "$name" | tr '/ ' '__').log"
	start=$(date +%s)
	"$@" >"$log" 2>&1
	rc=$?
	p=$(grep -c '^ok ' "$log")
	f=$(grep -c '^not ok ' "$log")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		echo "not ok - $name exited $rc" >>"$log"
	fi
	if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
		f=1
		echo "not ok - $name ran no test" >>"$log"
	fi
	pass=$((pass + p))
	fail=$((fail + f))
	secs=$(($(date +%s) - start))
	if [ "$f" -eq 0 ]; then
		printf '%-44s %4d ok   (%ss)\n' "$name" "$p" "$secs"
	else
		printf '%-44s %4d ok %d FAILED (%ss) log: %s\n' "$name" "$p" "$f" "$secs" "$log"
		grep -A3 '^not ok' "$log" | head -40 | sed 's/^/    /'
		failed_suites="$failed_suites $name"
	fi
}

for t in "$build"/tests/test_*; do
	[ -x "$t" ] || continue
	run_suite "unit/$(basename "$t")" "$t"
done

if [ "$mode" = all ]; then
	for r in "$build"/fuzz/replay_*; do
		[ -x "$r" ] || continue
		n=${r##*/replay_}
		run_suite "fuzz/$n" "$r" "tests/fuzz/corpus/$n"
	done
	for s in tests/integration/*.sh; do
		[ -f "$s" ] || continue
		run_suite "integration/$(basename "$s" .sh)" env FG_BUILD="$build" FGPACK="$top/${FG_BIN:-fgpack}" sh "$s"
	done
fi

[ -n "$failed_suites" ] && echo "failed suites:$failed_suites"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
