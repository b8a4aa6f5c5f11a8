#!/usr/bin/env bash
# test_server_json.sh — constrained answers of `hmoe serve` on the tiny random-weight model, where
# only the grammar can make the output valid: response_format json_object / json_schema in
# /v1/chat/completions (streamed and not, several seeds and max_tokens: the answer parses and
# matches the schema, within max_tokens), /completion's json_schema, Ollama's format "json" and a
# schema; max_tokens below the schema's shortest answer and unsupported keywords -> 400 naming
# them; tool_choice "required" and a named function -> one parsed call, finish_reason tool_calls
# (also streamed); logprobs / top_logprobs (chat) and logprobs N (completions); chat_template_kwargs and reasoning_effort passed to the Jinja template. Every
# step is bounded in time.
set -u
cd "$(dirname "$0")/.."
S="${HMOE_SHARED:-tests}"
MINI="$S/fixtures/models/tiny-qwen3moe-A-mini-F32.gguf"
H=./hmoe
T=$(mktemp -d)
. tests/server_lib.sh
trap cleanup_servers EXIT
skip_unless_server "serve json checks"
MODEL_OPTS="-m $MINI -t 1 -c 1024 -ctk f32 -ctv f32 -q"
start_server "$T/s1.log" --temp 1
wait_ready "$URL"
check "json: server up" $? "$(cat "$T/s1.log")"

SCHEMA='{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"score":{"type":["number","null"]},"ok":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string","enum":["red","green"]}},"pet":{"type":"object","properties":{"kind":{"enum":["cat","dog"]}},"required":["kind"]}},"required":["name","age","ok","tags","pet"],"additionalProperties":false}'
printf '%s' "$SCHEMA" > "$T/schema.json"
# valid FILE [SCHEMA_FILE]: the text (content / response) parses and matches the schema (a small validator)
cat > "$T/valid.py" <<'PY'
import json, sys
def ok(s, v):
    if s is None: return isinstance(v, dict)
    if "enum" in s: return v in s["enum"]
    t = s.get("type"); ts = t if isinstance(t, list) else [t] if t else None
    kinds = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    def is_t(x):
        if x == "integer": return isinstance(v, int) and not isinstance(v, bool)
        if x == "number": return isinstance(v, (int, float)) and not isinstance(v, bool)
        return isinstance(v, kinds[x])
    if ts and not any(is_t(x) for x in ts): return False
    if isinstance(v, dict) and "properties" in s:
        if any(k not in s["properties"] or not ok(s["properties"][k], x) for k, x in v.items()): return False
        if any(r not in v for r in s.get("required", [])): return False
    if isinstance(v, list) and "items" in s: return all(ok(s["items"], x) for x in v)
    return True
text, schema = sys.argv[1], json.load(open(sys.argv[2])) if len(sys.argv) > 2 else None
sys.exit(0 if ok(schema, json.loads(text)) else 1)
PY
valid() { python3 "$T/valid.py" "$@" 2>/dev/null; }

bad=0; detail=""
for seed in 1 2 3 4 5 6; do
    for n in 60 200; do
        code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi $seed\"}],\"seed\":$seed,\"max_tokens\":$n,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\",\"strict\":true,\"schema\":$SCHEMA}}}")
        txt=$(jq_ "$T/body" 'd["choices"][0]["message"]["content"]')
        used=$(jq_ "$T/body" 'd["usage"]["completion_tokens"]')
        if [ "$code" != 200 ] || ! valid "$txt" "$T/schema.json" || [ "${used:-999}" -gt $n ]; then bad=1; detail="$detail [seed $seed n $n: $code $(head -c 300 "$T/body")]"; fi
    done
done
[ $bad = 0 ]
check "json: json_schema: 12 answers (6 seeds x max_tokens 60, 200) parse, match the schema, fit max_tokens" $? "$detail"

bad=0; detail=""
for seed in 1 2 3 4; do
    code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"seed\":$seed,\"max_tokens\":50,\"response_format\":{\"type\":\"json_object\"}}")
    txt=$(jq_ "$T/body" 'd["choices"][0]["message"]["content"]')
    if [ "$code" != 200 ] || ! valid "$txt"; then bad=1; detail="$detail [$code $(head -c 300 "$T/body")]"; fi
done
[ $bad = 0 ]
check "json: json_object: 4 answers are JSON objects" $? "$detail"

code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":80,\"stream\":true,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\",\"schema\":$SCHEMA}}}" -N)
txt=$(python3 -c '
import json,sys
ev=[l[6:] for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ") and l[6:]!="[DONE]"]
print("".join(c["choices"][0]["delta"].get("content") or "" for c in map(json.loads, ev) if c["choices"]), end="")' "$T/body")
[ "$code" = 200 ] && valid "$txt" "$T/schema.json"
check "json: json_schema streamed: the deltas make a matching answer" $? "$code '$txt'"

code=$(post /completion "{\"prompt\":\"Data:\",\"n_predict\":80,\"json_schema\":$SCHEMA}")
txt=$(jq_ "$T/body" 'd["content"]')
[ "$code" = 200 ] && valid "$txt" "$T/schema.json"
check "json: /completion json_schema" $? "$code $(head -c 300 "$T/body")"

code=$(post /api/chat '{"model":"m","stream":false,"format":"json","messages":[{"role":"user","content":"Hi"}],"options":{"num_predict":40}}')
txt=$(jq_ "$T/body" 'd["message"]["content"]')
[ "$code" = 200 ] && valid "$txt"
check "json: Ollama format json" $? "$code $(head -c 300 "$T/body")"
code=$(post /api/generate "{\"model\":\"m\",\"prompt\":\"Hi\",\"format\":$SCHEMA,\"options\":{\"num_predict\":80}}" -N)
txt=$(python3 -c 'import json,sys; print("".join(json.loads(l)["response"] for l in open(sys.argv[1]).read().splitlines()), end="")' "$T/body")
[ "$code" = 200 ] && valid "$txt" "$T/schema.json"
check "json: Ollama format schema, streamed /api/generate" $? "$code '$txt'"

code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":10,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\",\"schema\":$SCHEMA}}}")
[ "$code" = 400 ] && grep -q 'max_tokens' "$T/body"
check "json: max_tokens below the schema's shortest answer -> 400" $? "$code $(cat "$T/body")"
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object","properties":{"a":{"anyOf":[{"type":"string"}]}}}}}}')
[ "$code" = 400 ] && grep -q "anyOf" "$T/body" && [ "$(jq_ "$T/body" 'd["error"]["param"]')" = response_format ]
check "json: an unsupported schema keyword -> 400 naming it" $? "$code $(cat "$T/body")"
code=$(post /api/chat '{"model":"m","format":{"type":"string","pattern":"x"},"messages":[{"role":"user","content":"Hi"}]}')
[ "$code" = 400 ] && grep -q '"error":".*pattern' "$T/body"
check "json: Ollama format with an unsupported keyword -> 400 {\"error\"}" $? "$code $(cat "$T/body")"

TOOLS='[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city","unit"]}}},{"type":"function","function":{"name":"add","parameters":{"type":"object","properties":{"a":{"type":"number","minimum":0}}}}}]'
bad=0; detail=""
for tc in '"required"' '{"type":"function","function":{"name":"get_weather"}}' '{"type":"function","function":{"name":"add"}}'; do
    for seed in 1 2; do
        code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"seed\":$seed,\"max_tokens\":80,\"tools\":$TOOLS,\"tool_choice\":$tc}")
        r=$(jq_ "$T/body" '(c:=d["choices"][0]) and c["finish_reason"]=="tool_calls" and len(c["message"]["tool_calls"])==1 and isinstance(json.loads(c["message"]["tool_calls"][0]["function"]["arguments"]),dict) and c["message"]["tool_calls"][0]["function"]["name"]')
        case "$tc" in
        *get_weather*) ok=$(jq_ "$T/body" '(a:=json.loads(d["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])) and isinstance(a["city"],str) and a["unit"] in ("c","f")'); [ "$r" = get_weather ] && [ "$ok" = True ] || r=bad;;
        *add*) [ "$r" = add ] || r=bad;;
        *) [ "$r" = get_weather ] || [ "$r" = add ] || r=bad;;
        esac
        if [ "$code" != 200 ] || [ "$r" = bad ]; then bad=1; detail="$detail [$tc $seed: $code $(head -c 300 "$T/body")]"; fi
    done
done
[ $bad = 0 ]
check "json: tool_choice required / named: one parsed call, finish_reason tool_calls (6 requests)" $? "$detail"
code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"max_tokens\":80,\"stream\":true,\"tools\":$TOOLS,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}}" -N)
python3 - "$T/body" > "$T/tc.chk" 2>&1 <<'PY'
import json, sys
ev = [json.loads(l[6:]) for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ") and l[6:] != "[DONE]"]
deltas = [tc for c in ev for ch in c["choices"] for tc in ch["delta"].get("tool_calls", [])]
fin = [ch["finish_reason"] for c in ev for ch in c["choices"] if ch["finish_reason"]]
# the first delta names the call, the others carry its arguments piece by piece
assert deltas and deltas[0].get("id") and deltas[0]["function"]["name"] == "get_weather", deltas
assert all(d["index"] == 0 and "id" not in d and "name" not in d["function"] for d in deltas[1:]), deltas
args = "".join(d["function"].get("arguments", "") for d in deltas)
assert len(deltas) > 2 and fin == ["tool_calls"], (deltas, fin)
assert isinstance(json.loads(args)["city"], str), args
assert not any(ch["delta"].get("content") for c in ev for ch in c["choices"]), "call text leaked into content"
print("ok")
PY
[ "$code" = 200 ] && grep -qx ok "$T/tc.chk"
check "json: a forced call streamed as tool_calls deltas, its arguments piece by piece" $? "$code $(cat "$T/tc.chk")"
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"tool_choice":"required"}')
[ "$code" = 400 ] && grep -q "no 'tools'" "$T/body"
check "json: tool_choice required without tools -> 400" $? "$code $(cat "$T/body")"
code=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"tools\":$TOOLS,\"parallel_tool_calls\":\"yes\"}")
[ "$code" = 400 ]
check "json: parallel_tool_calls not a boolean -> 400" $? "$code $(cat "$T/body")"
# logprobs: greedy picks the most likely token; the entries spell the answer; streamed per chunk
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi there"}],"max_tokens":8,"temperature":0,"logprobs":true,"top_logprobs":3}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" '(lp:=d["choices"][0]["logprobs"]["content"]) and len(lp)==8 and all(len(e["top_logprobs"])==3 and abs(e["logprob"]-e["top_logprobs"][0]["logprob"])<1e-6 and e["top_logprobs"][0]["logprob"]>=e["top_logprobs"][1]["logprob"]>=e["top_logprobs"][2]["logprob"] and e["logprob"]<=0 and sum(__import__("math").exp(t["logprob"]) for t in e["top_logprobs"])<=1.0001 and bytes(e["bytes"]).decode("utf-8","replace")==e["token"] for e in lp) and "".join(e["token"] for e in lp).strip()==d["choices"][0]["message"]["content"]')" = True ]
check "json: logprobs / top_logprobs in OpenAI's shape (greedy = the top entry)" $? "$code $(head -c 600 "$T/body")"
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi there"}],"max_tokens":8,"temperature":0,"logprobs":true,"stream":true}' -N)
n=$(python3 -c '
import json,sys
ev=[json.loads(l[6:]) for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ") and l[6:]!="[DONE]"]
print(sum(len((c["choices"][0].get("logprobs") or {}).get("content",[])) for c in ev if c["choices"]))' "$T/body")
[ "$code" = 200 ] && [ "$n" = 8 ]
check "json: streamed logprobs: 8 entries over the chunks" $? "$code $n"
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"logprobs":true,"top_logprobs":21}')
[ "$code" = 400 ]
check "json: top_logprobs 21 -> 400" $? "$code"
# /v1/completions: logprobs N in the completions API's shape; the same tokens as the chat shape's
code=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":8,"temperature":0,"logprobs":3}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" '(c:=d["choices"][0]) and (lp:=c["logprobs"]) and len(lp["tokens"])==8 and "".join(lp["tokens"])==c["text"] and all(len(t)==3 and abs(max(t.values())-v)<1e-6 and v<=0 for t,v in zip(lp["top_logprobs"],lp["token_logprobs"])) and lp["text_offset"]==[sum(len(x.encode()) for x in lp["tokens"][:i]) for i in range(8)]')" = True ]
check "json: /v1/completions logprobs 3: tokens, token_logprobs, top_logprobs, text_offset (greedy = the top)" $? "$code $(head -c 600 "$T/body")"
cp "$T/body" "$T/lp_whole"
code=$(post /v1/completions '{"prompt":"Once upon a time","max_tokens":8,"temperature":0,"logprobs":3,"stream":true}' -N)
[ "$code" = 200 ] && python3 -c '
import json, sys
ev = [json.loads(l[6:]) for l in open(sys.argv[1]) if l.startswith("data: {")]
whole = json.load(open(sys.argv[2]))["choices"][0]["logprobs"]
got = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
for c in ev:
    lp = c["choices"][0]["logprobs"] if c["choices"] else None
    for k in got: got[k] += (lp or {}).get(k, [])
assert got == whole, (got, whole)' "$T/body" "$T/lp_whole"
check "json: /v1/completions logprobs streamed per chunk add up to the whole answer's" $? "$code $(head -c 600 "$T/body")"
code=$(post /v1/completions '{"prompt":"Hi","logprobs":true}')
[ "$code" = 400 ] && grep -q integer "$T/body"
check "json: /v1/completions logprobs true -> 400 (an integer there)" $? "$code $(cat "$T/body")"
code=$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"logprobs":2}')
[ "$code" = 400 ]
check "json: chat logprobs 2 -> 400 (true or false there)" $? "$code $(cat "$T/body")"
code=$(post /v1/completions '{"prompt":"Hi","logprobs":21}')
[ "$code" = 400 ]
check "json: /v1/completions logprobs 21 -> 400" $? "$code"
code=$(req GET /health)
[ "$code" = 200 ]
check "json: healthy at the end" $? "$code"
stop_server

# chat_template_kwargs (every key) and reasoning_effort reach the Jinja template
printf '%s' "{%- for m in messages %}{{ m.role }}: {{ m.content }}
{% endfor %}[custom={{ custom_var | default('none') }} effort={{ reasoning_effort | default('none') }} think={{ enable_thinking }}]" > "$T/kw.jinja"
start_server "$T/s2.log" --chat-template-file "$T/kw.jinja"
wait_ready "$URL"
code=$(post /apply-template '{"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"custom_var":"XYZ","enable_thinking":false},"reasoning_effort":"high"}')
[ "$code" = 200 ] && [ "$(jq_ "$T/body" 'd["prompt"]')" = "$(printf 'user: Hi\n[custom=XYZ effort=high think=False]')" ]
check "json: chat_template_kwargs keys and reasoning_effort reach the template" $? "$code $(cat "$T/body")"
code=$(post /apply-template '{"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"low","chat_template_kwargs":{"reasoning_effort":"medium"}}')
[ "$code" = 200 ] && grep -q 'effort=medium think=True' "$T/body"
check "json: a chat_template_kwargs member wins over reasoning_effort" $? "$code $(cat "$T/body")"
code=$(post /api/chat '{"model":"m","stream":false,"think":"high","messages":[{"role":"user","content":"Hi"}],"options":{"num_predict":2}}')
[ "$code" = 200 ]
check "json: Ollama think \"high\" (reasoning effort) accepted" $? "$code $(cat "$T/body")"
code=$(post /apply-template '{"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":5}')
[ "$code" = 400 ]
check "json: reasoning_effort not a string -> 400" $? "$code $(cat "$T/body")"
stop_server
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
