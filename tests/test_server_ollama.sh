#!/usr/bin/env bash
# test_server_ollama.sh — Ollama's API of `hmoe serve` on loopback: "GET /" and "HEAD /", /api/version,
# /api/tags, /api/ps, /api/show in Ollama's shapes; /api/chat and /api/generate streamed (NDJSON:
# done false chunks, then one done true object with done_reason and nanosecond statistics) and not,
# their text checked against the OpenAI endpoints' (tested against `hmoe run` in test_server.sh);
# options (num_predict, stop, seed, temperature), think, format, keep_alive, load-only requests;
# images and malformed requests answered 400 with Ollama's {"error": "..."}; and a request as an
# Ollama client sends it (python, reading the stream line by line). Every step is bounded in time.
set -u
cd "$(dirname "$0")/.."
S="${HMOE_SHARED:-tests}"
MINI="$S/fixtures/models/tiny-qwen3moe-A-mini-F32.gguf"
H=./hmoe
T=$(mktemp -d)
. tests/server_lib.sh
trap cleanup_servers EXIT
skip_unless_server "serve ollama checks"
MODEL_OPTS="-m $MINI -t 1 -c 1024 -ctk f32 -ctv f32 -q"

start_server "$T/s1.log" --alias tiny-mini --temp 0
wait_ready "$URL"
check "ollama: server up" $? "$(cat "$T/s1.log")"

code=$(req GET /)
[ "$code" = 200 ] && [ "$(cat "$T/body")" = "Ollama is running" ]
check "ollama: GET / says 'Ollama is running'" $? "$code $(cat "$T/body")"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -I "$URL/")
[ "$code" = 200 ]
check "ollama: HEAD / is 200" $? "$code"
code=$(req GET /api/version)
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'bool(__import__("re").fullmatch(r"\d+\.\d+\.\d+", d["version"]))')" = True ]
check "ollama: GET /api/version" $? "$code $(cat "$T/body")"
code=$(req GET /api/tags)
[ "$code" = 200 ] && [ "$(jq_ "$T/body" '(m:=d["models"][0]) and len(d["models"])==1 and m["name"]=="tiny-mini" and m["model"]=="tiny-mini" and m["size"]>0 and len(m["digest"])==64 and m["details"]["format"]=="gguf" and m["details"]["family"]=="qwen3moe" and m["details"]["quantization_level"]=="F32" and "T" in m["modified_at"]')" = True ]
check "ollama: GET /api/tags lists the model in Ollama's shape" $? "$code $(cat "$T/body")"
code=$(req GET /api/ps)
[ "$code" = 200 ] && [ "$(jq_ "$T/body" '(m:=d["models"][0]) and m["name"]=="tiny-mini" and m["size_vram"]==0 and m["context_length"]==1024 and "expires_at" in m and m["details"]["format"]=="gguf"')" = True ]
check "ollama: GET /api/ps lists the loaded model (no VRAM on the CPU)" $? "$code $(cat "$T/body")"
code=$(post /api/show '{"model":"tiny-mini"}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" '(i:=d["model_info"]) and i["general.architecture"]=="qwen3moe" and i["qwen3moe.context_length"]>0 and i["general.parameter_count"]>0 and "completion" in d["capabilities"] and "tools" in d["capabilities"] and "<|im_start|>" in d["template"]')" = True ]
check "ollama: POST /api/show: model_info, capabilities, template" $? "$code $(head -c 400 "$T/body")"

# /api/chat not streamed: the OpenAI endpoint's text, Ollama's final object
MSG='[{"role":"user","content":"Hi there"}]'
post /v1/chat/completions "{\"messages\":$MSG,\"max_tokens\":12}" >/dev/null
want=$(jq_ "$T/body" 'd["choices"][0]["message"]["content"]')
code=$(post /api/chat "{\"model\":\"tiny-mini\",\"messages\":$MSG,\"stream\":false,\"options\":{\"num_predict\":12}}")
cp "$T/body" "$T/chat.json"
[ "$code" = 200 ] && [ -n "$want" ] && [ "$(jq_ "$T/chat.json" 'd["message"]["content"]')" = "$want" ] &&
    grep -qi '^Content-Type: application/json' "$T/hdr"
check "ollama: /api/chat stream false = the OpenAI chat text" $? "$code $(cat "$T/chat.json") want '$want'"
[ "$(jq_ "$T/chat.json" 'd["model"]=="tiny-mini" and d["done"] is True and d["done_reason"]=="length" and d["message"]["role"]=="assistant" and d["eval_count"]==12 and d["prompt_eval_count"]>0 and all(isinstance(d[k],int) and d[k]>=0 for k in ("total_duration","load_duration","prompt_eval_duration","eval_duration")) and d["eval_duration"]>0 and d["total_duration"]>=d["prompt_eval_duration"]+d["eval_duration"] and d["created_at"].endswith("Z")')" = True ]
check "ollama: final object: done, done_reason, counts and durations in ns" $? "$(cat "$T/chat.json")"

# streamed (Ollama's default): NDJSON, done false chunks, one done true object last
code=$(post /api/chat "{\"model\":\"tiny-mini\",\"messages\":$MSG,\"options\":{\"num_predict\":12}}" -N)
python3 - "$T/body" "$want" > "$T/nd.chk" 2>&1 <<'PY'
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
assert lines[-1] == "", "the stream does not end with a newline"
objs = [json.loads(l) for l in lines[:-1]]
assert all(o["done"] is False for o in objs[:-1]) and objs[-1]["done"] is True, "done flags"
text = "".join(o["message"]["content"] for o in objs)
assert text == sys.argv[2], "chunks %r != %r" % (text, sys.argv[2])
f = objs[-1]
assert f["done_reason"] == "length" and f["eval_count"] == 12 and f["message"]["content"] == ""
assert all(o["model"] == "tiny-mini" and o["message"]["role"] == "assistant" for o in objs)
print("ok")
PY
[ "$code" = 200 ] && grep -qx ok "$T/nd.chk" && grep -qi '^Content-Type: application/x-ndjson' "$T/hdr"
check "ollama: /api/chat stream: NDJSON chunks add up to the text, final done object" $? "$code $(cat "$T/nd.chk")"

# /api/generate: rendered as one user turn (the chat text); raw = /v1/completions
code=$(post /api/generate '{"model":"tiny-mini","prompt":"Hi there","stream":false,"options":{"num_predict":12}}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["response"]')" = "$want" ] && [ "$(jq_ "$T/body" 'd["done"] and d["eval_count"]==12')" = True ]
check "ollama: /api/generate renders the prompt as a user turn" $? "$code $(cat "$T/body") want '$want'"
post /v1/chat/completions '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi there"}],"max_tokens":8}' >/dev/null
want_sys=$(jq_ "$T/body" 'd["choices"][0]["message"]["content"]')
code=$(post /api/generate '{"model":"tiny-mini","prompt":"Hi there","system":"Be brief.","stream":false,"options":{"num_predict":8}}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["response"]')" = "$want_sys" ]
check "ollama: /api/generate with system" $? "$code $(cat "$T/body") want '$want_sys'"
post /v1/completions '{"prompt":"Once upon a time","max_tokens":8}' >/dev/null
want_raw=$(jq_ "$T/body" 'd["choices"][0]["text"]')
code=$(post /api/generate '{"model":"tiny-mini","prompt":"Once upon a time","raw":true,"options":{"num_predict":8}}' -N)
got=$(python3 -c '
import json,sys
o=[json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
assert o[-1]["done"] and o[-1]["response"]=="" and all(not x["done"] for x in o[:-1])
print("".join(x["response"] for x in o), end="")' "$T/body")
[ "$code" = 200 ] && [ -n "$want_raw" ] && [ "$got" = "$want_raw" ]
check "ollama: /api/generate raw, streamed = /v1/completions" $? "$code got '$got' want '$want_raw'"

# options
stop=$(python3 -c 'import sys; t=sys.argv[1]; print(t[len(t)//2:len(t)//2+3])' "$want")
exp=$(python3 -c 'import sys; t=sys.argv[1]; print(t[:t.find(sys.argv[2])].rstrip(" \t\r\n"))' "$want" "$stop")
code=$(post /api/chat "$(python3 -c 'import json,sys; print(json.dumps({"model":"m","messages":[{"role":"user","content":"Hi there"}],"stream":False,"options":{"num_predict":12,"stop":[sys.argv[1]]}}))' "$stop")")
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["message"]["content"]')" = "$exp" ] && [ "$(jq_ "$T/body" 'd["done_reason"]')" = stop ]
check "ollama: options.stop cuts the answer, done_reason stop (any model name accepted)" $? "$code $(cat "$T/body") want '$exp'"
S1='{"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":false,"options":{"num_predict":10,"temperature":1.5,"top_k":0,"top_p":1,"min_p":0,"seed":7}}'
post /api/chat "$S1" >/dev/null; a=$(jq_ "$T/body" 'd["message"]["content"]')
post /api/chat "$S1" >/dev/null; b=$(jq_ "$T/body" 'd["message"]["content"]')
post /api/chat "${S1/\"seed\":7/\"seed\":8}" >/dev/null; c=$(jq_ "$T/body" 'd["message"]["content"]')
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" != "$c" ]
check "ollama: options.seed repeats a sampled answer, another seed changes it" $? "'$a' '$b' '$c'"
code=$(post /api/chat '{"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":false,"options":{"num_predict":3,"num_ctx":8192,"num_gpu":99,"repeat_penalty":1.1}}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["eval_count"]')" = 3 ] && grep -q 'Ollama options ignored.*num_ctx' "$T/s1.log"
check "ollama: num_ctx / num_gpu ignored with a note on the log" $? "$code $(cat "$T/body") $(tail -n 2 "$T/s1.log")"
code=$(post /api/chat '{"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":false,"think":false,"keep_alive":"10m","options":{"num_predict":3}}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" '"thinking" not in d["message"] and d["eval_count"]==3')" = True ]
check "ollama: think false and keep_alive accepted" $? "$code $(cat "$T/body")"

# tools: an Ollama-style history (arguments as an object, tool_name on the result) is accepted
TOOLS='[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]'
code=$(post /api/chat "{\"model\":\"m\",\"stream\":false,\"tools\":$TOOLS,\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}]},{\"role\":\"tool\",\"tool_name\":\"get_weather\",\"content\":\"18 C\"}],\"options\":{\"num_predict\":4}}")
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["done"]')" = True ]
check "ollama: tools and an Ollama-style tool call + result in the history" $? "$code $(cat "$T/body")"

# load-only requests
code=$(post /api/chat '{"model":"m","messages":[]}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["done"] and d["done_reason"]=="load" and d["message"]["content"]==""')" = True ]
check "ollama: empty messages -> done_reason load" $? "$code $(cat "$T/body")"
code=$(post /api/generate '{"model":"m","keep_alive":0}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["done"] and d["done_reason"]=="unload" and d["response"]==""')" = True ]
check "ollama: no prompt and keep_alive 0 -> done_reason unload" $? "$code $(cat "$T/body")"

# refused: Ollama's error shape {"error": "..."}
is_ollama_error() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert list(d)==["error"] and isinstance(d["error"],str) and d["error"]' "$1" 2>/dev/null; }
bad=0; detail=""
while IFS='|' read -r path body want_code; do
    code=$(post "$path" "$body")
    if [ "$code" != "$want_code" ] || ! is_ollama_error "$T/body"; then bad=1; detail="$detail [$path $body -> $code $(cat "$T/body")]"; fi
done <<'EOF'
/api/chat|{"model":"m","messages":[{"role":"user","content":"Hi","images":["aGk="]}]}|400
/api/generate|{"model":"m","prompt":"Hi","images":["aGk="]}|400
/api/chat|{"model":"m","messages":"Hi"}|400
/api/chat|{"model":"m","messages":[{"role":"wizard","content":"Hi"}]}|400
/api/chat|{"model":"m","messages":[{"role":"user","content":"Hi"}],"options":{"temperature":"hot"}}|400
/api/chat|{"model":"m","messages":[{"role":"user","content":"Hi"}],"options":[1]}|400
/api/chat|{"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":"yes"}|400
/api/chat|{"model":"m","messages":[{"role":"user","content":"Hi"}],"think":"very"}|400
/api/chat|{"model":"m","messages":[{"role":"user","content":"Hi"}],"format":"yaml"}|400
/api/chat|{"model":7,"messages":[{"role":"user","content":"Hi"}]}|400
/api/generate|{"model":"m","prompt":42}|400
/api/generate|{"model":"m","prompt":"def f():","suffix":"    return x"}|400
/api/generate|{"model":"m","prompt":"Hi","template":"{{ .Prompt }}"}|400
/api/chat|{"model":"m","messages":[{"role":"user","content":"Hi"}|400
/api/show|[1]|400
EOF
[ $bad = 0 ]
check "ollama: 15 malformed or unsupported requests -> 400 {\"error\": ...}" $? "$detail"
code=$(req GET /health)
[ "$code" = 200 ]
check "ollama: healthy after the bad requests" $? "$code"

# a request as an Ollama client sends it: stream read line by line, text gathered
python3 - "$URL" "$want" > "$T/client.out" 2>&1 <<'PY'
import json, sys, urllib.request
url, want = sys.argv[1], sys.argv[2]
body = {"model": "tiny-mini:latest", "messages": [{"role": "user", "content": "Hi there"}], "stream": True,
        "options": {"num_predict": 12, "temperature": 0}, "keep_alive": "5m"}
r = urllib.request.urlopen(urllib.request.Request(url + "/api/chat", json.dumps(body).encode(),
                           {"Content-Type": "application/json", "User-Agent": "ollama-python/0.4.7"}), timeout=60)
text, final = "", None
for line in r:
    part = json.loads(line)
    if "error" in part: raise SystemExit("error: " + part["error"])
    text += part.get("message", {}).get("content", "")
    if part["done"]: final = part
assert final and text == want, (text, want)
print("ok", final["eval_count"], final["eval_duration"] > 0)
PY
grep -qx 'ok 12 True' "$T/client.out"
check "ollama: an Ollama client's streamed chat" $? "$(cat "$T/client.out")"

stop_server
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
