# server_lib.sh — helpers the tests/test_server_*.sh scripts source: start `hmoe serve` on a free
# loopback port, wait for /health, send requests with curl, read JSON answers with python3, and
# count "name ... ok|FAIL" lines. Needs $H (the binary), $T (a scratch folder) and $MODEL_OPTS.
pass=0; fail=0; PIDS=()
check() { # check NAME STATUS DETAIL
    if [ "$2" -eq 0 ]; then echo "$1 ... ok"; pass=$((pass + 1)); else echo "$1 ... FAIL: $3"; fail=$((fail + 1)); fi
}
# skip_unless_server: prints the skip line and exits 0 when serve or curl / python3 are missing
skip_unless_server() {
    if ! $H serve --help >/dev/null 2>&1; then
        echo "$1 ... skipped: this hmoe was built without serve (install libmicrohttpd-dev libjansson-dev)"
        echo "0 passed, 0 failed"; exit 0
    fi
    for tool in curl python3; do
        if ! command -v $tool >/dev/null; then echo "$1 ... skipped: $tool is not installed"; echo "0 passed, 0 failed"; exit 0; fi
    done
}
# start_server LOG ARGS...: starts hmoe serve --port 0 (at most 600 s), waits for its port; sets SPID and URL
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
stop_server() { kill -TERM "$SPID" 2>/dev/null; timeout 20 tail --pid="$SPID" -f /dev/null; wait "$SPID" 2>/dev/null; }
wait_ready() { # wait_ready URL: until /health is 200 (at most 20 s)
    for _ in $(seq 1 200); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1/health")" = 200 ] && return 0
        sleep 0.1
    done
    return 1
}
cleanup_servers() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$T"; }
# req METHOD PATH [curl args...]: body to $T/body, headers to $T/hdr, status echoed
req() { local m=$1 p=$2; shift 2; curl -s -D "$T/hdr" -o "$T/body" -w '%{http_code}' --max-time 60 -X "$m" "$URL$p" "$@"; }
post() { local p=$1 d=$2; shift 2; req POST "$p" -H 'Content-Type: application/json' --data-binary "$d" "$@"; }
# jq_ FILE EXPR: a Python expression over the parsed JSON `d`, printed
jq_() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=eval(sys.argv[2]); sys.stdout.write(v if isinstance(v,str) else json.dumps(v) if isinstance(v,(dict,list)) else str(v))' "$1" "$2" 2>/dev/null; }
