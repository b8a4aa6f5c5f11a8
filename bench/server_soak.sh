#!/usr/bin/env bash
# server_soak.sh — back-to-back requests against `hmoe serve` for D minutes: is the server as
# fast, as small and as correct at the end as at the start?
#
#   bash bench/server_soak.sh [-m MODEL] [-D MINUTES] [-t THREADS] [-n TOKENS] [-o OUT.json] [-- serve flags...]
#
# Starts ./hmoe serve on a free loopback port (defaults: the tiny fixture model, -t 1, 30 minutes,
# 128 new tokens per request, ignore_eos so every request decodes the same number of tokens) and
# cycles through a non-streamed chat, a streamed chat (SSE, read to [DONE]) and a /completion,
# each with a different prompt so the prompt cache is exercised as agents exercise it. It samples
# the server's RSS (/proc/PID/status VmRSS) after every request and prints: requests, failures
# (non-200, a short or malformed answer, a stream without [DONE]), median decode tok/s (the
# server's own timings.predicted_per_second) of the first 5 and the last 5 requests and their
# ratio, and RSS first / max / last in MiB. -o writes the same numbers and every request's record
# as JSON. Exit status 0 when there was no failure.
set -u
cd "$(dirname "$0")/.."
MODEL=tests/fixtures/models/tiny-qwen3moe-A-mini-F32.gguf
MINUTES=30 THREADS=1 NTOK=128 OUTJSON=""
while [ $# -gt 0 ]; do
    case "$1" in
    -m) MODEL=$2; shift 2;;
    -D) MINUTES=$2; shift 2;;
    -t) THREADS=$2; shift 2;;
    -n) NTOK=$2; shift 2;;
    -o) OUTJSON=$2; shift 2;;
    --) shift; break;;
    *) echo "server_soak.sh: unknown argument '$1' (see the header of this script)" >&2; exit 2;;
    esac
done
H=${HMOE:-./hmoe}
[ -x "$H" ] || { echo "server_soak.sh: $H is missing: run make first" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "server_soak.sh: model $MODEL not found (-m FILE)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "server_soak.sh: needs python3" >&2; exit 2; }
LOG=$(mktemp)
"$H" serve -m "$MODEL" -t "$THREADS" -c 2048 --port 0 -q --temp 0.8 "$@" >"$LOG" 2>&1 &
SPID=$!
trap 'kill $SPID 2>/dev/null; wait $SPID 2>/dev/null; rm -f "$LOG"' EXIT
URL=""
for _ in $(seq 1 300); do
    URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$LOG" | head -n 1)
    [ -n "$URL" ] && break
    sleep 0.1
done
[ -n "$URL" ] || { echo "server_soak.sh: the server did not start: $(cat "$LOG")" >&2; exit 1; }
python3 - "$URL" "$SPID" "$MINUTES" "$NTOK" "$OUTJSON" <<'EOF'
import json, statistics, sys, time, urllib.request
url, pid, minutes, ntok, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

def rss_mib():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0

def post(path, body, timeout=600):
    req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=timeout)

for _ in range(300):
    try:
        if urllib.request.urlopen(url + "/health", timeout=2).status == 200: break
    except Exception:
        time.sleep(0.1)

topics = ["the sea", "a city at night", "mountains", "old trains", "bread", "rain", "clocks", "rivers"]
records, t_end, i = [], time.time() + minutes * 60, 0
while time.time() < t_end:
    kind = ("chat", "chat-stream", "completion")[i % 3]
    msgs = [{"role": "user", "content": f"Request {i}: write about {topics[i % len(topics)]}."}]
    common = {"max_tokens": ntok, "ignore_eos": True, "seed": i}
    rec = {"i": i, "kind": kind, "ok": False}
    t0 = time.time()
    try:
        if kind == "chat":
            d = json.load(post("/v1/chat/completions", dict(common, messages=msgs)))
            rec["tokens"] = d["usage"]["completion_tokens"]
            rec["tps"] = d["timings"]["predicted_per_second"]
            rec["ok"] = rec["tokens"] == ntok and d["choices"][0]["finish_reason"] == "length"
        elif kind == "chat-stream":
            r = post("/v1/chat/completions", dict(common, messages=msgs, stream=True))
            done, timings, pieces = False, None, 0
            for line in r:
                line = line.decode().strip()
                if not line.startswith("data: "): continue
                if line == "data: [DONE]": done = True; break
                c = json.loads(line[6:])
                timings = c.get("timings", timings)
                pieces += sum(1 for ch in c.get("choices", []) if ch.get("delta", {}).get("content"))
            rec["tokens"] = timings["predicted_n"] if timings else 0
            rec["tps"] = timings["predicted_per_second"] if timings else 0
            rec["ok"] = done and rec["tokens"] == ntok and pieces > 0
        else:
            d = json.load(post("/completion", dict(common, prompt=msgs[0]["content"], n_predict=ntok)))
            rec["tokens"] = d["tokens_predicted"]
            rec["tps"] = d["timings"]["predicted_per_second"]
            rec["ok"] = rec["tokens"] == ntok
    except Exception as e:
        rec["error"] = repr(e)[:200]
    rec["s"] = round(time.time() - t0, 3)
    rec["rss_mib"] = round(rss_mib(), 1)
    records.append(rec)
    i += 1

ok = [r for r in records if r["ok"]]
fails = len(records) - len(ok)
first = statistics.median(r["tps"] for r in ok[:5]) if len(ok) >= 5 else 0
last = statistics.median(r["tps"] for r in ok[-5:]) if len(ok) >= 5 else 0
rss = [r["rss_mib"] for r in records]
summary = {"minutes": minutes, "requests": len(records), "failures": fails, "tokens_per_request": ntok,
           "tps_first5_median": round(first, 1), "tps_last5_median": round(last, 1),
           "last_over_first": round(last / first, 4) if first else 0,
           "rss_first_mib": rss[0] if rss else 0, "rss_max_mib": max(rss) if rss else 0, "rss_last_mib": rss[-1] if rss else 0}
print(json.dumps(summary))
if out:
    with open(out, "w") as f: json.dump({"summary": summary, "requests": records}, f)
sys.exit(1 if fails or len(ok) < 10 else 0)
EOF
