#!/usr/bin/env bash
# gpu_device_run.sh — what one call on the GPU machine runs for the GPU engine (src/model/qwen3moe_gpu.c,
# src/sched/hybrid*.c): link the CLI, the GPU tests and the CUDA benches against a libhmoe.a built
# beforehand (nvcc is slow; CUDA_ARCH=90), run the tests (+ compute-sanitizer on the quick subset),
# write the synthetic Qwen3-30B-A3B files and measure all-GPU and hybrid speed. Logs go to $OUT.
#   bench/gpu_device_run.sh STEPS...   steps: link test tests_all sanitize synth bench profile zsynth hybrid2
#   iq2 testsynth hybrid3 hybrid h3r final (h3r: hybrid round 3, Zipf load diagnosis + matrix)
# Environment: LIB (default prebuilt/libhmoe.a), SHARED (default ../shared), OUT, Q4 / ZIPF (file paths),
# H3_END / H3_BT / H3_TEST_T / H3_SAN_T (h3r time guard, per-bench, test and sanitizer timeouts, seconds).
set -u
cd "$(dirname "$0")/.."
LIB=${LIB:-/tmp/libhmoe.a}
[ -f "$LIB" ] || gunzip -c prebuilt/libhmoe.a.gz > "$LIB"
SHARED=${SHARED:-../shared}
OUT=${OUT:-/tmp/out}
B=/tmp/b
mkdir -p $B/tests $B/bench "$OUT"
CF="-std=c11 -O2 -fopenmp -Iinclude -Isrc -Itests -DHMOE_HAVE_CUDA=1 -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64"
LD="-L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcublas -lcudart -lstdc++ -lm -lpthread"
Q4=${Q4:-/tmp/q4.gguf}
log() { echo "### $*" | tee -a "$OUT/summary.txt"; }
# detailed logs go to $D and come back as one tarball (the device tool returns at most 8 files)
D=$OUT/d; mkdir -p $D
trap 'tar czf "$OUT/logs.tgz" -C "$D" . && rm -rf "$D"' EXIT
for step in "$@"; do
case $step in
link)
    log "link"
    cc $CF -o hmoe src/cli/*.c $LIB $LD 2>&1 | tail -5
    for t in tests/gpu_test_*.c; do n=$(basename $t .c); cc $CF -o $B/tests/$n $t $LIB $LD 2>&1 | tail -3; done
    for t in bench/bench_cuda_decode.c; do n=$(basename $t .c); cc $CF -o $B/bench/$n $t $LIB $LD 2>&1 | tail -3; done
    nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv | tee -a "$OUT/summary.txt"
    ;;
test)
    log "gpu tests"
    HMOE_SHARED=$SHARED timeout ${TEST_T:-200} $B/tests/gpu_test_forward > "$OUT/test_forward.log" 2>&1; echo "rc=$?" >> "$OUT/test_forward.log"
    grep -E "FAIL|passed" "$OUT/test_forward.log" | head -40 | tee -a "$OUT/summary.txt"
    ;;
tests_all)
    log "all gpu tests"
    HMOE_SHARED=$SHARED BUILD=$B timeout 300 ./tests/run_gpu.sh > "$D/test_all.log" 2>&1
    grep -E "FAIL|passed" "$D/test_all.log" | tail -20 | tee -a "$OUT/summary.txt"
    ;;
sanitize)
    log "compute-sanitizer memcheck (quick subset)"
    HMOE_TEST_QUICK=1 HMOE_SHARED=$SHARED timeout 240 compute-sanitizer --tool memcheck --print-limit 10 \
        $B/tests/gpu_test_forward > "$D/sanitize.log" 2>&1
    grep -E "ERROR SUMMARY|FAIL|passed|Invalid" "$D/sanitize.log" | head -20 | tee -a "$OUT/summary.txt"
    ;;
synth)
    log "synth"
    [ -f $Q4 ] || timeout 200 ./hmoe synth --preset qwen3-30b-a3b --vocab $SHARED/fixtures/tokenizer/qwen3-vocab.gguf -q -o $Q4 2>&1 | tail -3
    ls -la $Q4 | tee -a "$OUT/summary.txt"
    ;;
bench)
    log "all-GPU bench (Q4_K_M)"
    timeout 240 ./hmoe bench -m $Q4 -p 512,4096 -n 128 -r 3 -ub 4096 --gpu on -v > "$D/bench_gpu.log" 2>&1
    grep -E "^\||backend|decode:|MiB|error" "$D/bench_gpu.log" | head -40 | tee -a "$OUT/summary.txt"
    HMOE_NO_GRAPH=1 timeout 120 ./hmoe bench -m $Q4 -p 0 -n 64 -r 1 --gpu on > "$D/bench_nograph.log" 2>&1
    grep -E "^\|" "$D/bench_nograph.log" | tail -1 | sed 's/^/no graph: /' | tee -a "$OUT/summary.txt"
    timeout 60 $B/bench/bench_cuda_decode > "$D/bench_cuda_decode.log" 2>&1; tail -3 "$D/bench_cuda_decode.log" | tee -a "$OUT/summary.txt"
    ;;
profile)
    log "profile: prefill 512 / 4096, eager decode (HMOE_GPU_PROFILE=1)"
    for pu in "512 512" "4096 4096"; do set -- $pu
        HMOE_GPU_PROFILE=1 timeout 100 ./hmoe bench -m $Q4 -p $1 -n 0 -r 2 -ub $2 --gpu on -v > "$D/prof_pp$1.log" 2>&1
        grep -E "^\| qwen|profile of" "$D/prof_pp$1.log" | tee -a "$OUT/summary.txt"; done
    HMOE_NO_GRAPH=1 HMOE_GPU_PROFILE=1 timeout 100 ./hmoe bench -m $Q4 -p 0 -n 32 -r 1 --gpu on -v > "$D/prof_tg.log" 2>&1
    grep -E "^\| qwen|profile of" "$D/prof_tg.log" | tee -a "$OUT/summary.txt"
    for sp in 4 8 16 32; do
        HMOE_ATTN_SPLIT=$sp timeout 60 ./hmoe bench -m $Q4 -p 0 -n 128 -r 2 --gpu on > "$D/split.log" 2>&1
        grep -E "^\| qwen" "$D/split.log" | sed "s/^/attn split $sp: /" | tee -a "$OUT/summary.txt"; done
    ;;
zsynth)
    [ -f /tmp/zipf.gguf ] || timeout 200 ./hmoe synth --preset qwen3-30b-a3b --routing zipf:1.0 --vocab $SHARED/fixtures/tokenizer/qwen3-vocab.gguf -q -o /tmp/zipf.gguf 2>&1 | tail -3
    ;;
hybrid2)
    for f in $Q4 /tmp/zipf.gguf; do for b in 2048 10240 14336; do
        log "hybrid --no-profile $f --vram-budget $b"
        timeout 150 ./hmoe bench -m $f -p 512,2048 -n 128 -r 2 -ub 2048 --vram-budget $b --no-profile -v > "$D/h.log" 2>&1
        grep -E "^\| qwen|decode:|error" "$D/h.log" | head -8 | tee -a "$OUT/summary.txt"
    done; done
    ;;
iq2)
    log "IQ2_XXS mix, all GPU"
    [ -f /tmp/iq2.gguf ] || timeout 200 ./hmoe synth --preset qwen3-30b-a3b --mix synth-iq2_xxs --vocab $SHARED/fixtures/tokenizer/qwen3-vocab.gguf -q -o /tmp/iq2.gguf 2>&1 | tail -3
    timeout 150 ./hmoe bench -m /tmp/iq2.gguf -p 512,4096 -n 128 -r 2 -ub 4096 --gpu on > "$D/iq2.log" 2>&1
    grep -E "^\| qwen|error" "$D/iq2.log" | tee -a "$OUT/summary.txt"
    ;;
testsynth)
    # gpu_test_forward and the file writing at the same time (GPU + 2 threads vs disk), before any bench
    log "gpu tests || synth"
    ( HMOE_SHARED=$SHARED timeout ${TEST_T:-200} $B/tests/gpu_test_forward > "$OUT/test_forward.log" 2>&1; echo "rc=$?" >> "$OUT/test_forward.log" ) &
    [ -f $Q4 ] || timeout 200 ./hmoe synth --preset qwen3-30b-a3b --vocab $SHARED/fixtures/tokenizer/qwen3-vocab.gguf -q -o $Q4 2>&1 | tail -3
    wait
    grep -E "FAIL|passed|preseed|load|uncached" "$OUT/test_forward.log" | head -40 | tee -a "$OUT/summary.txt"
    ls -la $Q4 | tee -a "$OUT/summary.txt"
    ;;
hybrid3)
    # issue #6: cache filled at load (no profile): pp512 + tg128 at 2/10/14 GiB, and pp512 without cache copies
    for b in 2048 10240 14336; do
        log "hybrid --no-profile --vram-budget $b"
        timeout 100 ./hmoe bench -m $Q4 -p 512 -n 128 -r 2 --vram-budget $b --no-profile -v > "$D/h3_$b.log" 2>&1
        grep -E "^\| qwen|RAM read|decode:|hybrid:|cache filled|streamed|error" "$D/h3_$b.log" | head -12 | tee -a "$OUT/summary.txt"
    done
    log "pp512 --cache-fills 0 --vram-budget 10240"
    timeout 60 ./hmoe bench -m $Q4 -p 512 -n 0 -r 2 --vram-budget 10240 --no-profile --cache-fills 0 -v > "$D/h3_cf0.log" 2>&1
    grep -E "^\| qwen|streamed|error" "$D/h3_cf0.log" | head -6 | tee -a "$OUT/summary.txt"
    ;;
hybrid)
    for b in 2048 10240 14336; do
        log "hybrid --vram-budget $b"
        timeout 240 ./hmoe bench -m $Q4 -p 512 -n 128 -r 2 -ub 2048 --vram-budget $b -v > "$D/bench_hyb_$b.log" 2>&1
        grep -E "^\||hybrid|decode:|hit rate|layers|note|error|allocated" "$D/bench_hyb_$b.log" | head -30 | tee -a "$OUT/summary.txt"
    done
    ;;
h3r)
    # hybrid round 3 (issue #6), one call: every GPU test + compute-sanitizer on the expert-cache
    # modes (transfer, prefetch) while the uniform and Zipf files are written; the Zipf load diagnosed
    # (kernel stack / wchan of the process sampled each second); then the hybrid matrix, most
    # important first, each bench under its own timeout, nothing started after H3_END seconds.
    T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf; Z=${ZIPF:-/tmp/zipf.gguf}
    log "host: $(uname -r), $(nproc) cpus"; { free -g; df -h /tmp; mount | grep -E ' /tmp | / ' | head -3;
      cat /sys/fs/cgroup/memory.max 2>/dev/null; awk '/^Node/ {z=$4} /present/ {print "zone", z, "present pages", $2}' /proc/zoneinfo;
      which strace compute-sanitizer; } 2>&1 | tee -a "$OUT/summary.txt"
    ( HMOE_SHARED=$SHARED BUILD=$B timeout ${H3_TEST_T:-170} ./tests/run_gpu.sh > "$D/test_all.log" 2>&1; echo "rc=$?" >> "$D/test_all.log" ) &
    TP=$!
    ( HMOE_TEST_EXPERIMENTAL=1 HMOE_TEST_HYBRID_CACHE=1 HMOE_SHARED=$SHARED timeout ${H3_SAN_T:-170} compute-sanitizer --tool memcheck --print-limit 10 \
        $B/tests/gpu_test_forward > "$D/sanitize.log" 2>&1; echo "rc=$?" >> "$D/sanitize.log" ) &
    SP=$!
    ( [ -f $Q4 ] || ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) &
    Q1=$!
    ( [ -f $Z ] || ./hmoe synth --preset qwen3-30b-a3b --routing zipf:1.0 --vocab $V -q -o $Z ) &
    Q2=$!
    wait $Q1 $Q2
    log "synth done at $(el) s"; ls -la /tmp/*.gguf | tee -a "$OUT/summary.txt"
    grep -E "^(Dirty|Writeback|Cached|MemFree|Shmem):" /proc/meminfo | tr -s ' ' | tr '\n' ' ' | tee -a "$OUT/summary.txt"; echo | tee -a "$OUT/summary.txt"
    # the Zipf load, sampled (the run that never finished loading in the last round)
    log "zipf --vram-budget 2048 (load diagnosis, file mapping page-locked)"
    timeout ${H3_DIAG_T:-30} ./hmoe bench -m $Z -p 512 -n 64 -r 1 --vram-budget 2048 --no-profile -v > "$D/z2048.log" 2>&1 &
    BP=$!; : > "$D/zdiag.txt"
    for i in $(seq 1 ${H3_DIAG_T:-30}); do kill -0 $BP 2>/dev/null || break
        HP=$(pgrep -P $BP | head -1); HP=${HP:-$BP}
        { echo "t=$i pid=$HP $(awk '{print "state", $3, "utime", $14, "stime", $15}' /proc/$HP/stat 2>/dev/null) wchan=$(cat /proc/$HP/wchan 2>/dev/null)";
          head -8 /proc/$HP/stack 2>/dev/null; grep -E "^(Dirty|Writeback|MemFree|Cached):" /proc/meminfo | tr -s ' ' | tr '\n' ' ' | sed 's/^/mem: /'; echo; } >> "$D/zdiag.txt"
        sleep 1; done; wait $BP; ZRC=$?; echo "rc=$ZRC at $(el) s" >> "$D/zdiag.txt"
    grep -E "^\| qwen|RAM read|decode:|hybrid:|misses|pinned|page-lock|slow pin|note|error|rc=" "$D/z2048.log" "$D/zdiag.txt" | head -16 | tee -a "$OUT/summary.txt"
    grep -E "^t=" "$D/zdiag.txt" | tail -2 | tee -a "$OUT/summary.txt"
    grep -v -E "^t=|^mem:|^rc=" "$D/zdiag.txt" | sort | uniq -c | sort -rn | head -8 | sed 's/^/stack: /' | tee -a "$OUT/summary.txt"
    wait $TP; log "tests done at $(el) s"; grep -E "FAIL|passed|rc=" "$D/test_all.log" | tail -14 | tee -a "$OUT/summary.txt"
    hb() { # label file budget extra-args...
        local lab=$1 f=$2 b=$3; shift 3
        [ $(el) -gt ${H3_END:-222} ] && { log "skipped (time): $lab"; return; }
        log "$lab (at $(el) s)"
        timeout ${H3_BT:-40} ./hmoe bench -m $f -p 512 -n 64 -r 1 --vram-budget $b --no-profile -v "$@" > "$D/$lab.log" 2>&1
        grep -E "^\| qwen|decode:|misses|prefetch|transfer:|pinned|note|error" "$D/$lab.log" | head -9 | tee -a "$OUT/summary.txt"; }
    # Zipf file: experts copied into page-locked anonymous memory (its file pages never pin, see gpu_results.md)
    export HMOE_PIN=copy; hb z2048_pincopy $Z 2048; hb z10240_pincopy $Z 10240; hb z14336_pincopy $Z 14336; unset HMOE_PIN
    hb u2048 $Q4 2048; hb u10240 $Q4 10240; hb u14336 $Q4 14336
    export HMOE_PIN=copy; hb u2048_pincopy $Q4 2048; unset HMOE_PIN
    [ $(el) -le ${H3_END:-222} ] && { log "pp4096 -ub 4096 --vram-budget 2048, profile (at $(el) s)"
      HMOE_GPU_PROFILE=1 timeout 45 ./hmoe bench -m $Q4 -p 4096 -n 0 -r 1 -ub 4096 --vram-budget 2048 --no-profile -v > "$D/pp4096.log" 2>&1
      grep -E "^\| qwen|profile of|streamed|prefill stream|error" "$D/pp4096.log" | head -6 | tee -a "$OUT/summary.txt"; }
    # experimental paths (refused without HMOE_EXPERIMENTAL=1); last, since they may fail
    export HMOE_EXPERIMENTAL=1
    hb u10240_pf $Q4 10240 --prefetch on; hb u10240_xfer $Q4 10240 --moe-miss transfer
    export HMOE_PIN=copy; hb z10240_pf $Z 10240 --prefetch on; unset HMOE_PIN HMOE_EXPERIMENTAL
    wait $SP; grep -E "ERROR SUMMARY|FAIL|passed|Invalid|rc=" "$D/sanitize.log" | head -12 | sed 's/^/sanitizer: /' | tee -a "$OUT/summary.txt"
    log "end at $(el) s"
    ;;
final)
    # the lead's validation of merged main: every GPU test while the three synthetic files are written,
    # then all-GPU, hybrid (uniform and Zipf routing) and IQ2_XXS numbers
    log "all gpu tests || synth q4 iq2 zipf"
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf
    ( HMOE_SHARED=$SHARED BUILD=$B timeout 240 ./tests/run_gpu.sh > "$D/test_all.log" 2>&1; echo "rc=$?" >> "$D/test_all.log" ) &
    ( [ -f $Q4 ] || ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) &
    ( [ -f /tmp/iq2.gguf ] || ./hmoe synth --preset qwen3-30b-a3b --mix synth-iq2_xxs --vocab $V -q -o /tmp/iq2.gguf ) &
    ( [ -f /tmp/zipf.gguf ] || ./hmoe synth --preset qwen3-30b-a3b --routing zipf:1.0 --vocab $V -q -o /tmp/zipf.gguf ) &
    wait
    grep -E "FAIL|passed|rc=" "$D/test_all.log" | tail -30 | tee -a "$OUT/summary.txt"
    ls -la /tmp/*.gguf | tee -a "$OUT/summary.txt"
    log "all-GPU Q4_K_M"
    timeout 120 ./hmoe bench -m $Q4 -p 512,4096 -n 128 -r 2 -ub 4096 --gpu on -v > "$D/gpu_q4.log" 2>&1
    grep -E "^\| qwen|decode:|peak|error" "$D/gpu_q4.log" | head -8 | tee -a "$OUT/summary.txt"
    for f in $Q4 /tmp/zipf.gguf; do for b in 2048 10240 14336; do
        log "hybrid $f --vram-budget $b --no-profile"
        timeout 80 ./hmoe bench -m $f -p 512 -n 128 -r 2 --vram-budget $b --no-profile -v > "$D/h_$b.log" 2>&1
        grep -E "^\| qwen|RAM read|decode:|hybrid:|cache filled|streamed|error" "$D/h_$b.log" | head -12 | tee -a "$OUT/summary.txt"
    done; done
    log "IQ2_XXS all-GPU, then --vram-budget 2048"
    timeout 80 ./hmoe bench -m /tmp/iq2.gguf -p 512 -n 128 -r 2 --gpu on > "$D/iq2_gpu.log" 2>&1
    grep -E "^\| qwen|error" "$D/iq2_gpu.log" | tee -a "$OUT/summary.txt"
    timeout 80 ./hmoe bench -m /tmp/iq2.gguf -p 512 -n 128 -r 2 --vram-budget 2048 --no-profile -v > "$D/iq2_h.log" 2>&1
    grep -E "^\| qwen|RAM read|decode:|hybrid:|error" "$D/iq2_h.log" | head -10 | tee -a "$OUT/summary.txt"
    ;;
esac
done
