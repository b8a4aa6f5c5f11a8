#!/usr/bin/env bash
# test_spec_cli.sh — `--spec mtp` on the command line (model.h hmoe_spec_*), on a synthetic
# qwen35-tiny file with its MTP block: `run` greedy and with a seeded sampler prints the same
# text with and without drafts (several prompts, --draft-max 1 / 3 / 6), `chat` through a pipe
# answers two turns the same, `serve` (one slot) the same completions, `bench --spec mtp` prints the acceptance and the verification costs,
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

# serve: the same greedy completions with and without drafts (one slot), two requests each
serve_answers() { # serve_answers OUT ARGS...: two /v1/completions answers into OUT
    local out=$1 log="$T/serve.log"
    shift
    timeout 120 $H serve -m "$M" -t 2 -q --gpu off --temp 0 --port 0 "$@" >"$log" 2>&1 &
    local pid=$! url=""
    for _ in $(seq 1 100); do
        url=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -n 1)
        [ -n "$url" ] && break
        sleep 0.1
    done
    for _ in $(seq 1 200); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url/health")" = 200 ] && break
        sleep 0.1
    done
    : >"$out"
    for p in "hello world" "hello world and more"; do
        curl -s --max-time 60 "$url/v1/completions" -H 'Content-Type: application/json' \
            -d "{\"prompt\": \"$p\", \"max_tokens\": 24, \"temperature\": 0}" >>"$out"
        echo >>"$out"
    done
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
}
if $H serve --help >/dev/null 2>&1 && command -v curl >/dev/null && command -v python3 >/dev/null; then
    serve_answers "$T/s0"
    serve_answers "$T/s1" --spec mtp --draft-max 3
    # the answers without their timings and ids
    strip() { python3 -c 'import json,sys; [print(json.dumps(json.loads(l)["choices"][0]["text"])) for l in open(sys.argv[1]) if l.strip()]' "$1" 2>/dev/null; }
    [ "$(strip "$T/s0" | wc -l)" -eq 2 ] && [ "$(strip "$T/s0")" = "$(strip "$T/s1")" ]
    check "serve --spec mtp: the same completions as without drafts" $? "$(head -c 300 "$T/s0") | $(head -c 300 "$T/s1")"
    timeout 60 $H serve -m "$M" -t 2 -q --gpu off --port 0 -np 2 --spec mtp >"$T/log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && grep -q -- '-np 1' "$T/log"
    check "serve -np 2 --spec mtp: refused (one slot)" $? "rc $rc $(head -c 300 "$T/log")"
fi

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
