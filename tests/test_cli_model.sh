#!/usr/bin/env bash
# test_cli_model.sh — `hmoe logits` and `hmoe run` end to end against the goldens
# (fixtures/README.md §4): logits written with -o match llama.cpp's .f32 rows, --top shows
# llama.cpp's top-1, `run` tokenizes the golden prompts to the golden ids (plain and --chat
# --no-think) and greedily generates llama.cpp's continuation (F32 mini model, F32 KV), its
# sampling runs and is seeded, its timings are printed; error exits and the -c cap warning.
# Prints the harness format: one "name ... ok|FAIL" line per case, then "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
S="${HMOE_SHARED:-tests}"
G="$S/fixtures/golden"
MINI="$S/fixtures/models/tiny-qwen3moe-A-mini-F32.gguf"
Q4="$S/fixtures/models/tiny-qwen3moe-A-Q4_K_M.gguf"
H=./hmoe
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
check() { # check NAME STATUS DETAIL
    if [ "$2" -eq 0 ]; then echo "$1 ... ok"; pass=$((pass + 1)); else echo "$1 ... FAIL: $3"; fail=$((fail + 1)); fi
}
# A prompt's field from a one-line sidecar: field PROMPT KEY FILE -> "a,b,c" (no spaces).
field() { sed -e "s/.*\"name\":\"$1\"//" "$3" | grep -o "\"$2\":\[[^]]*\]" | head -n 1 | sed -e 's/.*\[//' -e 's/\]//' -e 's/ //g'; }
# Max |a-b| of two raw float32 files (od prints both in the same order).
maxdiff() { paste <(od -An -v -f -w4 "$1") <(od -An -v -f -w4 "$2") |
            awk '{d=$1-$2; if (d<0) d=-d; if (d>m) m=d} END {if (NR==0) print "inf"; else printf "%.3g\n", m}'; }
SIDE="$G/tiny-qwen3moe-A-mini-F32.json"
KV="-ctk f32 -ctv f32 -t 1 --gpu off"  # F32 KV on the CPU path

# logits -o: p02 (7 positions, all stored) vs the golden file, F32 limit 1e-4.
ids=$(field p02_rand7 ids "$SIDE")
$H logits -m "$MINI" --ids "$ids" $KV -o "$T/p02.f32" >/dev/null 2>"$T/err"
rc=$?
sz=$(stat -c %s "$T/p02.f32" 2>/dev/null || echo 0)
d=$(maxdiff "$T/p02.f32" "$G/tiny-qwen3moe-A-mini-F32/p02_rand7.f32")
awk -v d="$d" 'BEGIN {exit !(d <= 1e-4)}'
check "cli logits -o: p02 [7][4101] float32 within 1e-4 of llama.cpp (max |d| $d)" $(( rc != 0 || sz != 7*4101*4 || $? )) "rc $rc size $sz max $d: $(cat "$T/err")"

# --ids-file and --top: position 0 of p01 has llama.cpp's top-1 560 first.
echo "[$(field p01_rand1 ids "$SIDE")]" > "$T/ids.txt"
out=$($H logits -m "$MINI" --ids-file "$T/ids.txt" $KV --top 3 2>&1)
first=$(printf '%s\n' "$out" | head -n 1 | awk -F'|' '{print $2}' | awk '{print $1}')
top1=$(field p01_rand1 top5_ids "$SIDE" | sed 's/\[//g' | cut -d, -f1)
[ "$first" = "$top1" ] && [ -n "$top1" ]
check "cli logits --ids-file --top 3: top-1 is llama.cpp's ($top1)" $? "got '$out'"

# run: plain text prompt -> golden ids and golden greedy continuation.
text='The quick brown fox jumps over the lazy dog. In 1492, Columbus sailed the ocean blue.'
$H run -m "$MINI" -p "$text" -n 24 --temp 0 --ignore-eos --no-display-prompt $KV --verbose >"$T/out" 2>"$T/err"
rc=$?
got_p=$(grep '^prompt ids:' "$T/err" | sed -e 's/.*\[//' -e 's/\]//' -e 's/ //g')
got_g=$(grep '^generated ids:' "$T/err" | sed -e 's/.*\[//' -e 's/\]//' -e 's/ //g')
exp_p=$(field p05_text ids "$SIDE"); exp_g=$(field p05_text greedy_continuation "$SIDE")
[ $rc -eq 0 ] && [ -n "$exp_p" ] && [ "$got_p" = "$exp_p" ]
check "cli run -p TEXT: prompt tokenized to the golden p05 ids" $? "rc $rc got '$got_p' want '$exp_p'"
[ $rc -eq 0 ] && [ -n "$exp_g" ] && [ "$got_g" = "$exp_g" ]
check "cli run --temp 0 -n 24: llama.cpp's greedy continuation" $? "got '$got_g' want '$exp_g'"
grep -q 'prompt eval time = .* ms / *39 tokens (.* ms per token, .* tokens per second)' "$T/err" &&
    grep -q ' eval time = .* ms / *23 runs' "$T/err" && grep -q 'load time = ' "$T/err" && grep -q 'total time = ' "$T/err"
check "cli run prints llama.cpp-style timings (39 prompt tokens, 23 eval runs)" $? "$(tail -n 6 "$T/err")"

# run --chat --no-think: the Qwen3 template around one user turn gives the golden p06 ids.
$H run -m "$MINI" -p 'What is the capital of France?' --chat --no-think -n 24 --temp 0 --ignore-eos $KV --verbose \
    >"$T/out" 2>"$T/err"
rc=$?
got_p=$(grep '^prompt ids:' "$T/err" | sed -e 's/.*\[//' -e 's/\]//' -e 's/ //g')
got_g=$(grep '^generated ids:' "$T/err" | sed -e 's/.*\[//' -e 's/\]//' -e 's/ //g')
exp_p=$(field p06_chat ids "$SIDE"); exp_g=$(field p06_chat greedy_continuation "$SIDE")
[ $rc -eq 0 ] && [ -n "$exp_p" ] && [ -n "$exp_g" ] && [ "$got_p" = "$exp_p" ] && [ "$got_g" = "$exp_g" ]
check "cli run --chat --no-think: golden p06 ids and greedy continuation" $? "rc $rc prompt '$got_p' gen '$got_g'"
head -c 16 "$T/out" | grep -q '^<|im_start|>user'
check "cli run echoes the prompt unless --no-display-prompt" $? "$(head -c 40 "$T/out")"

# Sampling with every filter off runs the full -n (EOG ignored). (Streaming keeps multi-byte
# characters whole; bytes the model emits that can never form UTF-8 pass through, as in
# llama.cpp, so the output is not checked with iconv. test_tokenizer covers the stream.)
$H run -m "$Q4" -p 'Hello' -n 200 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 -s 7 --ignore-eos -t 1 \
    --no-display-prompt --verbose >"$T/out" 2>"$T/err"
rc=$?
n=$(grep '^generated ids:' "$T/err" | tr ',' '\n' | wc -l)
check "cli run: 200 tokens sampled at --temp 1.5 with all filters off" $(( rc != 0 || n != 200 )) "rc $rc, $n ids"
$H run -m "$Q4" -p 'Hello' -n 5 -s 3 -t 1 --no-display-prompt >"$T/a" 2>/dev/null
$H run -m "$Q4" -p 'Hello' -n 5 -s 3 -t 1 --no-display-prompt >"$T/b" 2>/dev/null
cmp -s "$T/a" "$T/b"
check "cli run: the same --seed gives the same text" $? "outputs differ"

# Errors and warnings.
$H logits -m "$T/missing.gguf" --ids 1 >/dev/null 2>"$T/err"
rc=$?; grep -q 'missing.gguf' "$T/err"
check "cli logits: missing model file exits 1 naming it" $(( rc != 1 || $? )) "rc $rc: $(cat "$T/err")"
$H run -m "$S/fixtures/moe-tiny/deepseek2-tiny.gguf" -p hi >/dev/null 2>"$T/err"
rc=$?; grep -q "unsupported architecture 'deepseek2' (supported: qwen3moe, qwen35moe" "$T/err"
check "cli run: unsupported architecture named, supported listed" $(( rc != 1 || $? )) "rc $rc: $(cat "$T/err")"
$H logits -m "$MINI" --ids 1,2,3 -c 2 >/dev/null 2>"$T/err"
rc=$?; grep -q -- '-c/--ctx-size' "$T/err"
check "cli logits: 3 ids into -c 2 is a context-full error naming -c" $(( rc != 1 || $? )) "rc $rc: $(cat "$T/err")"
$H run -m "$MINI" -p "$text" -c 10 -n 4 >/dev/null 2>"$T/err"
rc=$?; grep -q 'prompt is 39 tokens but the context holds 10; raise -c/--ctx-size' "$T/err"
check "cli run: prompt longer than -c is an error saying how much is needed" $(( rc != 1 || $? )) "rc $rc: $(cat "$T/err")"
$H run -m "$MINI" -p "$text" -c 45 -n 20 --temp 0 --ignore-eos -t 1 >/dev/null 2>"$T/err"
rc=$?; grep -q 'context full after 45 tokens (-c 45)' "$T/err"
check "cli run: generation stops with a message when the context fills" $(( rc != 0 || $? )) "rc $rc: $(cat "$T/err")"
$H run -m "$MINI" -p "$text" -c 45 -n 60 --temp 0 --ignore-eos --context-shift --keep 8 -t 1 --gpu off -v >/dev/null 2>"$T/err"
rc=$?; n=$(grep -a '^generated ids:' "$T/err" | tr ',' '\n' | grep -c '[0-9]')
grep -aq 'context shifted 3 times (--context-shift, --keep 8)' "$T/err"
check "cli run --context-shift --keep 8: 60 tokens from a 39-token prompt in -c 45 (3 shifts of 18)" \
    $(( rc != 0 || n != 60 || $? )) "rc $rc, $n ids: $(tail -3 "$T/err")"
$H run -m "$MINI" -p "$text" -c 40 -n 20 --temp 0 --ignore-eos --context-shift --keep -1 -t 1 --gpu off >/dev/null 2>"$T/err"
rc=$?; grep -aq 'context full after 40 tokens (-c 40)' "$T/err"
check "cli run --context-shift --keep -1: with one position after the kept prompt nothing can shift (context full)" \
    $(( rc != 0 || $? )) "rc $rc: $(cat "$T/err")"
$H logits -m "$MINI" --ids 1,2 -c 100000 -t 1 >/dev/null 2>"$T/err"
rc=$?; grep -q "context size 100000 exceeds the model's context_length 4096: possible training context overflow" "$T/err"
check "cli logits -c 100000: allowed past context_length with a warning" $(( rc != 0 || $? )) "rc $rc: $(cat "$T/err")"
$H bench -m "$MINI" -d 4200 -p 8 -n 2 -r 1 -t 1 -ctk q4_0 -ctv q4_0 -o json >"$T/out" 2>"$T/err"
rc=$?; grep -q "context size 4208 exceeds the model's context_length 4096" "$T/err" && grep -q '"n_depth": *4200' "$T/out"
check "cli bench -d 4200 with a q4_0 cache: runs past context_length with a warning (as llama-bench)" \
    $(( rc != 0 || $? )) "rc $rc: $(cat "$T/err") $(head -c 300 "$T/out")"
$H logits -m "$MINI" --ids 1,x >/dev/null 2>"$T/err"; rc=$?
check "cli logits: a bad id list is a usage error (exit 2)" $(( rc != 2 )) "rc $rc: $(cat "$T/err")"
$H logits -m "$MINI" --ids 4101 -t 1 >/dev/null 2>"$T/err"
rc=$?; grep -q 'out of range' "$T/err"
check "cli logits: an id beyond the vocabulary is rejected" $(( rc != 1 || $? )) "rc $rc: $(cat "$T/err")"
$H logits -m "$MINI" --ids 1 -ctk q4_9 >/dev/null 2>"$T/err"; rc=$?
check "cli logits: unknown -ctk type is a usage error" $(( rc != 2 )) "rc $rc: $(cat "$T/err")"
$H run -m "$MINI" -p '' >/dev/null 2>"$T/err"
rc=$?; grep -q 'prompt is empty' "$T/err"
check "cli run: empty prompt is a usage error" $(( rc != 2 || $? )) "rc $rc: $(cat "$T/err")"
$H run -m "$MINI" >/dev/null 2>"$T/err"; rc=$?
check "cli run: no prompt is a usage error" $(( rc != 2 )) "rc $rc: $(cat "$T/err")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
