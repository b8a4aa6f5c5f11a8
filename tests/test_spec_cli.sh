#!/usr/bin/env bash
# test_spec_cli.sh — `--spec mtp` on the command line (model.h hmoe_spec_*), on a synthetic
# qwen35-tiny file with its MTP block: `run` greedy and with a seeded sampler prints the same
# text with and without drafts (several prompts, --draft-max 1 / 3 / 6), `chat` through a pipe
# answers two turns the same, `bench --spec mtp` prints the acceptance and the verification costs,
# and the refusals are clear (no MTP block, an unknown drafter, --draft-max out of range).
# Prints the harness format: one "name ... ok|FAIL" line per case, then "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
H=./hmoe
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
check() { # check NAME STATUS DETAIL
    if [ "$2" -eq 0 ]; then echo "$1 ... ok"; pass=$((pass + 1)); else echo "$1 ... FAIL: $3"; fail=$((fail + 1)); fi
}
M="$T/q35.gguf"
$H synth --preset qwen35-tiny -q -o "$M"
check "synth qwen35-tiny writes a file" $? "hmoe synth failed"
R="-m $M -n 32 -q --gpu off -t 2"
for p in "hello world" "the quick brown fox jumps over" "1 2 3 4 5 6 7 8 9 10 11 12"; do
    $H run $R -p "$p" --temp 0 >"$T/ref" 2>/dev/null
    for n in 1 3 6; do
        $H run $R -p "$p" --temp 0 --spec mtp --draft-max $n >"$T/out" 2>"$T/err"
        cmp -s "$T/ref" "$T/out"
        check "run --temp 0 --spec mtp --draft-max $n, prompt '$p': the same text" $? "$(head -c 300 "$T/err")"
    done
done
$H run $R -p "once upon a time" --temp 0.8 -s 7 >"$T/ref" 2>/dev/null
$H run $R -p "once upon a time" --temp 0.8 -s 7 --spec mtp >"$T/out" 2>"$T/err"
cmp -s "$T/ref" "$T/out"
check "run --temp 0.8 -s 7 --spec mtp: the same text as without drafts" $? "$(head -c 300 "$T/err")"
$H run $R -p "hello" --temp 0 --spec mtp -v >/dev/null 2>"$T/err"
grep -q -- '--spec mtp: [0-9]* steps, [0-9]* drafted, [0-9]* accepted' "$T/err"
check "run -v --spec mtp reports the steps and the acceptance" $? "$(tail -c 300 "$T/err")"

printf 'hello there\nhow are you\n' >"$T/in"
$H chat -m "$M" -n 20 -q --gpu off -t 2 --temp 0 --show-think <"$T/in" >"$T/ref" 2>/dev/null
$H chat -m "$M" -n 20 -q --gpu off -t 2 --temp 0 --show-think --spec mtp --draft-max 2 <"$T/in" >"$T/out" 2>"$T/err"
cmp -s "$T/ref" "$T/out" && [ -s "$T/out" ]
check "chat --spec mtp: two turns answered as without drafts" $? "$(head -c 300 "$T/err")"

$H bench -m "$M" --gpu off -t 2 -p 16 -n 8 -r 1 --spec mtp --draft-max 3 >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 0 ] && grep -q 'acceptance' "$T/out" && grep -q 'verify' "$T/out" && grep -q 'speed-up at 0.9' "$T/out"
check "bench --spec mtp: acceptance, verification cost and speed-ups" $? "rc $rc $(head -c 400 "$T/err") $(head -c 400 "$T/out")"

$H synth --preset tiny -q -o "$T/q3.gguf"
$H run -m "$T/q3.gguf" -p hi -n 4 -q --gpu off --spec mtp >/dev/null 2>"$T/err"
rc=$?
[ $rc -ne 0 ] && grep -q 'MTP' "$T/err"
check "run --spec mtp on a model without an MTP block: a clear error" $? "rc $rc $(cat "$T/err")"
$H run $R -p hi --spec eagle >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 2 ] && grep -q 'mtp' "$T/err"
check "--spec eagle: usage error naming mtp" $? "rc $rc $(cat "$T/err")"
$H run $R -p hi --spec mtp --draft-max 40 >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 2 ] && grep -q 'draft-max' "$T/err"
check "--draft-max 40: usage error" $? "rc $rc $(cat "$T/err")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
