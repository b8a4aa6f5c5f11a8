#!/usr/bin/env bash
# test_cli_text.sh — `hmoe tokenize` and `hmoe template` end to end: ids and renders
# compared with the fixtures (cases.jsonl, qwen3-renders.jsonl: llama.cpp / the Jinja
# template), and the error exits (missing file, bad JSON, unknown role, unsupported vocab).
# Prints the harness format: one "name ... ok|FAIL" line per case, then "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
S="${HMOE_SHARED:-tests}"
V="$S/fixtures/tokenizer/qwen3-vocab.gguf"
H=./hmoe
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
check() { # check NAME CONDITION-STATUS DETAIL
    if [ "$2" -eq 0 ]; then echo "$1 ... ok"; pass=$((pass + 1)); else echo "$1 ... FAIL: $3"; fail=$((fail + 1)); fi
}

# A fixture line's field: ids as printed by llama-tokenize --ids; text / rendered with JSON
# escapes turned into bytes by printf %b (only cases whose strings use \n, \t and plain UTF-8).
fixture_line() { grep -F -- "$1" "$2" | grep -F -- "\"parse_special\": $3" | head -n 1; }
ids_of() { sed -n 's/.*"ids": \(\[[^]]*\]\).*/\1/p'; }

tok_case() { # tok_case NAME TEXT-AS-IN-JSON PARSE_SPECIAL(true|false) [via-file]
    local line exp got text flag=""
    line=$(fixture_line "{\"text\": \"$2\", " "$S/fixtures/tokenizer/cases.jsonl" "$3")
    exp=$(printf '%s' "$line" | ids_of)
    [ "$3" = false ] && flag=--no-parse-special
    text=$(printf '%b' "$2"; printf x); text=${text%x}   # keep trailing newlines
    if [ "${4:-}" = via-file ]; then
        printf '%s' "$text" > "$T/in.txt"
        got=$($H tokenize -m "$V" --ids $flag -f "$T/in.txt" 2>&1)
    else
        got=$($H tokenize -m "$V" --ids $flag "$text" 2>&1)
    fi
    [ -n "$exp" ] && [ "$got" = "$exp" ]
    check "cli tokenize --ids $1" $? "expected '$exp' got '$got'"
}

tok_case "prose" "Hello, world!" true
tok_case "contractions" "DON'T I'LL WE'VE YOU'RE" true
tok_case "whitespace run before a word (-f file)" "    indented four\n        indented eight" true via-file
tok_case "trailing newlines kept (-f file)" "hello\n\n" true via-file
tok_case "control token parsed" "<|endoftext|>" true
tok_case "control token as text (--no-parse-special)" "<|endoftext|>" false
tok_case "user-defined token without special parsing" "<think>reasoning</think>answer" false

out=$($H tokenize -m "$V" "Hello world" 2>&1)
[ "$out" = "$(printf '  9707 -> '"'"'Hello'"'"'\n  1879 -> '"'"' world'"'"'')" ]
check "cli tokenize default output is llama-tokenize's 'id -> piece' lines" $? "got '$out'"

out=$($H tokenize -m "$V" --ids "" 2>&1); rc=$?
[ $rc -eq 0 ] && [ "$out" = "[]" ]
check "cli tokenize empty prompt prints []" $? "rc $rc, got '$out'"

render_case() { # render_case NAME [flags...]: conversation and expected text from qwen3-renders.jsonl
    local name=$1; shift
    local line exp got
    line=$(grep -F "\"name\": \"$name\"" "$S/fixtures/chat/qwen3-renders.jsonl")
    printf '%s' "$line" > "$T/conv.json"
    exp=$(printf '%b' "$(printf '%s' "$line" | sed -n 's/.*"rendered": "\(.*\)"}$/\1/p')"; printf x); exp=${exp%x}
    got=$($H template -m "$V" -i "$T/conv.json" "$@" 2>"$T/err"; printf x); got=${got%x}
    [ -n "$line" ] && [ "$got" = "$exp" ] && [ ! -s "$T/err" ]
    check "cli template -i '$name' $* byte-identical" $? "got '$got' stderr '$(cat "$T/err")'"
}
render_case single_user
render_case system_user
render_case no_think --no-think
render_case no_gen_prompt --no-generation-prompt
render_case multi_turn

# No template in the file: one warning line, ChatML output.
printf '{"messages": [{"role": "user", "content": "Hi"}]}' > "$T/hi.json"
got=$($H template -m "$S/fixtures/moe-tiny/deepseek2-tiny.gguf" -i "$T/hi.json" 2>"$T/err"); rc=$?
[ $rc -eq 0 ] && [ "$got" = "$(printf '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant')" ] &&
    [ "$(wc -l < "$T/err")" -eq 1 ] && grep -q "warning: .*no chat template.*ChatML" "$T/err"
check "cli template without a template in the file -> one-line warning + ChatML" $? "rc $rc stderr '$(cat "$T/err")'"
# No template but an o200k ("gpt-4o") vocabulary: gpt-oss's harmony format, no warning.
got=$($H template -m "$S/fixtures/moe-tiny/gpt-oss-tiny.gguf" -i "$T/hi.json" 2>"$T/err"); rc=$?
[ $rc -eq 0 ] && [ ! -s "$T/err" ] && case "$got" in "<|start|>system<|message|>"*"<|start|>user<|message|>Hi<|end|><|start|>assistant") true;; *) false;; esac
check "cli template gpt-4o vocabulary without a template -> harmony" $? "rc $rc out '$got' stderr '$(cat "$T/err")'"

expect_fail() { # expect_fail NAME RC PATTERN cmd...
    local name=$1 want=$2 pat=$3; shift 3
    "$@" >"$T/out" 2>"$T/err"; local rc=$?
    [ $rc -eq "$want" ] && grep -q -- "$pat" "$T/err" && [ "$(wc -l < "$T/err")" -le 3 ]
    check "cli error: $name" $? "rc $rc (want $want), stderr '$(cat "$T/err")'"
}
expect_fail "tokenize missing model file" 1 "cannot open" $H tokenize -m "$T/nope.gguf" x
expect_fail "tokenize without -m" 2 "required" $H tokenize x
expect_fail "tokenize unsupported pre-tokenizer" 1 "not supported" $H tokenize -m "$S/fixtures/moe-tiny/deepseek2-tiny.gguf" x
expect_fail "tokenize not a GGUF" 1 "error" $H tokenize -m "$S/fixtures/chat/qwen3-template.jinja" x
expect_fail "tokenize missing -f file" 1 "nope.txt" $H tokenize -m "$V" -f "$T/nope.txt"
printf '{"messages": [{"role": "user", "content": "x"},]}' > "$T/bad.json"
expect_fail "template bad JSON names line and column" 1 "line 1 column" $H template -m "$V" -i "$T/bad.json"
printf '{"messages": [{"role": "wizard", "content": "x"}]}' > "$T/role.json"
expect_fail "template unknown role (built-in qwen3)" 1 "unknown role 'wizard'" $H template -m "$V" --chat-template qwen3 -i "$T/role.json"
expect_fail "template unknown --chat-template" 2 "unknown chat template" $H template --chat-template llama9 -i "$T/hi.json"
expect_fail "template missing conversation file" 1 "nope.json" $H template -m "$V" -i "$T/nope.json"

# The Jinja path: a template file, template variables, --jinja, and errors in each.
J=tests/jinja/templates
got=$($H template --chat-template-file "$J/gpt-oss.jinja" -i "$T/hi.json" 2>"$T/err"); rc=$?
[ $rc -eq 0 ] && [ ! -s "$T/err" ] && case "$got" in *"<|start|>user<|message|>Hi<|end|><|start|>assistant") true;; *) false;; esac
check "cli template --chat-template-file gpt-oss.jinja renders harmony" $? "rc $rc got '$got' stderr '$(cat "$T/err")'"
a=$($H template -m "$V" -i "$T/hi.json" --no-think 2>&1)
b=$($H template -m "$V" -i "$T/hi.json" --jinja --chat-template-kwargs '{"enable_thinking": false}' 2>&1)
[ -n "$a" ] && [ "$a" = "$b" ] && case "$a" in *"<think>"*) true;; *) false;; esac
check "cli template --chat-template-kwargs enable_thinking=false = --no-think" $? "'$a' vs '$b'"
got=$($H template -m "$V" -i "$T/hi.json" --chat-template-kwargs '{"bos_token": "[B]"}' --chat-template '{{ bos_token }}{{ messages[0].content }}' 2>&1)
[ "$got" = "[B]Hi" ]
check "cli template --chat-template JINJA with a kwargs override of bos_token" $? "got '$got'"
printf '{%% for m in messages %%}{{ m.content }\n' > "$T/bad.jinja"
expect_fail "template file with a syntax error names line:col" 1 "line 1:" $H template --chat-template-file "$T/bad.jinja" -i "$T/hi.json"
expect_fail "template bad --chat-template-kwargs" 2 "chat-template-kwargs" $H template -m "$V" -i "$T/hi.json" --chat-template-kwargs '[1]'
printf '{"messages": [{"role": "user", "content": "x"}, {"role": "system", "content": "late"}]}' > "$T/late.json"
expect_fail "template raise_exception of the template is the message" 1 "System message must be at the beginning" \
    $H template --chat-template-file "$J/qwen3.5.jinja" -i "$T/late.json"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
