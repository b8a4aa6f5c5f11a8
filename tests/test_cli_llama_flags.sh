#!/usr/bin/env bash
# test_cli_llama_flags.sh — a llama.cpp command line runs with only the binary's name changed:
# the flags llama-cli / llama-server / llama-bench lines carry are accepted by run, chat, bench
# and logits, each prints one line saying what it maps to or why it is ignored (none with -q),
# bad values are usage errors naming the flag, the mapped ones do what hmoe's own flag does
# (--reasoning off renders the same prompt as --no-think), and --help lists them in a group.
# Prints the harness format: one "name ... ok|FAIL" line per case, then "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
S="${HMOE_SHARED:-tests}"
M="$S/fixtures/models/tiny-qwen3moe-A-mini-F32.gguf"
H=./hmoe
pass=0; fail=0
check() { # check NAME STATUS DETAIL
    if [ "$2" -eq 0 ]; then echo "$1 ... ok"; pass=$((pass + 1)); else echo "$1 ... FAIL: $3"; fail=$((fail + 1)); fi
}
RUN="$H run -m $M -p Hello -n 2 --temp 0 -t 1"

# The line from a llama.cpp user's notes, on run, chat and (llama-bench style) bench.
PASTED="-ngl 999 -ncmoe 5 -fa on --cache-type-k q8_0 --cache-type-v q8_0 -c 4096 -np 1 --jinja"
err=$(timeout 120 $RUN $PASTED 2>&1 >/dev/null); rc=$?
n=$(printf '%s\n' "$err" | grep -cE '^hmoe: (-ngl 999|-fa on|-np 1|--jinja): ')
[ $rc -eq 0 ] && [ "$n" -eq 4 ]
check "llama flags: run with the pasted llama.cpp line, one line per tolerated flag" $? "rc $rc, $n lines: $err"
out=$(echo hi | timeout 120 $H chat -m $M -t 1 -n 2 --temp 0 $PASTED 2>&1); rc=$?
check "llama flags: chat with the pasted line" $rc "rc $rc: $out"
out=$(timeout 120 $H bench -m $M -p 8 -n 4 -r 1 -t 1 -ngl 99 -fa 1 2>&1); rc=$?
[ $rc -eq 0 ] && printf '%s' "$out" | grep -q '^hmoe: -ngl 99: ignored' && printf '%s' "$out" | grep -q '^hmoe: -fa 1: ignored'
check "llama flags: bench with llama-bench's -ngl 99 -fa 1" $? "rc $rc: $out"
out=$(timeout 120 $H logits -m $M --ids 1,2 -ngl 99 -o /dev/null 2>&1); rc=$?
[ $rc -eq 0 ] && printf '%s' "$out" | grep -q '^hmoe: -ngl 99: ignored'
check "llama flags: logits takes them too" $? "rc $rc: $out"

# Each flag's line says what it became.
flag_case() { # flag_case "FLAGS" EXPECTED-TEXT
    local out rc
    out=$(timeout 120 $RUN $1 2>&1 >/dev/null); rc=$?
    [ $rc -eq 0 ] && printf '%s' "$out" | grep -qF -- "$2"
    check "llama flags: run $1 -> '$2'" $? "rc $rc: $out"
}
flag_case "-ngl 0" "hmoe: -ngl 0: mapped to --gpu off"
flag_case "-ngl 0 --gpu off" "hmoe: -ngl 0: ignored: --gpu off is given"
flag_case "--n-gpu-layers all" "hmoe: -ngl all: ignored"
flag_case "--gpu-layers auto" "hmoe: -ngl auto: ignored"
flag_case "--flash-attn=auto" "hmoe: -fa auto: ignored"
flag_case "-fa off" "hmoe: -fa off: ignored"
flag_case "--no-jinja" "hmoe: --no-jinja: ignored"
flag_case "-np 4" "hmoe: -np 4: ignored: one sequence at a time"
flag_case "--parallel -1" "hmoe: -np -1: ignored"
flag_case "--fit on" "hmoe: -fit on: what hmoe does anyway"
flag_case "-fit off" "hmoe: -fit off: ignored"
flag_case "-fitt 2048 --gpu off" "hmoe: -fitt 2048: ignored: no GPU in use"
flag_case "-fitt 512 --vram-budget 4096" "hmoe: -fitt 512: ignored: --vram-budget is given"
flag_case "-fitc 8192" "hmoe: -fitc 8192: ignored: the KV cache holds -c tokens (4096)"
flag_case "--reasoning off" "hmoe: --reasoning off: mapped to --no-think (with --chat)"
flag_case "-rea on" "hmoe: --reasoning on: mapped to --think"
flag_case "-rea auto" "hmoe: --reasoning auto: the template's default"
flag_case "--reasoning-format deepseek" "hmoe: --reasoning-format deepseek: ignored: only serve returns reasoning_content"
flag_case "--reasoning-budget 0" "hmoe: --reasoning-budget 0: ignored"
flag_case "-lm none" "hmoe: -lm none: mapped to --no-mmap"
flag_case "--load-mode dio" "hmoe: -lm dio: mapped to --no-mmap"
flag_case "-lm mmap" "hmoe: -lm mmap: the default"
flag_case "-lm mlock" "hmoe: -lm mlock: mapped to --mlock"
flag_case "--mmap" "hmoe: --mmap: the default"
flag_case "--moe-cache-mib 256 --gpu off" "hmoe: --moe-cache-mib 256: ignored: no GPU in use"
flag_case "--moe-cache-mib 256 --vram-budget 1024" "hmoe: --moe-cache-mib 256: ignored: --vram-budget is given"
# The mapping, worked out from the fixture's facts (hmoe info): 3 layers of 8 experts x 49152 bytes; the
# non-expert tensors are 2501632 bytes, of which token_embd (4101 x 64 x 4 = 1049856) stays on the host,
# leaving 1451776 (1.4 MiB -> 2); with every expert resident 2631424 (-> 3); -ncmoe 1 keeps 2 layers resident
# (2238208 -> 3). KV: 3 layers x (K + V) x 4 heads x 32 dims x 2 bytes x 4096 tokens = 6 MiB; q8_0 rows of 128
# are 136 bytes (3342336 -> 4 MiB); -c 2048 halves f16 to 3 MiB. Buffers: 512 MiB.
flag_case "--moe-cache-mib 256 -cmoe --gpu off" "(with one: --vram-budget 1800 (256 MiB of expert cache + 2 MiB of weights kept on the GPU + 6 MiB of KV cache + 512 MiB of buffers + 1024 MiB for the CUDA context and code))"
flag_case "--moe-cache-mib 256 --gpu off" "--vram-budget 1801 (256 MiB of expert cache + 3 MiB of weights kept on the GPU, resident experts included + 6 MiB"
flag_case "--moe-cache-mib 256 -ncmoe 1 --gpu off" "--vram-budget 1801 (256 MiB of expert cache + 3 MiB"
flag_case "--moe-cache-mib 256 -ncmoe 3 --gpu off" "--vram-budget 1800 (256 MiB of expert cache + 2 MiB of weights kept on the GPU + 6"
flag_case "--moe-cache-mib 1000 -cmoe -ctk q8_0 -ctv q8_0 --gpu off" "--vram-budget 2542 (1000 MiB of expert cache + 2 MiB of weights kept on the GPU + 4 MiB of KV"
flag_case "--moe-cache-mib 256 -cmoe -c 2048 --gpu off" "--vram-budget 1797 ("
flag_case "--cache-reuse 256" "hmoe: --cache-reuse 256: ignored: only serve keeps a prompt cache"
flag_case "--metrics" "hmoe: --metrics: ignored: only serve has a /metrics endpoint"
flag_case "-tb 2" "hmoe: -tb 2: ignored: the -t threads run both"
flag_case "--threads-batch 2" "hmoe: -tb 2: ignored"
flag_case "--no-warmup" "hmoe: --no-warmup: ignored: there is no warm-up run"
flag_case "-b 2048" "hmoe: -b 2048: accepted: prompts go through in -ub micro-batches (512 tokens)"
flag_case "--cache-type-k q8_0 --cache-type-v bf16" ""
out=$(echo hi | timeout 120 $H chat -m $M -t 1 -n 2 --temp 0 --reasoning-format none 2>&1 >/dev/null); rc=$?
[ $rc -eq 0 ] && printf '%s' "$out" | grep -qF "hmoe: --reasoning-format none: ignored: chat shows the reasoning as --show-think"
check "llama flags: chat --reasoning-format none -> its chat line" $? "rc $rc: $out"
out=$(timeout 120 $H bench -m $M -p 8 -n 0 -r 1 -t 1 --reasoning off 2>&1); rc=$?
[ $rc -eq 0 ] && printf '%s' "$out" | grep -qF "hmoe: --reasoning off: ignored: bench renders no chat template"
check "llama flags: bench --reasoning off -> ignored" $? "rc $rc: $out"

# -q: no notes.
out=$(timeout 120 $RUN -q $PASTED -lm none --metrics 2>&1 >/dev/null); rc=$?
[ $rc -eq 0 ] && ! printf '%s' "$out" | grep -q '^hmoe: '
check "llama flags: -q prints none of the lines" $? "rc $rc: $out"

# --reasoning off does what --no-think does: the same prompt ids.
ids() { timeout 120 $RUN --chat -v "$@" 2>&1 >/dev/null | grep '^prompt ids' ; }
a=$(ids --no-think); b=$(ids --reasoning off); c=$(ids)
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" != "$c" ]
check "llama flags: run --chat --reasoning off renders the --no-think prompt" $? "no-think '$a' / reasoning off '$b' / default '$c'"
d=$(ids --reasoning on)
[ -n "$d" ] && [ "$d" = "$c" ]
check "llama flags: run --chat --reasoning on renders the default (thinking) prompt" $? "'$d' vs '$c'"

# Bad values: usage error (exit 2) naming the flag.
usage_case() { # usage_case "FLAGS" FLAG-NAME
    local out rc
    out=$(timeout 60 $RUN $1 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] && printf '%s' "$out" | grep -qF -- "$2"
    check "llama flags: run $1 is a usage error naming $2" $? "rc $rc: $out"
}
usage_case "-ngl x" "-ngl/--n-gpu-layers"
usage_case "-ngl -3" "-ngl/--n-gpu-layers"
usage_case "-fa maybe" "-fa/--flash-attn"
usage_case "-np 0" "-np/--parallel"
usage_case "--fit sometimes" "-fit/--fit"
usage_case "-fitt lots" "-fitt/--fit-target"
usage_case "-fitc -1" "-fitc/--fit-ctx"
usage_case "--reasoning maybe" "-rea/--reasoning"
usage_case "--reasoning-format xml" "--reasoning-format"
usage_case "--reasoning-budget x" "--reasoning-budget"
usage_case "-lm ram" "-lm/--load-mode"
usage_case "--moe-cache-mib -1" "--moe-cache-mib"
usage_case "--cache-reuse -5" "--cache-reuse"
usage_case "-tb many" "-tb/--threads-batch"
usage_case "-b 0" "-b/--batch-size"
usage_case "-fa" "--flash-attn"
out=$(timeout 60 $H bench -m $M -p 8 -n 4 -r 1 -ngl 99,x 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && printf '%s' "$out" | grep -qF -- "-ngl/--n-gpu-layers"
check "llama flags: bench -ngl 99,x is a usage error" $? "rc $rc: $out"

# --help: a group of its own in each command.
for cmd in run chat bench; do
    out=$($H $cmd --help 2>&1); rc=$?
    grp=$(printf '%s\n' "$out" | sed -n '/^llama.cpp compatibility/,/^$/p')
    ok=0
    for f in -ngl -fa --jinja -np -fit -fitt -fitc -rea --reasoning-format -lm --moe-cache-mib --cache-reuse \
             --metrics -tb; do
        printf '%s\n' "$grp" | grep -qE -- "(^| )$f[ ,]" || { ok=1; echo "missing $f"; }
    done
    [ $rc -eq 0 ] && [ $ok -eq 0 ]
    check "llama flags: $cmd --help lists them under 'llama.cpp compatibility'" $? "rc $rc"
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
