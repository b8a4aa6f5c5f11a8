#!/usr/bin/env bash
# test_server.sh — `hmoe serve` end to end on loopback (a free port chosen by the server, --port 0):
# every endpoint with curl (answers checked against `hmoe run`, `hmoe tokenize` and `hmoe template`,
# which are tested against llama.cpp elsewhere), the prompt cache, stop strings, streaming, the
# queue limit, malformed requests (each answered with its status and an OpenAI error body, the
# server healthy afterwards), 4 clients x 10 mixed requests, the official `openai` npm client
# (installed into build/ when npm and its registry answer; skipped with a line otherwise), and
# SIGTERM / SIGINT ending the server with status 0. Every step is bounded with `timeout`.
# Prints one "name ... ok|FAIL" line per case, then "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
S="${HMOE_SHARED:-tests}"
MINI="$S/fixtures/models/tiny-qwen3moe-A-mini-F32.gguf"
H=./hmoe
pass=0; fail=0
check() { # check NAME STATUS DETAIL
    if [ "$2" -eq 0 ]; then echo "$1 ... ok"; pass=$((pass + 1)); else echo "$1 ... FAIL: $3"; fail=$((fail + 1)); fi
}
if ! $H serve --help >/dev/null 2>&1; then
    echo "server checks ... skipped: this hmoe was built without serve (install libmicrohttpd-dev libjansson-dev)"
    echo "0 passed, 0 failed"; exit 0
fi
for tool in curl python3; do
    if ! command -v $tool >/dev/null; then
        echo "server checks ... skipped: $tool is not installed"; echo "0 passed, 0 failed"; exit 0
    fi
done
T=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
KEY="sk-test-$$-key"
MODEL_OPTS="-m $MINI -t 1 -c 1024 -ctk f32 -ctv f32 -q"

# start_server LOG ARGS...: starts hmoe serve --port 0, waits for its port; sets SPID and URL.
start_server() {
    local log=$1; shift
    timeout 600 $H serve $MODEL_OPTS --port 0 "$@" >"$log" 2>&1 &
    SPID=$!; PIDS+=("$SPID")
    URL=""
    for _ in $(seq 1 100); do
        URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -n 1)
        [ -n "$URL" ] && break
        sleep 0.1
    done
}
wait_ready() { # wait_ready URL: until /health is 200 (at most 20 s)
    for _ in $(seq 1 200); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1/health")" = 200 ] && return 0
        sleep 0.1
    done
    return 1
}
AUTH=(-H "Authorization: Bearer $KEY")
# req METHOD PATH [curl args...]: body to $T/body, status echoed
req() { local m=$1 p=$2; shift 2; curl -s -o "$T/body" -w '%{http_code}' --max-time 30 -X "$m" "${AUTH[@]}" "$URL$p" "$@"; }
post() { local p=$1 d=$2; shift 2; req POST "$p" -H 'Content-Type: application/json' --data-binary "$d" "$@"; }
# jq_ FILE EXPR: a Python expression over the parsed JSON `d`, printed
jq_() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=eval(sys.argv[2]); sys.stdout.write(v if isinstance(v,str) else json.dumps(v) if isinstance(v,(dict,list)) else str(v))' "$1" "$2" 2>/dev/null; }
is_error_body() { python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; assert isinstance(e["message"],str) and e["message"] and "type" in e and "param" in e and e["code"]==int(sys.argv[2])' "$1" "$2" 2>/dev/null; }

# --- start: /health answers 503 "loading model" or 200 once ready -------------------------------
start_server "$T/s1.log" --api-key "$KEY" --metrics --alias tiny-mini --temp 0
[ -n "$URL" ]
check "serve: listens on a free port and prints it" $? "$(cat "$T/s1.log")"
code=$(curl -s -o "$T/h0" -w '%{http_code}' --max-time 5 "$URL/health")
{ [ "$code" = 503 ] && grep -q '"status":"loading model"' "$T/h0"; } || { [ "$code" = 200 ] && grep -q '"status":"ok"' "$T/h0"; }
check "serve: /health during start is 503 {\"status\":\"loading model\"} or 200 ok" $? "code $code $(cat "$T/h0")"
wait_ready "$URL"
check "serve: /health turns 200 {\"status\":\"ok\"} without an API key" $? "$(cat "$T/s1.log")"

# --- endpoints ----------------------------------------------------------------------------------
code=$(req GET /v1/models)
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["object"]+" "+d["data"][0]["id"]')" = "list tiny-mini" ]
check "serve: GET /v1/models lists the --alias" $? "$code $(cat "$T/body")"

code=$(req GET /props)
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["default_generation_settings"]["n_ctx"]')" = 1024 ] && [ "$(jq_ "$T/body" 'd["total_slots"]')" = 1 ]
check "serve: GET /props has n_ctx 1024 and one slot" $? "$code $(cat "$T/body")"

want_ids=$($H tokenize -m "$MINI" --ids -p "Hello world, 123" 2>/dev/null | tr -d ' []')
code=$(post /tokenize '{"content":"Hello world, 123"}')
got_ids=$(jq_ "$T/body" '",".join(str(x) for x in d["tokens"])')
[ "$code" = 200 ] && [ -n "$want_ids" ] && [ "$got_ids" = "$want_ids" ]
check "serve: POST /tokenize gives hmoe tokenize's ids" $? "$code got '$got_ids' want '$want_ids'"
code=$(post /tokenize '{"content":"Hello","with_pieces":true}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" '"".join(t["piece"] for t in d["tokens"]) if all(isinstance(t["id"],int) for t in d["tokens"]) else 0')" = Hello ]
check "serve: POST /tokenize with_pieces" $? "$code $(cat "$T/body")"
code=$(post /detokenize "{\"tokens\":[$want_ids]}")
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["content"]')" = "Hello world, 123" ]
check "serve: POST /detokenize inverts /tokenize" $? "$code $(cat "$T/body")"

CONV='{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi there"}]}'
printf '%s' "$CONV" > "$T/conv.json"
$H template -m "$MINI" -i "$T/conv.json" > "$T/tmpl.txt" 2>/dev/null
code=$(post /apply-template "$CONV")
jq_ "$T/body" 'd["prompt"]' > "$T/got_tmpl.txt"
[ "$code" = 200 ] && [ -s "$T/tmpl.txt" ] && cmp -s "$T/tmpl.txt" "$T/got_tmpl.txt"
check "serve: POST /apply-template renders as hmoe template" $? "$code $(diff "$T/tmpl.txt" "$T/got_tmpl.txt" | head -5)"
code=$(post /apply-template '{"messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"text","text":"there"}]}]}')
jq_ "$T/body" 'd["prompt"]' > "$T/got_tmpl2.txt"
printf '%s' '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi\nthere"}]}' > "$T/conv2.json"
$H template -m "$MINI" -i "$T/conv2.json" > "$T/tmpl2.txt" 2>/dev/null
[ "$code" = 200 ] && cmp -s "$T/tmpl2.txt" "$T/got_tmpl2.txt"
check "serve: developer renders as system, text parts joined with a newline" $? "$code $(cat "$T/body")"

# tools: rendered by the template (as hmoe template renders them); a call and its result accepted back
TOOLS='[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]'
TURNS='[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"18 C, sunny"}]'
printf '{"messages":%s,"tools":%s}' "$TURNS" "$TOOLS" > "$T/conv3.json"
$H template -m "$MINI" -i "$T/conv3.json" > "$T/tmpl3.txt" 2>/dev/null
code=$(post /apply-template "$(cat "$T/conv3.json")")
jq_ "$T/body" 'd["prompt"]' > "$T/got_tmpl3.txt"
[ "$code" = 200 ] && [ -s "$T/tmpl3.txt" ] && cmp -s "$T/tmpl3.txt" "$T/got_tmpl3.txt" && grep -q '<tools>' "$T/got_tmpl3.txt" &&
    grep -q '<tool_response>' "$T/got_tmpl3.txt"
check "serve: tools, a tool call and its tool result render as hmoe template" $? "$code $(diff "$T/tmpl3.txt" "$T/got_tmpl3.txt" | head -5)"
code=$(post /v1/chat/completions "{\"messages\":$TURNS,\"tools\":$TOOLS,\"tool_choice\":\"auto\",\"max_tokens\":6}")
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["choices"][0]["finish_reason"] in ("length","stop","tool_calls")')" = True ]
check "serve: chat with tools and a tool round trip answers" $? "$code $(cat "$T/body")"
code=$(post /v1/chat/completions "{\"messages\":$TURNS,\"tools\":$TOOLS,\"tool_choice\":\"none\",\"max_tokens\":2}")
[ "$code" = 200 ]
check "serve: tool_choice none" $? "$code $(cat "$T/body")"

# chat, greedy: the same text as `hmoe run --chat` (the server's --temp 0 default), without the
# whitespace at its ends (the chat answer's parser drops it, as llama-server does)
$H run $MODEL_OPTS --chat -p "Hi there" -n 12 --temp 0 --no-display-prompt > "$T/run.txt" 2>/dev/null
want=$(python3 -c 'import sys; print(open(sys.argv[1], encoding="utf-8").read()[:-1].strip(" \t\r\n"), end="")' "$T/run.txt")
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi there"}],"max_tokens":12}')
cp "$T/body" "$T/chat1.json"
got=$(jq_ "$T/body" 'd["choices"][0]["message"]["content"]')
[ "$code" = 200 ] && [ -n "$want" ] && [ "$got" = "$want" ]
check "serve: chat completion (greedy) = hmoe run --chat" $? "$code got '$got' want '$want'"
[ "$(jq_ "$T/chat1.json" 'd["object"]+" "+d["choices"][0]["message"]["role"]+" "+d["choices"][0]["finish_reason"]')" = "chat.completion assistant length" ]
check "serve: chat completion object, role and finish_reason length" $? "$(cat "$T/chat1.json")"
[ "$(jq_ "$T/chat1.json" 'd["usage"]["completion_tokens"]==12 and d["usage"]["total_tokens"]==d["usage"]["prompt_tokens"]+12')" = True ]
check "serve: usage counts (12 completion tokens)" $? "$(cat "$T/chat1.json")"
[ "$(jq_ "$T/chat1.json" 'set(d["timings"])>={"prompt_n","prompt_ms","prompt_per_second","predicted_n","predicted_ms","predicted_per_second","cache_n"} and d["timings"]["predicted_n"]==12')" = True ]
check "serve: llama-server timings object" $? "$(cat "$T/chat1.json")"

# prompt cache: the same request again reuses all but the last prompt token, same answer
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi there"}],"max_tokens":12}')
np=$(jq_ "$T/body" 'd["usage"]["prompt_tokens"]'); nc=$(jq_ "$T/body" 'd["usage"]["prompt_tokens_details"]["cached_tokens"]')
[ "$code" = 200 ] && [ "$nc" = $((np - 1)) ] && [ "$(jq_ "$T/body" 'd["choices"][0]["message"]["content"]')" = "$want" ] &&
    [ "$(jq_ "$T/body" 'd["timings"]["cache_n"]')" = "$nc" ]
check "serve: prompt cache: cached_tokens = prompt - 1, same answer" $? "$code np $np nc $nc $(cat "$T/body")"
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi there"},{"role":"assistant","content":"Hello."},{"role":"user","content":"More"}],"max_tokens":4}')
nc2=$(jq_ "$T/body" 'd["usage"]["prompt_tokens_details"]["cached_tokens"]')
[ "$code" = 200 ] && [ "${nc2:-0}" -gt 5 ]
check "serve: prompt cache: the next turn reuses the common prefix ($nc2 tokens)" $? "$code $(cat "$T/body")"
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi there"}],"max_tokens":12,"cache_prompt":false}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["usage"]["prompt_tokens_details"]["cached_tokens"]')" = 0 ] &&
    [ "$(jq_ "$T/body" 'd["choices"][0]["message"]["content"]')" = "$want" ]
check "serve: cache_prompt false: nothing cached, same answer" $? "$code $(cat "$T/body")"

# stream: the deltas add up to the same text; [DONE] last; include_usage chunk
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi there"}],"max_tokens":12,"stream":true,"stream_options":{"include_usage":true}}' -N)
cp "$T/body" "$T/sse.txt"
python3 - "$T/sse.txt" "$want" > "$T/sse.chk" 2>&1 <<'PY'
import json, sys
events = [l[6:] for l in open(sys.argv[1], encoding="utf-8").read().split("\n") if l.startswith("data: ")]
assert events[-1] == "[DONE]", "last event is not [DONE]"
chunks = [json.loads(e) for e in events[:-1]]
text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
assert text == sys.argv[2], "deltas %r != %r" % (text, sys.argv[2])
assert chunks[0]["choices"][0]["delta"].get("role") == "assistant", "first delta has no role"
fin = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
assert len(fin) == 1 and fin[0]["choices"][0]["finish_reason"] == "length" and "timings" in fin[0]
u = chunks[-1]
assert u["choices"] == [] and u["usage"]["completion_tokens"] == 12
assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
print("ok")
PY
[ "$code" = 200 ] && grep -qx ok "$T/sse.chk"
check "serve: chat stream: SSE deltas = the text, finish chunk, usage chunk, [DONE]" $? "$code $(cat "$T/sse.chk")"

# stop strings: cut before the first occurrence, finish_reason stop
stop=$(python3 -c 'import sys; t=sys.argv[1]; print(t[len(t)//2:len(t)//2+3])' "$want")
code=$(post /v1/chat/completions "$(python3 -c 'import json,sys; print(json.dumps({"messages":[{"role":"user","content":"Hi there"}],"max_tokens":12,"stop":[sys.argv[1]]}))' "$stop")")
exp=$(python3 -c 'import sys; t=sys.argv[1]; print(t[:t.find(sys.argv[2])].rstrip(" \t\r\n"))' "$want" "$stop")
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["choices"][0]["message"]["content"]')" = "$exp" ] &&
    [ "$(jq_ "$T/body" 'd["choices"][0]["finish_reason"]')" = stop ]
check "serve: stop string '$stop' cuts the answer, finish_reason stop" $? "$code $(cat "$T/body") want '$exp'"
code=$(post /v1/chat/completions "$(python3 -c 'import json,sys; print(json.dumps({"messages":[{"role":"user","content":"Hi there"}],"max_tokens":12,"stop":sys.argv[1],"stream":True}))' "$stop")" -N)
got=$(python3 -c '
import json,sys
ev=[l[6:] for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ") and l[6:]!="[DONE]"]
print("".join(json.loads(e)["choices"][0]["delta"].get("content") or "" for e in ev))' "$T/body")
[ "$code" = 200 ] && [ "$got" = "$exp" ]
check "serve: stop string in a stream: no part of it is sent" $? "$code got '$got' want '$exp'"

# completions: a string prompt and its token ids give the same text; /completion native shape
$H run $MODEL_OPTS -p "Once upon a time" -n 8 --temp 0 --no-display-prompt > "$T/run2.txt" 2>/dev/null
want2=$(head -c -1 "$T/run2.txt")
code=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":8}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["object"]')" = text_completion ] && [ "$(jq_ "$T/body" 'd["choices"][0]["text"]')" = "$want2" ]
check "serve: POST /v1/completions (greedy) = hmoe run" $? "$code $(cat "$T/body") want '$want2'"
ids=$($H tokenize -m "$MINI" --ids -p "Once upon a time" 2>/dev/null | tr -d ' ')
code=$(post /v1/completions "{\"prompt\":$ids,\"max_tokens\":8}")
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["choices"][0]["text"]')" = "$want2" ]
check "serve: /v1/completions with token ids" $? "$code $(cat "$T/body")"
code=$(post /completion '{"prompt":"Once upon a time","n_predict":8}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["content"]')" = "$want2" ] &&
    [ "$(jq_ "$T/body" 'd["stop"] and d["tokens_predicted"]==8 and d["stop_type"]=="limit" and "timings" in d')" = True ]
check "serve: POST /completion (llama-server native)" $? "$code $(cat "$T/body")"
code=$(post /completion '{"prompt":"Once upon a time","n_predict":8,"stream":true}' -N)
got=$(python3 -c '
import json,sys
ev=[json.loads(l[6:]) for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ")]
assert ev[-1]["stop"] and all(not e["stop"] for e in ev[:-1])
print("".join(e["content"] for e in ev))' "$T/body")
[ "$code" = 200 ] && [ "$got" = "$want2" ]
check "serve: /completion stream" $? "$code got '$got'"
code=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":8,"stream":true}' -N)
got=$(python3 -c '
import json,sys
ev=[l[6:] for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ")]
assert ev[-1]=="[DONE]"
print("".join(json.loads(e)["choices"][0]["text"] for e in ev[:-1]))' "$T/body")
[ "$code" = 200 ] && [ "$got" = "$want2" ]
check "serve: /v1/completions stream" $? "$code got '$got'"
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"temperature":0.9,"top_k":20,"top_p":0.9,"min_p":0.1,"repeat_penalty":1.1,"presence_penalty":0.5,"frequency_penalty":0.5,"seed":42}')
a=$(jq_ "$T/body" 'd["choices"][0]["message"]["content"]')
code2=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"temperature":0.9,"top_k":20,"top_p":0.9,"min_p":0.1,"repeat_penalty":1.1,"presence_penalty":0.5,"frequency_penalty":0.5,"seed":42}')
[ "$code" = 200 ] && [ "$code2" = 200 ] && [ "$a" = "$(jq_ "$T/body" 'd["choices"][0]["message"]["content"]')" ]
check "serve: sampling fields accepted; the same seed gives the same answer" $? "$code $code2 $(cat "$T/body")"
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":0}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["usage"]["completion_tokens"]')" = 0 ]
check "serve: max_tokens 0 generates nothing" $? "$code $(cat "$T/body")"
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_completion_tokens":2}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["usage"]["completion_tokens"]')" = 2 ]
check "serve: max_completion_tokens" $? "$code $(cat "$T/body")"

# --- malformed requests: status + OpenAI error body each ----------------------------------------
CH=/v1/chat/completions
bad() { # bad STATUS NAME PATH BODY [curl args]
    local want=$1 name=$2 p=$3 d=$4; shift 4
    local code; code=$(post "$p" "$d" "$@")
    [ "$code" = "$want" ] && is_error_body "$T/body" "$want"
    check "serve: bad request: $name -> $want" $? "got $code $(head -c 300 "$T/body")"
}
M='"messages":[{"role":"user","content":"Hi"}]'
bad 400 "invalid JSON" $CH '{"messages": ['
bad 400 "body is an array" $CH '[]'
bad 400 "empty body" $CH ''
bad 400 "trailing garbage" $CH "{$M} x"
bad 400 "messages missing" $CH '{"model":"x"}'
bad 400 "messages empty" $CH '{"messages":[]}'
bad 400 "messages a string" $CH '{"messages":"hi"}'
bad 400 "message not an object" $CH '{"messages":[1]}'
bad 400 "role missing" $CH '{"messages":[{"content":"Hi"}]}'
bad 400 "unknown role" $CH '{"messages":[{"role":"wizard","content":"Hi"}]}'
bad 400 "role a number" $CH '{"messages":[{"role":7,"content":"Hi"}]}'
bad 400 "content a number" $CH '{"messages":[{"role":"user","content":5}]}'
bad 400 "content part image" $CH '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}'
bad 400 "content part without text" $CH '{"messages":[{"role":"user","content":[{"type":"text"}]}]}'
bad 400 "temperature a string" $CH "{$M,\"temperature\":\"hot\"}"
bad 400 "temperature negative" $CH "{$M,\"temperature\":-1}"
bad 400 "temperature huge" $CH "{$M,\"temperature\":1e308}"
bad 400 "top_p 2" $CH "{$M,\"top_p\":2}"
bad 400 "top_k negative" $CH "{$M,\"top_k\":-1}"
bad 400 "top_k fractional" $CH "{$M,\"top_k\":1.5}"
bad 400 "min_p a bool" $CH "{$M,\"min_p\":true}"
bad 400 "max_tokens negative" $CH "{$M,\"max_tokens\":-5}"
bad 400 "max_tokens 1e30" $CH "{$M,\"max_tokens\":1e30}"
bad 400 "max_tokens beyond 64 bits" $CH "{$M,\"max_tokens\":99999999999999999999999}"
bad 400 "n 2" $CH "{$M,\"n\":2}"
bad 400 "n 0" $CH "{$M,\"n\":0}"
bad 400 "stop a number" $CH "{$M,\"stop\":5}"
bad 400 "stop list of numbers" $CH "{$M,\"stop\":[1]}"
bad 400 "stop empty string" $CH "{$M,\"stop\":[\"\"]}"
bad 400 "17 stop strings" $CH "{$M,\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\",\"n\",\"o\",\"p\",\"q\"]}"
bad 400 "stream a string" $CH "{$M,\"stream\":\"yes\"}"
bad 400 "stream_options a number" $CH "{$M,\"stream\":true,\"stream_options\":3}"
bad 400 "seed a string" $CH "{$M,\"seed\":\"x\"}"
bad 400 "presence_penalty 5" $CH "{$M,\"presence_penalty\":5}"
bad 400 "repeat_penalty 0" $CH "{$M,\"repeat_penalty\":0}"
bad 400 "top_logprobs without logprobs" $CH "{$M,\"top_logprobs\":3}"
bad 400 "response_format json_schema with an unsupported keyword" $CH "{$M,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":{\"type\":\"string\",\"pattern\":\"a+\"}}}}"
bad 400 "response_format a string" $CH "{$M,\"response_format\":\"json\"}"
bad 400 "tool message without a call" $CH '{"messages":[{"role":"user","content":"Hi"},{"role":"tool","tool_call_id":"x","content":"42"}]}'
bad 400 "tool_calls on a user message" $CH '{"messages":[{"role":"user","content":"Hi","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}'
bad 400 "tool call without a name" $CH '{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"arguments":"{}"}}]}]}'
bad 400 "tools not an array" $CH "{$M,\"tools\":{}}"
bad 400 "tool without a function name" $CH "{$M,\"tools\":[{\"type\":\"function\"}]}"
bad 400 "tool_choice names a function not in tools" $CH "{$M,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}}"
bad 400 "enable_thinking a string" $CH "{$M,\"chat_template_kwargs\":{\"enable_thinking\":\"no\"}}"
bad 400 "reasoning_format a number" $CH "{$M,\"reasoning_format\":1}"
bad 400 "invalid UTF-8" $CH "$(printf '{"messages":[{"role":"user","content":"\xff\xfe"}]}')"
bad 400 "NUL escape in content" $CH '{"messages":[{"role":"user","content":"a\u0000b"}]}'
bad 400 "duplicate keys" $CH "{$M,$M}"
python3 -c 'print("{\"messages\":" + "["*100000 + "]"*100000 + "}")' > "$T/deep.json"
bad 400 "nesting 100000 deep" $CH @"$T/deep.json"
bad 400 "completions prompt a number" /v1/completions '{"prompt":5}'
bad 400 "completions prompt id out of range" /v1/completions '{"prompt":[99999999]}'
bad 400 "completions prompt id negative" /v1/completions '{"prompt":[-1]}'
bad 400 "completions two prompts" /v1/completions '{"prompt":["a","b"]}'
bad 400 "completion empty prompt" /completion '{"prompt":""}'
bad 400 "completion n_predict a string" /completion '{"prompt":"a","n_predict":"x"}'
bad 400 "completion with a GBNF grammar (JSON grammars only)" /completion '{"prompt":"a","grammar":"root ::= \"x\""}'
bad 400 "tokenize content a number" /tokenize '{"content":5}'
bad 400 "tokenize with_pieces a string" /tokenize '{"content":"a","with_pieces":"y"}'
bad 400 "detokenize tokens a string" /detokenize '{"tokens":"x"}'
bad 400 "detokenize token out of range" /detokenize '{"tokens":[99999999]}'
bad 400 "apply-template without messages" /apply-template '{}'
long=$(python3 -c 'print(",".join(["9707"]*1500))')
code=$(post /v1/completions "{\"prompt\":[$long]}")
[ "$code" = 400 ] && is_error_body "$T/body" 400 && grep -q '1500' "$T/body" && grep -q '1024' "$T/body"
check "serve: bad request: prompt of 1500 ids > context 1024 -> 400 naming both" $? "$code $(cat "$T/body")"
code=$(post /v1/chat/completions "$(python3 -c 'import json; print(json.dumps({"messages":[{"role":"user","content":"word "*1200}]}))')")
[ "$code" = 400 ] && grep -q 'context holds 1024' "$T/body"
check "serve: bad request: chat prompt longer than the context -> 400" $? "$code $(cat "$T/body")"
head -c $((20 << 20)) /dev/zero | tr '\0' ' ' > "$T/big.json"
code=$(req POST $CH -H 'Content-Type: application/json' --data-binary @"$T/big.json")
[ "$code" = 413 ] && is_error_body "$T/body" 413
check "serve: bad request: 20 MB body -> 413" $? "got $code $(head -c 200 "$T/body")"
code=$(curl -s -o "$T/body" -w '%{http_code}' --max-time 10 -X POST "${AUTH[@]}" -H 'Transfer-Encoding: chunked' --data-binary @"$T/big.json" "$URL$CH")
[ "$code" = 413 ]
check "serve: bad request: 20 MB chunked body -> 413" $? "got $code"
code=$(req GET /nope); [ "$code" = 404 ] && is_error_body "$T/body" 404
check "serve: unknown endpoint -> 404" $? "$code $(cat "$T/body")"
code=$(req GET /v1/chat/completions); [ "$code" = 405 ] && is_error_body "$T/body" 405
check "serve: GET on a POST endpoint -> 405" $? "$code $(cat "$T/body")"
code=$(req DELETE /v1/models); [ "$code" = 405 ]
check "serve: DELETE /v1/models -> 405" $? "$code"
code=$(curl -s -o "$T/body" -w '%{http_code}' --max-time 5 "$URL/v1/models"); [ "$code" = 401 ] && is_error_body "$T/body" 401
check "serve: missing API key -> 401" $? "$code $(cat "$T/body")"
code=$(curl -s -o "$T/body" -w '%{http_code}' --max-time 5 -H "Authorization: Bearer wrong" "$URL/v1/models"); [ "$code" = 401 ]
check "serve: wrong API key -> 401" $? "$code"
code=$(curl -s -o "$T/body" -w '%{http_code}' --max-time 5 -H "Authorization: Bearer ${KEY%?}" "$URL/v1/models"); [ "$code" = 401 ]
check "serve: API key missing its last character -> 401" $? "$code"
code=$(curl -s -o "$T/body" -w '%{http_code}' --max-time 5 -H "Authorization: Basic $KEY" -d "{$M}" "$URL$CH"); [ "$code" = 401 ]
check "serve: Basic instead of Bearer -> 401" $? "$code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H "X-Big: $(head -c 100000 /dev/zero | tr '\0' a)" "${AUTH[@]}" "$URL/v1/models")
[ "${code:-0}" -ge 400 ] && [ "${code:-0}" -lt 500 ]
check "serve: 100 KB header -> 4xx" $? "got $code"
# a truncated body and a client that sends half a header and goes quiet
exec 3<>/dev/tcp/127.0.0.1/"${URL##*:}" && printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 500\r\n\r\n{"messages":' "$KEY" >&3
exec 3>&-
exec 4<>/dev/tcp/127.0.0.1/"${URL##*:}" && printf 'GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Slow: ' >&4
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL/health")
[ "$code" = 200 ]
check "serve: a truncated body and a half-sent header do not hold the server" $? "got $code"
exec 4>&-
code=$(curl -s -o "$T/body" -w '%{http_code}' --max-time 5 "$URL/health"); [ "$code" = 200 ]
check "serve: still healthy after every malformed request" $? "$code"
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi there"}],"max_tokens":12}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["choices"][0]["message"]["content"]')" = "$want" ]
check "serve: still answers correctly after every malformed request" $? "$code $(cat "$T/body")"

# --- 4 clients x 10 requests: stream, non-stream, and streams dropped after the first bytes ------
ok0=$(curl -s "${AUTH[@]}" "$URL/metrics" | awk '$1=="hmoe:requests_ok_total"{print $2}')
rss() { awk '/^VmRSS:/{print $2}' "/proc/$(pgrep -P "$SPID" hmoe || echo "$SPID")/status" 2>/dev/null; }
rss0=$(rss)
client() { # client N: 10 requests; writes one line per request: kind status
    local n=$1 i
    for i in $(seq 0 9); do
        case $(( (n + i) % 3 )) in
        0) c=$(curl -s -o "$T/c$n.$i" -w '%{http_code}' --max-time 60 "${AUTH[@]}" -d '{"messages":[{"role":"user","content":"Client '$n' request '$i'"}],"max_tokens":16}' "$URL$CH")
           python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["usage"]["completion_tokens"]>0' "$T/c$n.$i" 2>/dev/null && echo "full $c" || echo "broken $c";;
        1) c=$(curl -s -N -o "$T/c$n.$i" -w '%{http_code}' --max-time 60 "${AUTH[@]}" -d '{"messages":[{"role":"user","content":"Stream '$n' '$i'"}],"max_tokens":16,"stream":true}' "$URL$CH")
           [ "$(grep '^data: ' "$T/c$n.$i" | tail -n 1)" = "data: [DONE]" ] && echo "full $c" || echo "broken $c";;
        2) curl -s -N --max-time 60 "${AUTH[@]}" -d '{"messages":[{"role":"user","content":"Drop '$n' '$i'"}],"max_tokens":400,"stream":true}' "$URL$CH" | head -c 200 >/dev/null
           echo "dropped 0";;
        esac
    done > "$T/client$n.txt"
}
CPIDS=()
for n in 1 2 3 4; do client $n & CPIDS+=($!); done
( sleep 180; kill "${CPIDS[@]}" 2>/dev/null ) & WD=$!
wait "${CPIDS[@]}"
kill "$WD" 2>/dev/null
cat "$T"/client*.txt > "$T/all.txt"
full=$(grep -c '^full 200$' "$T/all.txt"); dropped=$(grep -c '^dropped' "$T/all.txt"); broken=$(grep -c '^broken' "$T/all.txt")
[ $((full + dropped)) = 40 ] && [ "$broken" = 0 ]
check "serve: 4 clients x 10 mixed requests: every one answered whole ($full full, $dropped dropped)" $? "$(sort "$T/all.txt" | uniq -c)"
for n in 1 2 3 4; do client $n; done # 40 more, one client at a time: the resident set must not grow
rss1=$(rss)
if grep -q __asan_init "$H" 2>/dev/null; then
    # an ASan build keeps freed blocks in its quarantine (256 MB by default): RSS grows by design
    echo "serve: resident memory flat over 80 requests ... skipped: ASan build (${rss0:-?} -> ${rss1:-?} KiB)"
else
    [ -n "$rss0" ] && [ -n "$rss1" ] && [ "$rss1" -le $((rss0 + 16384)) ]
    check "serve: resident memory flat over 80 requests (${rss0:-?} -> ${rss1:-?} KiB)" $? "rss $rss0 -> $rss1 KiB"
fi
sleep 0.5
ok1=$(curl -s "${AUTH[@]}" "$URL/metrics" | awk '$1=="hmoe:requests_ok_total"{print $2}')
cancelled=$(curl -s "${AUTH[@]}" "$URL/metrics" | awk '$1=="hmoe:requests_cancelled_total"{print $2}')
[ -n "$ok0" ] && [ $(( ok1 - ok0 )) -ge "$full" ] && [ $(( ok1 - ok0 )) -le 80 ] && [ "${cancelled:-0}" -ge 1 ]
check "serve: /metrics counts the answered requests and the dropped streams as cancelled" $? "ok $ok0 -> $ok1 (full $full), cancelled $cancelled"
code=$(req GET /metrics)
grep -q '^llamacpp:tokens_predicted_total ' "$T/body" && grep -q '^llamacpp:requests_deferred ' "$T/body" &&
    grep -q '^# TYPE llamacpp:prompt_tokens_total counter' "$T/body" && grep -q '^hmoe:expert_cache_hit_rate ' "$T/body"
check "serve: GET /metrics in Prometheus text with llama-server's names" $? "$code $(head -c 300 "$T/body")"

# --- the OpenAI npm client ---------------------------------------------------------------------
JS=build/js-openai
if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
    echo "serve: openai npm client ... skipped: npm or node is not installed"
else
    mkdir -p "$JS" && cp tests/js/package.json tests/js/check.mjs tests/js/client.mjs "$JS"/
    if [ -d "$JS/node_modules/openai" ] || timeout 180 npm install --prefix "$JS" --no-audit --no-fund --silent >"$T/npm.log" 2>&1; then
        timeout 120 node "$JS/client.mjs" "$URL/v1" "$KEY" tiny-mini "$want" > "$T/js.out" 2>&1
        rc=$?
        while IFS= read -r line; do
            case "$line" in
            "ok "*) check "serve: openai client: ${line#ok }" 0 "";;
            "FAIL "*) check "serve: openai client: ${line#FAIL }" 1 "see above";;
            esac
        done < "$T/js.out"
        [ $rc -eq 0 ]
        check "serve: openai client script ran to the end" $? "$(tail -n 5 "$T/js.out")"
    else
        echo "serve: openai npm client ... skipped: npm install failed (no registry?): $(tail -n 2 "$T/npm.log")"
    fi
fi

# --- SIGTERM: stops with status 0 ---------------------------------------------------------------
kill -TERM "$SPID"; timeout 20 tail --pid="$SPID" -f /dev/null; wait "$SPID"; rc=$?
[ $rc = 0 ]
check "serve: SIGTERM -> exit 0" $? "rc $rc $(tail -n 3 "$T/s1.log")"

# --- queue limit: --queue 0, a long request running, the next one gets 503 + Retry-After -------
printf '%s\n' "$KEY" > "$T/key.txt"
start_server "$T/s2.log" --queue 0 --temp 0 --api-key-file "$T/key.txt" --timeout 2
wait_ready "$URL"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${AUTH[@]}" "$URL/v1/models")
code2=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL/v1/models")
[ "$code" = 200 ] && [ "$code2" = 401 ]
check "serve: --api-key-file: the key of its first line is required" $? "with key $code, without $code2"
# a client that sends half a header and goes quiet is dropped after --timeout 2
exec 5<>/dev/tcp/127.0.0.1/"${URL##*:}" && printf 'GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Slow: ' >&5
sleep 3
timeout 2 cat <&5 >/dev/null; rc=$?
exec 5>&-
[ $rc != 124 ]
check "serve: an idle half-sent header is closed after --timeout" $? "the connection was still open after 3 s"
curl -s -N --max-time 60 "${AUTH[@]}" -d '{"prompt":"a","n_predict":900,"ignore_eos":true,"stream":true}' "$URL/completion" > "$T/long.txt" &
LONG=$!
for _ in $(seq 1 50); do [ -s "$T/long.txt" ] && break; sleep 0.05; done
code=$(curl -s -D "$T/hdr" -o "$T/body" -w '%{http_code}' --max-time 10 "${AUTH[@]}" -d '{"prompt":"b","n_predict":1}' "$URL/completion")
[ "$code" = 503 ] && grep -qi '^Retry-After:' "$T/hdr" && is_error_body "$T/body" 503
check "serve: queue full -> 503 with Retry-After" $? "got $code $(cat "$T/hdr" "$T/body" | tr -d '\r' | head -c 300)"
# SIGINT while the long stream runs: it is cut, and the server exits 0
kill -INT "$SPID"; timeout 20 tail --pid="$SPID" -f /dev/null; wait "$SPID"; rc=$?
timeout 10 tail --pid="$LONG" -f /dev/null
[ $rc = 0 ] && grep -q 'SIGINT' "$T/s2.log"
check "serve: SIGINT during a stream -> exit 0" $? "rc $rc $(tail -n 3 "$T/s2.log")"

# --- qwen35moe (recurrent state): the prompt cache through a checkpoint, reasoning from the prompt's <think>
Q35="$T/q35.gguf"
if $H synth --preset qwen35-tiny -q -o "$Q35" 2>/dev/null; then
    MODEL_OPTS="-m $Q35 -t 1 -c 1024 -q"
    start_server "$T/s5.log" --temp 0
    wait_ready "$URL"
    code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":6}')
    [ "$code" = 200 ] && [ "$(jq_ "$T/body" 'len(d["choices"][0]["message"].get("reasoning_content",""))>0 and d["choices"][0]["message"]["content"]==""')" = True ]
    check "serve: qwen35 thinking on: the answer starts inside <think>, so it is reasoning_content" $? "$code $(cat "$T/body")"
    code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":6,"chat_template_kwargs":{"enable_thinking":false}}')
    [ "$code" = 200 ] && [ "$(jq_ "$T/body" '"reasoning_content" not in d["choices"][0]["message"] and d["usage"]["completion_tokens"]==6')" = True ]
    check "serve: qwen35 enable_thinking false: no reasoning_content" $? "$code $(cat "$T/body")"
    conv='{"messages":[{"role":"user","content":"Hello"},{"role":"assistant","content":"Hi!"},{"role":"user","content":"More"}],"max_tokens":6,"chat_template_kwargs":{"enable_thinking":false}'
    post /v1/chat/completions "$conv}" >/dev/null
    code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hello"},{"role":"assistant","content":"Hi!"},{"role":"user","content":"More"},{"role":"assistant","content":"Sure."},{"role":"user","content":"Again"}],"max_tokens":6,"chat_template_kwargs":{"enable_thinking":false}}')
    cp "$T/body" "$T/q35_cached.json"
    code2=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hello"},{"role":"assistant","content":"Hi!"},{"role":"user","content":"More"},{"role":"assistant","content":"Sure."},{"role":"user","content":"Again"}],"max_tokens":6,"chat_template_kwargs":{"enable_thinking":false},"cache_prompt":false}')
    nc=$(jq_ "$T/q35_cached.json" 'd["usage"]["prompt_tokens_details"]["cached_tokens"]')
    [ "$code" = 200 ] && [ "$code2" = 200 ] && [ "${nc:-0}" -gt 0 ] &&
        [ "$(jq_ "$T/q35_cached.json" 'd["choices"][0]["message"]["content"]')" = "$(jq_ "$T/body" 'd["choices"][0]["message"]["content"]')" ]
    check "serve: qwen35 prompt cache: the next turn reuses $nc tokens and answers as without the cache" $? "$code $code2 $(cat "$T/q35_cached.json") vs $(cat "$T/body")"
    kill -TERM "$SPID"; timeout 20 tail --pid="$SPID" -f /dev/null; wait "$SPID"
else
    echo "serve: qwen35 checks ... skipped: hmoe synth --preset qwen35-tiny failed"
fi

# --- a bad model path fails with status 1 and a message ----------------------------------------
timeout 20 $H serve -m "$T/missing.gguf" --port 0 -q > "$T/s3.log" 2>&1; rc=$?
[ $rc = 1 ] && grep -q 'missing.gguf' "$T/s3.log"
check "serve: a missing model -> exit 1 naming it" $? "rc $rc $(cat "$T/s3.log")"
timeout 20 $H serve $MODEL_OPTS --port 99999 > "$T/s4.log" 2>&1; rc=$?
[ $rc != 0 ] && grep -q 'port' "$T/s4.log"
check "serve: --port 99999 -> error naming the port" $? "rc $rc $(cat "$T/s4.log")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
