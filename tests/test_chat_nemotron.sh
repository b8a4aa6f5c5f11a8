#!/usr/bin/env bash
# test_chat_nemotron.sh — `hmoe chat` on a nemotron_h_moe model (recurrent Mamba-2 state) through
# a pipe, greedy, on a synthetic nemotron-tiny file (generated vocabulary with the "pixtral"
# pre-tokenizer, no template: --chat-template nemotron). Multi-turn rewinds the state into the
# previous generation prompt (checkpoint + replay): the second answer must equal a fresh
# `hmoe run` of the same rendered prompt and /regen must repeat an answer.
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
if ! command -v python3 >/dev/null; then # the JSON of /save is read with python3
    echo "nemotron chat checks ... skipped: python3 not installed"; echo "0 passed, 0 failed"; exit 0
fi
M="$T/nemo.gguf"
$H synth --preset nemotron-tiny -q -o "$M"
check "synth nemotron-tiny writes a file" $? "hmoe synth failed"

printf '{"messages": [{"role": "user", "content": "Hello"}]}' >"$T/t1.json"
got=$($H template -m "$M" --chat-template nemotron -i "$T/t1.json" | od -An -c | tr -s ' \n' ' ')
want=$(printf '<|im_start|>system\n<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n' |
       od -An -c | tr -s ' \n' ' ')
check "template --chat-template nemotron: empty system turn, <think> opened" $([ "$got" = "$want" ]; echo $?) "got '$got'"

# --gpu off: on a GPU the chunked prefill of turn 2 and a one-piece fresh prefill round
# differently, and this random-weight model has near-ties that flip a greedy token (the GPU's
# checkpoints and rewinds are checked against llama.cpp in gpu_test_nemotron).
CHAT="$H chat -m $M --chat-template nemotron --temp 0 -t 1 --no-think -n 8 --gpu off"
printf 'Hello\nHow are you?\n/regen\n/save %s\n' "$T/c.json" | $CHAT >"$T/out" 2>"$T/err"
rc=$?
n_tim=$(grep -c '^\[prompt ' "$T/err")
check "nemotron chat: two turns and a /regen, exit 0" $(( rc != 0 || n_tim != 3 )) "rc $rc, $n_tim timings: $(cat "$T/err")"
python3 - "$T/c.json" >"$T/answers" <<'PY'
import json, sys
msgs = json.load(open(sys.argv[1]))["messages"]
print(json.dumps([m["content"] for m in msgs if m["role"] == "assistant"]))
PY
a2=$(python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); print(json.dumps(a[1]) if len(a) > 1 else "")' "$T/answers")
cached=$(grep '^\[prompt ' "$T/err" | sed -n 2p | sed -e 's/^\[prompt [0-9]* tok (\([0-9]*\) cached).*/\1/')
check "nemotron chat turn 2 reuses the context of turn 1 (through the state checkpoint)" $(( cached <= 0 )) \
    "cached '$cached': $(cat "$T/err")"

# The second answer equals a fresh run of the same prompt (nothing of the rewind leaks).
python3 - "$T/c.json" >"$T/t2.json" <<'PY'
import json, sys
msgs = json.load(open(sys.argv[1]))["messages"]
print(json.dumps({"messages": msgs[:3]}))
PY
$H template -m "$M" --chat-template nemotron --no-think -i "$T/t2.json" >"$T/p2.txt"
$H run -m "$M" --temp 0 -t 1 -n 8 --gpu off --no-display-prompt -f "$T/p2.txt" >"$T/fresh" 2>/dev/null
# run ends its output with a newline; /save writes bytes of incomplete UTF-8 as U+FFFD.
fresh=$(python3 -c 'import json,sys; t=open(sys.argv[1], encoding="utf-8", errors="replace").read(); print(json.dumps(t[:-1] if t.endswith("\n") else t))' "$T/fresh")
check "nemotron chat turn 2 answer equals a fresh run of the rendered prompt" \
    $([ -n "$a2" ] && [ "$fresh" = "$a2" ]; echo $?) "fresh $fresh chat $a2"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
