#!/bin/sh
# ktrace_layer.sh - one stretch of a traced step (make KTRACE=1,
# FG_KTRACE_OUT; docs/gpu.md, "Where a step's time goes") as a table: each
# launch's chain (its first wait to the next launch's, us) and its marks
# 2-7 as the last block's time after its first wait (us; "-" where the
# kernel has no such mark). With a second trace, the two side by side
# (chain of A, chain of B, B - A), for an A/B of the same step.
#   usage: bench/ktrace_layer.sh TRACE.tsv [FIRST [LAST]] [TRACE_B.tsv]
# FIRST and LAST are launch numbers (the seq column); the default is the
# step's second layer, found from its attention launch (pass them where
# the guess is wrong).
set -u
a=${1:?usage: ktrace_layer.sh TRACE.tsv [FIRST [LAST]] [TRACE_B.tsv]}
first=${2:-}
last=${3:-}
b=${4:-}
if [ -z "$first" ]; then
	# a layer runs norm, q|k|v (or q), attention, ...: from two launches
	# before the step's second attention to three before its third
	set -- $(awk -F'\t' 'NR > 1 && $2 ~ /^attn_fused/ { print $1 }' "$a" | sed -n '2p;3p')
	first=$(( ${1:-2} - 2 ))
	last=$(( ${2:-22} - 3 ))
fi
awk -F'\t' -v f="$first" -v l="$last" -v B="$b" '
	# columns by their header names (the first traces had marks 2-3 only)
	function cols(line, arr,    c, i, n) {
		n = split(line, c, "\t")
		for (i = 1; i <= n; i++) arr[c[i]] = i
	}
	function us(t, w) { return t < 0 ? "-" : sprintf("%.2f", (t - w) / 1000) }
	BEGIN {
		if (B != "") {
			getline line < B
			cols(line, hb)
			while ((getline line < B) > 0) {
				split(line, c, "\t")
				chb[c[1]] = c[hb["chain"]]
			}
		}
	}
	NR == 1 {
		cols($0, h)
		printf "%-4s %-40s %11s %8s", "seq", "kernel", "blocks x thr", "chain"
		if (B != "") printf " %8s %8s", "chain B", "B - A"
		printf "  marks after the first wait, us:"
		for (m = 2; m <= 7; m++) if (("mark" m "_last") in h) printf " %d", m
		printf "\n"
		next
	}
	$1 >= f && $1 <= l {
		ch = $h["chain"]
		printf "%-4s %-40.40s %11s %8.2f", $1, $2, $3 "x" $4, ch / 1000
		if (B != "") printf " %8.2f %+8.2f", chb[$1] / 1000, (chb[$1] - ch) / 1000
		printf " "
		for (m = 2; m <= 7; m++) if (("mark" m "_last") in h) printf " %6s", us($h["mark" m "_last"], $h["wait"])
		printf "\n"
		sa += ch; if (B != "") sb += chb[$1]
	}
	END {
		printf "sum of chains: %.2f us", sa / 1000
		if (B != "") printf "; B %.2f us (%+.2f)", sb / 1000, (sb - sa) / 1000
		printf "\n"
	}' "$a"
