#!/usr/bin/env bash
# test_chat_gptoss.sh — `hmoe chat` / `template` on a gpt-oss model through a pipe, greedy, on a
# synthetic gpt-oss-tiny file (MXFP4 experts, generated vocabulary with the "gpt-4o"
# pre-tokenizer and no template, so the CLI picks the harmony format by itself). Two turns: the
# second prompt re-renders the first answer through the harmony template and reuses the context
# of the first turn; /regen repeats an answer.
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
M="$T/gptoss.gguf"
$H synth --preset gpt-oss-tiny -q -o "$M"
check "synth gpt-oss-tiny writes a file" $? "hmoe synth failed"

printf '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]}' >"$T/t1.json"
got=$($H template -m "$M" -i "$T/t1.json" 2>"$T/err")
case "$got" in
"<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI."*"Reasoning: medium"*"<|start|>developer<|message|># Instructions"*"Be brief."*"<|start|>user<|message|>Hello<|end|><|start|>assistant") r=0;;
*) r=1;;
esac
check "template on a gpt-4o vocabulary without a template: harmony, no warning" $(( r || $(wc -c <"$T/err") )) \
    "got '$got' stderr '$(cat "$T/err")'"

got=$($H template -m "$M" -i "$T/t1.json" --chat-template-kwargs '{"reasoning_effort": "high"}' 2>"$T/err")
case "$got" in *"Reasoning: high"*) r=0;; *) r=1;; esac
check "template --chat-template-kwargs reasoning_effort high" $(( r || $(wc -c <"$T/err") )) "got '$got' $(cat "$T/err")"

printf 'Hello\nHow are you?\n/regen\n' | $H chat -m "$M" --temp 0 -t 1 -n 8 >"$T/out" 2>"$T/err"
rc=$?
n_tim=$(grep -c '^\[prompt ' "$T/err")
check "gpt-oss chat: two turns and a /regen, exit 0" $(( rc != 0 || n_tim != 3 )) "rc $rc, $n_tim timings: $(cat "$T/err")"
cached=$(grep '^\[prompt ' "$T/err" | sed -n 2p | sed -e 's/^\[prompt [0-9]* tok (\([0-9]*\) cached).*/\1/')
check "gpt-oss chat turn 2 reuses the context of turn 1" $(( cached <= 0 )) "cached '$cached': $(cat "$T/err")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
