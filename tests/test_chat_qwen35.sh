#!/usr/bin/env bash
# test_chat_qwen35.sh — `hmoe chat` on a qwen35moe model (recurrent Gated DeltaNet state) through
# a pipe, greedy, on a synthetic qwen35-tiny file (generated Qwen3.5 vocabulary, no template:
# the CLI picks the Qwen3.5 format by the "qwen35" pre-tokenizer). Multi-turn must rewind the
# state into the previous generation prompt (checkpoint + replay): the second answer must equal
# a fresh `hmoe run` of the same rendered prompt, /regen must repeat an answer, and the cache
# reuse must stop exactly where the Qwen3.5 history diverges (chat-templates.md §2.2). Also
# `hmoe info` on the same file names its MTP block as the --spec mtp drafter (qwen35moe.md §8).
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
$H info "$M" >"$T/info" 2>&1
grep -q '^mtp blocks  *1 (blk\.4\.\*, .*): run only to draft tokens with --spec mtp' "$T/info"
check "info names the MTP block of a qwen35 file and says it is not run" $? "$(grep -i mtp "$T/info")"
ntok() { $H tokenize -m "$M" --ids --stdin | tr ',' '\n' | grep -c '[0-9]'; }
timing() { grep '^\[prompt ' "$1" | sed -n "${2}p" | sed -e 's/^\[prompt \([0-9]*\) tok (\([0-9]*\) cached).*/\1 \2/' |
           awk -v k="$3" '{print (k == "prompt") ? $1 : $2}'; }

# The Qwen3.5 format is chosen without a template: thinking on ends the prompt with "<think>\n".
printf '{"messages": [{"role": "user", "content": " Hello "}]}' >"$T/t1.json"
got=$($H template -m "$M" -i "$T/t1.json" | od -An -c | tr -s ' \n' ' ')
want=$(printf '<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n' | od -An -c | tr -s ' \n' ' ')
check "qwen35 file without a template renders the Qwen3.5 format (trimmed, <think> opened)" \
    $([ "$got" = "$want" ]; echo $?) "got '$got'"

# --gpu off: on a GPU the chunked prefill of turn 2 and a one-piece fresh prefill round
# differently, and this random-weight model has near-ties that flip a greedy token.
CHAT="$H chat -m $M --temp 0 -t 1 --no-think -n 8 --gpu off"
printf 'Hello\nHow are you?\n/regen\n/save %s\n' "$T/c.json" | $CHAT >"$T/out" 2>"$T/err"
rc=$?
n_ans=$(wc -l <"$T/out"); n_tim=$(grep -c '^\[prompt ' "$T/err")
check "qwen35 chat: two turns and a /regen give three answers, exit 0" $(( rc != 0 || n_ans != 3 || n_tim != 3 )) \
    "rc $rc, $n_ans answers, $n_tim timings: $(cat "$T/err")"
a2=$(sed -n 2p "$T/out"); a3=$(sed -n 3p "$T/out")
check "qwen35 chat: /regen repeats the answer (state restored from the checkpoint)" \
    $([ -n "$a2" ] && [ "$a2" = "$a3" ]; echo $?) "'$a2' / '$a3'"
prefix=$(printf '<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n' | ntok)
cached=$(timing "$T/err" 2 cached); regen_cached=$(timing "$T/err" 3 cached); regen_prompt=$(timing "$T/err" 3 prompt)
check "qwen35 chat turn 2 reuses the context up to the previous generation prompt ($prefix tokens)" \
    $(( cached != prefix )) "cached $cached"
check "qwen35 chat /regen decodes one token again" $(( regen_prompt != 1 )) "prompt $regen_prompt cached $regen_cached"

# The second answer equals a fresh run of the same prompt (nothing of the rewind leaks).
head -n 4 "$T/c.json" | sed -e '$ s/,$//' >"$T/t2.json"
printf '\n]}\n' >>"$T/t2.json"
$H template -m "$M" --no-think -i "$T/t2.json" >"$T/p2.txt"
fresh=$($H run -m "$M" --temp 0 -t 1 -n 8 --gpu off --no-display-prompt -f "$T/p2.txt" 2>/dev/null | head -n 1)
check "qwen35 chat turn 2 answer equals a fresh run of the rendered prompt" $([ "$fresh" = "$a2" ]; echo $?) \
    "fresh '$fresh' chat '$a2'"

# Thinking on: the answer starts inside the reasoning block opened by the prompt.
printf 'Hello\n' | $H chat -m "$M" --temp 0 -t 1 -n 4 --show-think >"$T/out" 2>"$T/err"
grep -q '^<think>' "$T/out"
check "qwen35 chat with thinking on shows the answer as reasoning (<think> opened by the prompt)" $? "$(cat "$T/out")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
