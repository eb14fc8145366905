#!/bin/sh
# run_ab.sh - an alternated A/B of `fgpack run` decode speed: builds of
# fgpack, or engine settings given through the environment (FG_INT4_KERNEL,
# FG_CHAIN, ...), on one model. RUNS rounds (default 3), each running every
# variant once in turn, so that the machine's moods fall on all of them
# alike. Prints every run's tokens/s, then each variant's median and its
# ratio to the first variant's, and whether every run generated the same
# ids (a setting that keeps the bits keeps them; one that does not shows).
#   usage: sh bench/run_ab.sh MODEL VARIANT...
#   VARIANT: LABEL=FGPACK[,NAME=VALUE...]  (values without commas), e.g.
#     sh bench/run_ab.sh /tmp/e4b-k12 main=./fgpack fma=./fgpack,FG_INT4_SMALL=fma
# AB_DEVICE (default cuda), AB_N (tokens generated, default 256), AB_IDS
# (the prompt's token ids, default 2), RUNS. The sessions' GPU A/Bs in
# docs/bench.md are this loop. Without arguments (`make bench`) it says
# what it needs and exits 0.
set -u
if [ $# -eq 0 ]; then
	echo "bench/run_ab.sh compares fgpack builds or settings: sh bench/run_ab.sh MODEL LABEL=FGPACK[,NAME=VALUE...]... (skipped)"
	exit 0
fi
[ $# -ge 2 ] || { echo "usage: sh bench/run_ab.sh MODEL LABEL=FGPACK[,NAME=VALUE...]..." >&2; exit 2; }
model=$1
shift
for v in "$@"; do
	case "$v" in
	*=*) ;;
	*) echo "run_ab: $v: a variant is LABEL=FGPACK[,NAME=VALUE...]" >&2; exit 2 ;;
	esac
	b=${v#*=}
	b=${b%%,*}
	[ -x "$b" ] || { echo "run_ab: $b: not an executable fgpack" >&2; exit 2; }
done
W=$(mktemp -d) || exit 1
trap 'rm -rf "$W"' EXIT
dev=${AB_DEVICE:-cuda}
echo "model $model, device $dev, ${AB_N:-256} tokens from ids ${AB_IDS:-2}, ${RUNS:-3} rounds"
for r in $(seq "${RUNS:-3}"); do
	i=0
	for v in "$@"; do
		i=$((i + 1))
		label=${v%%=*}
		rest=${v#*=}
		bin=${rest%%,*}
		envs=$(echo "${rest#"$bin"}" | tr ',' ' ')
		# shellcheck disable=SC2086 # the settings are words on purpose
		out=$(env $envs "$bin" run --model "$model" --ids "${AB_IDS:-2}" -n "${AB_N:-256}" --ignore-eos \
			--device "$dev" --json 2>"$W/err")
		tps=$(echo "$out" | sed -n 's/.*"tokens_per_s": *\([0-9.eE+-]*\).*/\1/p')
		ids=$(echo "$out" | tr -d ' \n' | sed -n 's/.*"generated_ids":\[\([^]]*\)\].*/\1/p' | cksum | cut -d' ' -f1)
		if [ -z "$tps" ]; then
			echo "run_ab: $label failed: $(tail -n 1 "$W/err")" >&2
			exit 1
		fi
		echo "$tps" >>"$W/tps.$i"
		echo "$ids" >>"$W/ids"
		printf 'round %d  %-16s %10s tokens/s  ids %s\n' "$r" "$label" "$tps" "$ids"
	done
done
i=0
base=
for v in "$@"; do
	i=$((i + 1))
	m=$(sort -n "$W/tps.$i" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	[ -n "$base" ] || base=$m
	printf '%-16s median %10s tokens/s  %.3f of %s\n' "${v%%=*}" "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN {print a / b}')" \
		"${1%%=*}"
done
if [ "$(sort -u "$W/ids" | wc -l)" -eq 1 ]; then
	echo "generated ids: the same in every run"
else
	echo "generated ids: DIFFER between runs ($(sort -u "$W/ids" | wc -l) different)"
fi
