#!/usr/bin/env bash
# test_server_tools.sh — tool_choice "required" and a named function through `hmoe serve` for every
# call format: Qwen3's JSON (the tiny qwen3moe model of test_server.sh), the XML form of Qwen3.5
# (qwen35moe-tiny) and of Nemotron-3 (a synthetic nemotron-tiny with --chat-template nemotron), and
# gpt-oss harmony (gpt-oss-tiny, with a byte-level vocabulary, and a synthetic gpt-oss-tiny whose
# vocabulary has the real header tokens). Random weights, so only the grammar makes the answer a
# call. curl checks each answer (not streamed and streamed: finish_reason "tool_calls", one call
# to the right function, arguments a JSON object with the required parameters, the XML form's
# parameter names only those of the function); the streamed call must come as OpenAI streams one
# (id, type and name in its first delta only, the arguments in several deltas) and add up to the
# call of the same request not streamed (same seed, no prompt cache). Then the official `openai`
# npm client (tests/js/tools.mjs) when test_server.sh's install of it is there or npm can install it.
# Prints one "name ... ok|FAIL" line per case, then "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
S="${HMOE_SHARED:-tests}"
H=./hmoe
T=$(mktemp -d)
. tests/server_lib.sh
skip_unless_server "serve tools"
trap cleanup_servers EXIT
$H synth --preset gpt-oss-tiny -q -o "$T/gptoss-synth.gguf"
$H synth --preset nemotron-tiny -q -o "$T/nemotron-synth.gguf"
TOOLS='[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}},{"type":"function","function":{"name":"add","parameters":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}}}]'
# check_call FILE STREAM WANT FREE [WHOLE]: the answer (a body or an SSE stream) holds one call to WANT
# (or any tool); FREE 1: "required" lets the arguments be any object (Qwen3's JSON grammar); WHOLE:
# the same request's answer not streamed, which the streamed call must add up to
check_call() {
    python3 - "$@" <<'PY'
import json, sys
path, stream, want, free = sys.argv[1], sys.argv[2] == "true", sys.argv[3], sys.argv[4] == "1"
req = {"get_weather": {"city"}, "add": {"a", "b"}}
props = {"get_weather": {"city", "days"}, "add": {"a", "b"}}
def whole_calls(p):
    c = json.load(open(p, encoding="utf-8"))["choices"][0]
    return c["finish_reason"], [x["function"] for x in c["message"].get("tool_calls") or []]
if stream:
    calls, finish, pieces = {}, None, 0
    for line in open(path, encoding="utf-8"):
        if not line.startswith("data: ") or line.startswith("data: [DONE]"): continue
        for c in json.loads(line[6:])["choices"]:
            finish = c.get("finish_reason") or finish
            for d in c["delta"].get("tool_calls", []):
                f = d["function"]
                if d["index"] not in calls:
                    assert d["index"] == len(calls) and d.get("id") and d.get("type") == "function" and f.get("name"), d
                    calls[d["index"]] = {"name": f["name"], "arguments": ""}
                else:
                    assert "id" not in d and "type" not in d and "name" not in f, ("a later delta names the call", d)
                if f.get("arguments"): pieces += 1
                calls[d["index"]]["arguments"] += f.get("arguments", "")
    calls = [calls[k] for k in sorted(calls)]
    assert pieces >= 2, ("the arguments came in %d delta(s)" % pieces, calls)
    if len(sys.argv) > 5:
        wfinish, wcalls = whole_calls(sys.argv[5])
        assert [(c["name"], c["arguments"]) for c in calls] == [(c["name"], c["arguments"]) for c in wcalls], \
            ("streamed", calls, "not streamed", wcalls)
else:
    finish, calls = whole_calls(path)
assert finish == "tool_calls" and len(calls) == 1, (finish, calls)
name, args = calls[0]["name"], json.loads(calls[0]["arguments"])
assert name in req and (want == "any" or name == want), name
assert isinstance(args, dict), args
if not (free and want == "any"):
    assert req[name] <= set(args) and set(args) <= props[name], args
PY
}
run_model() { # run_model LABEL GGUF FREE(0|1) [serve flags]
    local label=$1 free=$3
    MODEL_OPTS="-m $2 -t 1 -c 2048 -ctk f32 -ctv f32 -q ${*:4}"
    start_server "$T/$label.log" --temp 1
    wait_ready "$URL"
    check "serve tools $label: ready" $? "$(tail -n 3 "$T/$label.log")"
    for tc in required get_weather add; do
        local choice='"required"' want=any
        [ "$tc" = required ] || { choice="{\"type\":\"function\",\"function\":{\"name\":\"$tc\"}}"; want=$tc; }
        for st in false true; do
            code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"tools\":$TOOLS,\"tool_choice\":$choice,\"max_tokens\":80,\"stream\":$st,\"seed\":7,\"cache_prompt\":false}")
            if [ $st = false ]; then
                [ "$code" = 200 ] && cp "$T/body" "$T/whole" && check_call "$T/body" $st $want $free 2>"$T/err"
                check "serve tools $label: tool_choice $tc stream=$st gives one call to the right function" $? \
                    "$code $(head -c 600 "$T/body") $(tail -n 2 "$T/err")"
            else
                [ "$code" = 200 ] && check_call "$T/body" $st $want $free "$T/whole" 2>"$T/err"
                check "serve tools $label: tool_choice $tc stream=$st streams the call piece by piece, the same call" $? \
                    "$code $(head -c 600 "$T/body") $(tail -n 2 "$T/err")"
            fi
        done
    done
    code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"tools\":$TOOLS,\"tool_choice\":\"required\",\"max_tokens\":5}")
    [ "$code" = 400 ] && grep -q 'max_tokens' "$T/body"
    check "serve tools $label: max_tokens below the shortest call is a 400" $? "$code $(cat "$T/body")"
    code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"tools\":$TOOLS,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}}")
    [ "$code" = 400 ] && grep -q "nope" "$T/body"
    check "serve tools $label: a named function not in tools is a 400" $? "$code $(cat "$T/body")"
    if [ -n "$JS_OK" ]; then
        timeout 180 node "$JS/tools.mjs" "$URL/v1" "$label" "$free" >"$T/js.out" 2>&1
        rc=$?
        while IFS= read -r line; do
            case "$line" in
            "ok "*) check "serve tools $label: openai client: ${line#ok }" 0 "";;
            "FAIL "*) check "serve tools $label: openai client: ${line#FAIL }" 1 "see above";;
            esac
        done <"$T/js.out"
        [ $rc -eq 0 ]
        check "serve tools $label: openai client script ran to the end" $? "$(tail -n 5 "$T/js.out")"
    fi
    stop_server
}
JS=build/js-openai JS_OK=""
if command -v npm >/dev/null && command -v node >/dev/null; then
    mkdir -p "$JS" && cp tests/js/package.json tests/js/check.mjs tests/js/tools.mjs "$JS"/
    if [ -d "$JS/node_modules/openai" ] || timeout 180 npm install --prefix "$JS" --no-audit --no-fund --silent >"$T/npm.log" 2>&1; then
        JS_OK=1
    else
        echo "serve tools: openai npm client ... skipped: npm install failed (no registry?)"
    fi
else
    echo "serve tools: openai npm client ... skipped: npm or node is not installed"
fi
run_model qwen3-json "$S/fixtures/models/tiny-qwen3moe-A-mini-F32.gguf" 1
run_model qwen35-xml "$S/fixtures/moe-tiny/qwen35moe-tiny.gguf" 0
run_model harmony-bytes "$S/fixtures/moe-tiny/gpt-oss-tiny.gguf" 0
run_model harmony "$T/gptoss-synth.gguf" 0
run_model nemotron-xml "$T/nemotron-synth.gguf" 0 --chat-template nemotron
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
