#!/bin/sh
# sigv4_botocore.sh - fgpack's SigV4 against botocore's S3SigV4Auth (Debian
# python3-botocore), byte for byte: same requests (keys with spaces, unicode,
# '+', '~', '%'; "?uploads"; repeated and unsorted parameters; session token;
# odd secrets), same fixed time; URL and Authorization header must be equal.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
SIGNER=${FG_BUILD:-build}/tests/test_sigv4
cd "$TOP" || exit 1

check "botocore importable" "$PY" -c "import botocore.auth"
"$PY" tests/integration/sigv4_botocore.py cases >"$WORK/cases.jsonl"
"$PY" tests/integration/sigv4_botocore.py sign >"$WORK/botocore.txt"
"$SIGNER" --sign <"$WORK/cases.jsonl" >"$WORK/fgpack.txt"
n=$(wc -l <"$WORK/cases.jsonl")
check "all $n cases signed by both" test "$n" -ge 14 -a "$(wc -l <"$WORK/botocore.txt")" -eq "$n" \
	-a "$(wc -l <"$WORK/fgpack.txt")" -eq "$n"
i=0
while [ $i -lt "$n" ]; do
	i=$((i + 1))
	a=$(sed -n "${i}p" "$WORK/botocore.txt")
	b=$(sed -n "${i}p" "$WORK/fgpack.txt")
	if [ "$a" = "$b" ]; then ok "case $i: ${a%% *}"; else not_ok "case $i"; echo "#   botocore: $a"; echo "#   fgpack:   $b"; fi
done
# the comparison is sensitive: a one-character change in a secret changes the header
sed 's/"secret": "wJalr/"secret": "wJalR/' "$WORK/cases.jsonl" | "$SIGNER" --sign >"$WORK/tampered.txt"
check_fails "a different secret gives a different header" cmp -s "$WORK/tampered.txt" "$WORK/botocore.txt"
finish
