#!/usr/bin/env bash
# test_chat.sh — `hmoe chat` driven through a pipe (each line a user turn) with the tiny
# golden model, greedy: multi-turn answers, the prompt token counts of the timing line
# against the Qwen3 template rendered by `hmoe template` and counted by `hmoe tokenize`
# (both checked against llama.cpp fixtures elsewhere), KV reuse on the second turn, /regen
# (same answer under greedy, one token re-decoded), /clear, /system, /save + /load round trip,
# "//" and "\" lines, context overflow (message, --ctx-drop-oldest, answer cut), bad commands.
# Prints the harness format: one "name ... ok|FAIL" line per case, then "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
S="${HMOE_SHARED:-tests}"
M="$S/fixtures/models/tiny-qwen3moe-A-Q4_K_M.gguf"
H=./hmoe
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
check() { # check NAME STATUS DETAIL
    if [ "$2" -eq 0 ]; then echo "$1 ... ok"; pass=$((pass + 1)); else echo "$1 ... FAIL: $3"; fail=$((fail + 1)); fi
}
CHAT="$H chat -m $M --temp 0 -t 1 --no-think -n 8"
# Tokens of a text with special tokens parsed, as the chat prefills it.
ntok() { $H tokenize -m "$M" --ids --stdin | tr ',' '\n' | grep -c '[0-9]'; }
# Field K ("prompt" / "cached") of timing line N of a stderr file.
timing() { grep '^\[prompt ' "$1" | sed -n "${2}p" | sed -e 's/^\[prompt \([0-9]*\) tok (\([0-9]*\) cached).*/\1 \2/' |
           awk -v k="$3" '{print (k == "prompt") ? $1 : $2}'; }
# The Qwen3 rendering of a conversation file with the generation prompt, thinking off.
render() { $H template -m "$M" --no-think -i "$1"; }

# Two turns, then the conversation so far.
printf 'Hello\nHow are you?\n/save %s\n' "$T/c2.json" | $CHAT >"$T/out" 2>"$T/err"
rc=$?
n_ans=$(wc -l <"$T/out"); n_tim=$(grep -c '^\[prompt ' "$T/err")
check "chat pipe: two lines give two answers and two timing lines, exit 0" $(( rc != 0 || n_ans != 2 || n_tim != 2 )) \
    "rc $rc, $n_ans answers, $n_tim timings: $(cat "$T/err")"
grep -q '^\[prompt [0-9]* tok ([0-9]* cached), [0-9.]* tok/s | first token [0-9]* ms | 8 tok, [0-9.]* tok/s | ctx [0-9]*/4096\]$' "$T/err"
check "chat timing line: prompt tok (cached), tok/s, first token ms, generated tok, tok/s, ctx" $? "$(cat "$T/err")"

# Turn 1: the whole rendered prompt is prefilled.
printf '{"messages": [{"role": "user", "content": "Hello"}]}' >"$T/t1.json"
want=$(render "$T/t1.json" | ntok)
got=$(timing "$T/err" 1 prompt); cached=$(timing "$T/err" 1 cached)
check "chat turn 1 prefills the rendered template ($want tokens), nothing cached" \
    $(( got != want || cached != 0 )) "prompt $got cached $cached, want $want"

# Turn 2 reuses the KV cache up to where the Qwen3 template's history diverges from what was
# decoded: "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n" (the earlier answer is
# re-rendered without its empty think block, chat-templates.md §1.2).
sed -e '$ d' "$T/c2.json" | sed -e '$ d' | sed -e '$ s/,$//' >"$T/t2.json"   # drop the second answer and "]}"
printf '\n]}\n' >>"$T/t2.json"
total=$(render "$T/t2.json" | ntok)
prefix=$(printf '<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n' | ntok)
got=$(timing "$T/err" 2 prompt); cached=$(timing "$T/err" 2 cached)
check "chat turn 2 reuses the KV cache: $prefix cached, $((total - prefix)) of $total prefilled" \
    $(( cached != prefix || got != total - prefix || prefix < 5 )) "prompt $got cached $cached"
roles=$(grep -o '"role": "[a-z]*"' "$T/c2.json" | tr '\n' ' ')
check "chat /save writes the four messages in order" $([ "$roles" = '"role": "user" "role": "assistant" "role": "user" "role": "assistant" ' ]; echo $?) "$roles"
first=$(sed -n 1p "$T/out")
grep -q "\"content\": \"Hello\"" "$T/c2.json" && [ -n "$first" ]
check "chat /save keeps user text and the answers" $? "$(cat "$T/c2.json")"

# /regen: the same answer again under greedy, with one prompt token decoded again.
printf 'Hello\n/regen\n/regen\n' | $CHAT >"$T/out" 2>"$T/err"
rc=$?
a1=$(sed -n 1p "$T/out"); a2=$(sed -n 2p "$T/out"); a3=$(sed -n 3p "$T/out")
check "chat /regen under greedy repeats the answer" $(( rc != 0 )) "rc $rc"
[ -n "$a1" ] && [ "$a1" = "$a2" ] && [ "$a2" = "$a3" ]
check "chat /regen: answers identical" $? "'$a1' / '$a2' / '$a3'"
n1=$(timing "$T/err" 1 prompt); p2=$(timing "$T/err" 2 prompt); c2=$(timing "$T/err" 2 cached)
check "chat /regen re-decodes only the last prompt token" $(( p2 != 1 || c2 != n1 - 1 )) "turn 1 $n1, regen $p2 ($c2 cached)"

# /clear, /system, "//", "\" continuation.
printf 'Hello\n/clear\n/system Be brief.\n//slash\nfirst\\\nsecond\n/save %s\n' "$T/c3.json" | $CHAT >"$T/out" 2>"$T/err"
rc=$?
msgs=$(grep -o '"content": "[^"]*"' "$T/c3.json" | sed -n '1p;2p;4p' | tr '\n' '|')
want_msgs='"content": "Be brief."|"content": "/slash"|"content": "first\nsecond"|'
[ $rc -eq 0 ] && [ "$msgs" = "$want_msgs" ] && [ "$(grep -c '"role"' "$T/c3.json")" -eq 5 ]
check "chat /clear drops the turns, /system goes first, // sends '/', \\ joins lines" $? "rc $rc: $(cat "$T/c3.json")"
grep -q '^\[new conversation\]$' "$T/err" && grep -q '^\[system prompt set\]$' "$T/err"
check "chat /clear and /system confirm on stderr" $? "$(cat "$T/err")"
printf '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "/slash"}]}' >"$T/t3.json"
want=$(render "$T/t3.json" | ntok)
got=$(timing "$T/err" 2 prompt); cached=$(timing "$T/err" 2 cached)
check "chat after /system the prompt is re-rendered with it ($want tokens)" $(( got + cached != want )) \
    "prompt $got + cached $cached"

# -sys: the system prompt comes first and survives /clear.
printf 'Hello\n/clear\nAgain\n/save %s\n' "$T/c5.json" | $CHAT -sys 'You are terse.' >"$T/out" 2>"$T/err"
rc=$?
msgs=$(grep -o '"role": "[a-z]*", "content": "[^"]*"' "$T/c5.json" | sed -n '1p;2p' | tr '\n' '|')
check "chat -sys: system prompt first, kept by /clear" \
    $([ $rc -eq 0 ] && [ "$msgs" = '"role": "system", "content": "You are terse."|"role": "user", "content": "Again"|' ]; echo $?) \
    "rc $rc: $(cat "$T/c5.json")"

# /save + /load round trip; the loaded conversation is prefilled and reused by the next turn.
printf '/load %s\n/save %s\nAnd then?\n' "$T/c2.json" "$T/c2b.json" | $CHAT >"$T/out" 2>"$T/err"
rc=$?
cmp -s "$T/c2.json" "$T/c2b.json"
check "chat /load then /save gives the same file" $(( rc != 0 || $? )) "rc $rc: $(diff "$T/c2.json" "$T/c2b.json" | head -5)"
grep -q '^\[loaded 4 messages from ' "$T/err" && grep -q '^\[prefill [0-9]* tok (0 cached)' "$T/err"
check "chat /load prefills the conversation" $? "$(cat "$T/err")"
cached=$(timing "$T/err" 1 cached)
check "chat turn after /load reuses the prefilled KV cache ($cached cached)" $(( cached < 20 )) "$(cat "$T/err")"

# Context overflow: refused with the numbers and the flags; the session goes on; exit 1.
long=$(printf 'word %.0s' $(seq 1 60))
printf '%s\nHi\n' "$long" | $H chat -m "$M" --temp 0 -t 1 --no-think -n 4 -c 48 >"$T/out" 2>"$T/err"
rc=$?
grep -q 'context full: the conversation is [0-9]* tokens but the context holds 48 (-c 48); /clear starts over, --ctx-drop-oldest drops the oldest turns, or raise -c/--ctx-size (the model is trained for up to 4096)' "$T/err"
check "chat context overflow: message with the sizes, -c and --ctx-drop-oldest" $(( rc != 1 || $? )) "rc $rc: $(cat "$T/err")"
check "chat context overflow: the next turn is still answered" $(( $(grep -c '^\[prompt ' "$T/err") != 1 )) "$(cat "$T/err")"

# --ctx-drop-oldest: the same four turns fit only by dropping the oldest exchanges.
printf 'one two three\nfour five six\nseven eight nine\nten eleven twelve\n/save %s\n' "$T/c4.json" >"$T/in"
$H chat -m "$M" --temp 0 -t 1 --no-think -n 8 -c 64 <"$T/in" >"$T/out" 2>"$T/err"
rc_plain=$?
$H chat -m "$M" --temp 0 -t 1 --no-think -n 8 -c 64 --ctx-drop-oldest <"$T/in" >"$T/out" 2>"$T/err2"
rc=$?
n_tim=$(grep -c '^\[prompt ' "$T/err2")
grep -q '^\[dropped the oldest [0-9]* exchanges* to fit the context (-c 64)\]$' "$T/err2"
check "chat --ctx-drop-oldest: every turn answered after dropping old exchanges" $(( rc != 0 || n_tim != 4 || $? )) \
    "rc $rc, $n_tim timings: $(cat "$T/err2")"
check "chat without --ctx-drop-oldest the same input overflows (exit 1)" $(( rc_plain != 1 )) "rc $rc_plain"
first_user=$(grep -o '"content": "[^"]*"' "$T/c4.json" | head -n 1)
check "chat --ctx-drop-oldest dropped the first exchange from the conversation" \
    $([ "$first_user" != '"content": "one two three"' ]; echo $?) "$(cat "$T/c4.json")"

# An answer that fills the context is cut with a message.
echo Hello | $H chat -m "$M" --temp 0 -t 1 --no-think -c 40 >"$T/out" 2>"$T/err"
rc=$?
grep -q 'context full (40 of 40 tokens): the answer was cut' "$T/err"
check "chat answer cut when the context fills" $(( rc != 0 || $? )) "rc $rc: $(cat "$T/err")"

# Commands that fail, EOF, --help.
printf '/bogus\n/save\n/regen\n' | $CHAT >"$T/out" 2>"$T/err"
rc=$?
grep -q "unknown command '/bogus'" "$T/err" && grep -q '/save needs a file name' "$T/err" &&
    grep -q 'no answer to redo' "$T/err"
check "chat bad commands: named, exit 1 at the end" $(( rc != 1 || $? )) "rc $rc: $(cat "$T/err")"
printf '/load %s\n' "$T/missing.json" | $CHAT >"$T/out" 2>"$T/err"
rc=$?; grep -q 'missing.json' "$T/err"
check "chat /load of a missing file names it" $(( rc != 1 || $? )) "rc $rc: $(cat "$T/err")"
$CHAT </dev/null >"$T/out" 2>"$T/err"
rc=$?
check "chat: EOF at once exits 0 with no output" $(( rc != 0 || $(wc -c <"$T/out") != 0 )) "rc $rc: $(cat "$T/err")"
$H chat --help >"$T/out" 2>&1
rc=$?; grep -q '/regen' "$T/out" && grep -q -- '--ctx-drop-oldest' "$T/out"
check "chat --help lists flags and in-chat commands" $(( rc != 0 || $? )) "rc $rc"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
