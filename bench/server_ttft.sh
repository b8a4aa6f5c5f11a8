#!/usr/bin/env bash
# server_ttft.sh — what a chat UI or an agent feels of `hmoe serve`: time to first token and decode
# speed through the streamed /v1/chat/completions endpoint.
#
#   bash bench/server_ttft.sh -m MODEL [-p 4000] [-n 256] [-T 10] [-o OUT.json] [-- serve flags, e.g. --vram-budget 10240 -cmoe]
#   bash bench/server_ttft.sh -u URL [-p 4000] [-n 256] [-T 10] [-o OUT.json]
#
# -u measures a server that already runs at URL (llama-server or another `hmoe serve`, started with a
# context of at least P + N + T * 300 + 1024 tokens) with the same requests, and skips the bench step.
#
# 1. One streamed chat whose prompt is about P tokens (-p, default 4000; the user message is sized
#    with /tokenize) and N new tokens (-n, default 256, ignore_eos): TTFT (request sent -> first
#    content delta) and decode tok/s (the tokens after the first / the time after the first delta),
#    beside `hmoe bench -p 0 -n N -d DEPTH` tg at the same depth (run after the server stops, with
#    the same serve flags), and the ratio of the two.
# 2. An agent-style conversation of T turns (-T, default 10): each turn resends the whole history plus
#    a ~200-token user message, gets 64 tokens back; TTFT of every turn, and turn T's over turn 1's
#    (the prompt cache makes later turns pay only for their new tokens).
# A peer (llama-server) is measured with -u against the caller's running server, same prompts.
# Prints one JSON object; -o writes it to a file too.
set -u
cd "$(dirname "$0")/.."
MODEL="" P=4000 N=256 TURNS=10 OUTJSON="" URL=""
while [ $# -gt 0 ]; do
    case "$1" in
    -m) MODEL=$2; shift 2;;
    -u) URL=$2; shift 2;;
    -p) P=$2; shift 2;;
    -n) N=$2; shift 2;;
    -T) TURNS=$2; shift 2;;
    -o) OUTJSON=$2; shift 2;;
    --) shift; break;;
    *) echo "server_ttft.sh: unknown argument '$1' (see the header of this script)" >&2; exit 2;;
    esac
done
H=${HMOE:-./hmoe}
SPID=""
if [ -z "$URL" ]; then
    [ -x "$H" ] || { echo "server_ttft.sh: $H is missing: run make first" >&2; exit 2; }
    [ -f "$MODEL" ] || { echo "server_ttft.sh: -m MODEL or -u URL is required" >&2; exit 2; }
    CTX=$(( P + N + TURNS * 300 + 1024 ))
    LOG=$(mktemp)
    "$H" serve -m "$MODEL" -c "$CTX" --port 0 -q --temp 0 "$@" >"$LOG" 2>&1 &
    SPID=$!
    trap 'kill $SPID 2>/dev/null; wait $SPID 2>/dev/null; rm -f "$LOG"' EXIT
    for _ in $(seq 1 600); do
        URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$LOG" | head -n 1)
        [ -n "$URL" ] && break
        sleep 0.2
    done
    [ -n "$URL" ] || { echo "server_ttft.sh: the server did not start: $(cat "$LOG")" >&2; exit 1; }
fi
RES=$(mktemp)
python3 - "$URL" "$P" "$N" "$TURNS" > "$RES" <<'EOF'
import json, sys, time, urllib.request
url, P, N, turns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def post(path, body, timeout=3600):
    return urllib.request.urlopen(urllib.request.Request(url + path, json.dumps(body).encode(),
                                  {"Content-Type": "application/json"}), timeout=timeout)
for _ in range(3000):  # the model may take minutes to load
    try:
        if urllib.request.urlopen(url + "/health", timeout=2).status == 200: break
    except Exception: time.sleep(0.2)
words = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches "
         "near an old river bank under grey winter skies ").split()
def text_of(n_tokens, salt):
    """User text of about n_tokens tokens (measured with /tokenize)."""
    out, k = [], salt
    while True:
        out.extend(words[(k + i) % len(words)] for i in range(64)); k += 7
        t = " ".join(out)
        if len(json.load(post("/tokenize", {"content": t}))["tokens"]) >= n_tokens:
            return t
def stream_chat(messages, max_tokens):
    t0 = time.time()
    r = post("/v1/chat/completions", {"messages": messages, "max_tokens": max_tokens, "ignore_eos": True,
                                      "stream": True, "stream_options": {"include_usage": True}})
    first, text, usage, timings = None, "", None, None
    for line in r:
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]": continue
        c = json.loads(line[6:])
        for ch in c.get("choices", []):
            piece = ch["delta"].get("content") or ch["delta"].get("reasoning_content") or ""
            if piece and first is None: first = time.time()
            text += ch["delta"].get("content") or ""
        usage = c.get("usage") or usage
        timings = c.get("timings") or timings
    t1 = time.time()
    return {"ttft_s": (first or t1) - t0, "total_s": t1 - t0, "usage": usage, "timings": timings, "text": text,
            "decode_tps": (usage["completion_tokens"] - 1) / (t1 - first) if first and t1 > first else 0}
# 1. the long prompt (a fresh cache: cache_prompt on, nothing shared with an earlier request)
long_msg = [{"role": "user", "content": text_of(P, 0)}]
one = stream_chat(long_msg, N)
# 2. the agent conversation
hist, ttfts, cached = [{"role": "system", "content": "You are a coding agent. " + text_of(300, 3)}], [], []
for t in range(turns):
    hist.append({"role": "user", "content": text_of(200, 11 * t + 5)})
    r = stream_chat(hist, 64)
    ttfts.append(r["ttft_s"])
    details = (r["usage"] or {}).get("prompt_tokens_details") or {}
    cached.append(details.get("cached_tokens", (r["timings"] or {}).get("cache_n")))
    hist.append({"role": "assistant", "content": r["text"]})
print(json.dumps({"prompt_tokens": one["usage"]["prompt_tokens"], "new_tokens": one["usage"]["completion_tokens"],
                  "ttft_s": round(one["ttft_s"], 4), "decode_tps": round(one["decode_tps"], 2),
                  "server_predicted_per_second": round(one["timings"]["predicted_per_second"], 2),
                  "depth": one["usage"]["prompt_tokens"],
                  "turn_ttft_s": [round(x, 4) for x in ttfts], "turn_cached_tokens": cached,
                  "turn_last_over_first": round(ttfts[-1] / ttfts[0], 4) if ttfts[0] else 0}))
EOF
rc=$?
[ -z "$SPID" ] || { kill $SPID 2>/dev/null; wait $SPID 2>/dev/null; }
[ $rc = 0 ] || { echo "server_ttft.sh: the client failed: $(cat "$RES")" >&2; exit 1; }
if [ -z "$MODEL" ]; then cat "$RES"; [ -z "$OUTJSON" ] || cp "$RES" "$OUTJSON"; exit 0; fi
DEPTH=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["depth"])' "$RES")
# hmoe bench tg at the same depth, same flags
BENCH=$("$H" bench -m "$MODEL" -p 0 -n "$N" -d "$DEPTH" -r 1 -o json "$@" 2>/dev/null)
python3 - "$RES" "$BENCH" "$OUTJSON" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
tg = 0.0
try:
    b = json.loads(sys.argv[2])
    rows = b if isinstance(b, list) else b.get("results", [b])
    tg = next(float(x.get("avg_ts", x.get("tps", 0))) for x in rows if x.get("n_gen", 0) > 0)
except Exception:
    pass
r["bench_tg_at_depth"] = round(tg, 2)
r["decode_over_bench_tg"] = round(r["decode_tps"] / tg, 4) if tg else None
print(json.dumps(r))
if sys.argv[3]: json.dump(r, open(sys.argv[3], "w"))
EOF
