#!/usr/bin/env bash
# test_server_np.sh — `hmoe serve -np N`: slots stepped together. Eight distinct prompts are
# answered one at a time by a one-slot server (greedy), then sent at once, half of them
# streamed, to a four-slot server with the same context per slot: every client must get its
# own prompt's answer (two slots' KV caches mixed up would change them). Clients that hang
# up mid-stream free their slots (the metrics count them, nothing stays busy) and the next
# eight concurrent requests still get their answers; a conversation's next turn finds its own
# slot's prompt cache after another conversation ran; /props and /metrics report the slots;
# a bad -np is refused. Every step is bounded with `timeout`.
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
    echo "server -np checks ... skipped: this hmoe was built without serve"; echo "0 passed, 0 failed"; exit 0
fi
for tool in curl python3; do
    if ! command -v $tool >/dev/null; then
        echo "server -np checks ... skipped: $tool is not installed"; echo "0 passed, 0 failed"; exit 0
    fi
done
T=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT

start_server() { # start_server LOG ARGS...: sets SPID and URL once the port is printed
    local log=$1; shift
    timeout 600 $H serve -m "$MINI" -t 2 -ctk f32 -ctv f32 -q --temp 0 --port 0 "$@" >"$log" 2>&1 &
    SPID=$!; PIDS+=("$SPID")
    URL=""
    for _ in $(seq 1 100); do
        URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -n 1)
        [ -n "$URL" ] && break
        sleep 0.1
    done
    for _ in $(seq 1 200); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$URL/health")" = 200 ] && return 0
        sleep 0.1
    done
    return 1
}
jq_() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=eval(sys.argv[2]); sys.stdout.write(v if isinstance(v,str) else json.dumps(v) if isinstance(v,(dict,list)) else str(v))' "$1" "$2" 2>/dev/null; }
# text of a /v1/completions answer: the JSON body, or the concatenated SSE chunks
answer() {
    python3 - "$1" <<'EOF' 2>/dev/null
import json, sys
raw = open(sys.argv[1]).read()
if raw.lstrip().startswith("{"):
    sys.stdout.write(json.loads(raw)["choices"][0]["text"])
else:
    out = []
    for line in raw.splitlines():
        if line.startswith("data: ") and line[6:].strip() != "[DONE]":
            ch = json.loads(line[6:])["choices"]
            if ch: out.append(ch[0].get("text") or "")
    sys.stdout.write("".join(out))
EOF
}
PROMPTS=("The capital of France" "Once upon a time in a" "def fibonacci(n):" "Quantum mechanics says"
         "My favourite colour is" "SELECT * FROM users WHERE" "In 1492 Columbus sailed" "The quick brown fox")
body() { # body I STREAM MAX
    printf '{"prompt":"%s","max_tokens":%d,"stream":%s}' "${PROMPTS[$1]}" "$3" "$2"
}
complete() { # complete I STREAM MAX OUTFILE [curl args]
    local i=$1 st=$2 mx=$3 of=$4; shift 4
    curl -s -o "$of" --max-time 60 -H 'Content-Type: application/json' --data-binary "$(body "$i" "$st" "$mx")" \
        "$URL/v1/completions" "$@"
}

# --- answers of each prompt alone (one slot) ------------------------------------------------------
start_server "$T/ref.log" -c 1024
check "serve -np 1: ready" $? "$(cat "$T/ref.log")"
for i in "${!PROMPTS[@]}"; do complete "$i" false 24 "$T/ref$i"; done
ok=0; for i in "${!PROMPTS[@]}"; do [ -n "$(answer "$T/ref$i")" ] || ok=1; done
distinct=$(for i in "${!PROMPTS[@]}"; do answer "$T/ref$i" | md5sum; done | sort -u | wc -l)
[ $ok = 0 ] && [ "$distinct" -ge 6 ]
check "serve -np 1: eight prompts answered alone ($distinct distinct answers)" $? "$(cat "$T/ref0")"
kill "$SPID"; wait "$SPID" 2>/dev/null

# --- four slots, eight clients at once ------------------------------------------------------------
start_server "$T/np.log" -c 4096 -np 4
check "serve -np 4: ready" $? "$(cat "$T/np.log")"
code=$(curl -s -o "$T/props" -w '%{http_code}' --max-time 5 "$URL/props")
[ "$code" = 200 ] && [ "$(jq_ "$T/props" 'd["total_slots"]')" = 4 ] &&
    [ "$(jq_ "$T/props" 'd["default_generation_settings"]["n_ctx"]')" = 1024 ]
check "serve -np 4 -c 4096: /props has 4 slots of 1024 positions" $? "$code $(cat "$T/props")"

all_match() { # all_match TAG: every answer TAG$i equals ref$i
    local bad=""
    for i in "${!PROMPTS[@]}"; do [ "$(answer "$T/$1$i")" = "$(answer "$T/ref$i")" ] || bad="$bad $i"; done
    local f=${bad# }; f=${f%% *}
    [ -z "$bad" ] || { echo "differ:$bad; first ($f): '$(answer "$T/$1$f")' vs '$(answer "$T/ref$f")'"; return 1; }
}
pids=()
for i in "${!PROMPTS[@]}"; do
    st=false; [ $((i % 2)) = 1 ] && st=true
    complete "$i" $st 24 "$T/par$i" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
detail=$(all_match par)
check "serve -np 4: 8 concurrent clients (half streamed) each get their own prompt's answer" $? "$detail"

# --- clients that hang up free their slots; nothing is lost --------------------------------------
pids=()
for i in 0 1 2 3 4 5; do # each reads the start of its stream, then hangs up
    ( curl -sN --max-time 60 -H 'Content-Type: application/json' \
        --data-binary "$(body "$i" true 900 | sed 's/}$/,"ignore_eos":true}/')" "$URL/v1/completions" |
        head -c 300 >/dev/null ) & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
busy=1
for _ in $(seq 1 100); do
    curl -s -o "$T/metrics" --max-time 5 "$URL/metrics"
    grep -q '^hmoe:slots_busy 0$' "$T/metrics" && grep -q '^llamacpp:requests_deferred 0$' "$T/metrics" && { busy=0; break; }
    sleep 0.1
done
cancelled=$(sed -n 's/^hmoe:requests_cancelled_total //p' "$T/metrics")
[ $busy = 0 ] && [ "${cancelled%.*}" -ge 1 ] && grep -q '^hmoe:slots_total 4$' "$T/metrics"
check "serve -np 4: hung-up clients free their slots (cancelled ${cancelled:-?}, none busy)" $? "$(cat "$T/metrics")"
pids=()
for i in "${!PROMPTS[@]}"; do
    st=true; [ $((i % 2)) = 1 ] && st=false
    complete "$i" $st 24 "$T/after$i" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
detail=$(all_match after)
check "serve -np 4: after the hang-ups 8 concurrent clients still get their answers" $? "$detail"

# --- the prompt cache per slot --------------------------------------------------------------------
chat() { # chat JSON OUT
    curl -s -o "$2" --max-time 60 -H 'Content-Type: application/json' --data-binary "$1" "$URL/v1/chat/completions"
}
chat '{"messages":[{"role":"user","content":"Tell me about the sea and its long waves"}],"max_tokens":8}' "$T/a1"
chat '{"messages":[{"role":"user","content":"Something else entirely, about mountains"}],"max_tokens":8}' "$T/b1"
a1=$(jq_ "$T/a1" 'd["choices"][0]["message"]["content"]')
chat "$(python3 -c 'import json,sys; print(json.dumps({"messages":[{"role":"user","content":"Tell me about the sea and its long waves"},{"role":"assistant","content":sys.argv[1]},{"role":"user","content":"More"}],"max_tokens":4}))' "$a1")" "$T/a2"
pa=$(jq_ "$T/a1" 'd["usage"]["prompt_tokens"]'); nc=$(jq_ "$T/a2" 'd["usage"]["prompt_tokens_details"]["cached_tokens"]')
[ -n "$pa" ] && [ "${nc:-0}" -ge $((pa - 2)) ]
check "serve -np 4: a conversation's next turn reuses its slot's cache after another ran ($nc of $pa)" $? "$(cat "$T/a2")"
kill "$SPID"; wait "$SPID" 2>/dev/null

# --- bad -np ---------------------------------------------------------------------------------------
timeout 20 $H serve -m "$MINI" -np 65 --port 0 >"$T/bad.log" 2>&1
rc=$?
[ $rc = 2 ] && grep -q -- '-np 65' "$T/bad.log"
check "serve -np 65: refused with a message (exit 2)" $? "rc $rc $(cat "$T/bad.log")"
timeout 20 $H serve -m "$MINI" -np 8 -c 4 --port 0 >"$T/bad2.log" 2>&1
rc=$?
[ $rc != 0 ] && grep -q -- '-c' "$T/bad2.log"
check "serve -np 8 -c 4: refused, naming -c" $? "rc $rc $(cat "$T/bad2.log")"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
