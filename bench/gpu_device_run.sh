#!/usr/bin/env bash
# gpu_device_run.sh — what one call on the GPU machine runs for the GPU engine (src/model/qwen3moe_gpu.c,
# src/sched/hybrid*.c): link the CLI, the GPU tests and the CUDA benches against a libhmoe.a built
# beforehand (nvcc is slow; CUDA_ARCH=90), run the tests (+ compute-sanitizer on the quick subset),
# write the synthetic Qwen3-30B-A3B files and measure all-GPU and hybrid speed. Logs go to $OUT.
#   bench/gpu_device_run.sh STEPS...   steps: link test sanitize synth bench hybrid iq2 zipf gpuattn ...
#   bench/gpu_device_run.sh STEPS...   steps: link test sanitize synth bench hybrid iq2 zipf gemm
#   bench/gpu_device_run.sh STEPS...   steps: link plink test sanitize synth bench hybrid iq2 zipf r3 ...
# Environment: LIB (default prebuilt/libhmoe.a), SHARED (default ../shared), OUT.
#   bench/gpu_device_run.sh STEPS...   steps: link test tests_all sanitize synth bench profile zsynth hybrid2
#   iq2 testsynth hybrid3 hybrid h3r final hybpf (h3r: hybrid round 3, Zipf load diagnosis + matrix;
#   hybpf: prefill split CPU/streaming, HYBPF_END / HYBPF_BT / HYBPF_TEST_T / HYBPF_SAN_T time guards)
# Environment: LIB (default prebuilt/libhmoe.a), SHARED (default ../shared), OUT, Q4 / ZIPF (file paths),
# H3_END / H3_BT / H3_TEST_T / H3_SAN_T (h3r time guard, per-bench, test and sanitizer timeouts, seconds).
# amx (CPU AMX GEMM): AMX_END, AMX_GPU_T, AMX_BENCH_T, AMX_BENCH_S, AMX_PP_T, AMX_PP (extra pp512 variants).
# (the steps amx2 / amx2e that timed the AMX kernel's parts ran on branch amx2, commit ccf9684: the attribution
# flags they used were removed from the library afterwards; bench/cpu_results.md "amx2" has their numbers.)
# H3_END / H3_BT / H3_TEST_T / H3_SAN_T (h3r time guard, per-bench, test and sanitizer timeouts, seconds),
# HC_END / HC_BT / HC_TEST_T / HC_SAN_T / HC_CPU_T (the same for step hybcpu: hybrid decode CPU phase + handoff).
# hybpf2 (the prefill split's planner, default vs off at 2/10/14 GiB and pp4096): HYBPF2_END / HYBPF2_BT / HYBPF2_TEST_T.
# final4 (the lead's stop-14 validation): F4_END. final5 (stop 15: count split vs index, Zipf 2/10 GiB): F5_END. final6 (final5 without the comparisons): F6_END. splitchk (default split vs off at 2/10 GiB): SC_END.
# cpujob (the split's CPU job: bench_moe_subset, old vs new batch layout at 2/10 GiB): CJ_END / CJ_BT / CJ_MT / CJ_TEST_T.
# hybcnt (the split by token count vs by index vs off; bench_moe_subset at few tokens per expert): HCNT_END / HCNT_BT /
# HCNT_TEST_T / HCNT_RUNS.
# xfer (--moe-miss transfer / --prefetch on validated: tests + memcheck, cpu vs transfer vs auto, Zipf prefetch on/off):
# XF_END / XF_BT / XF_BT1 / XF_TEST_T / XF_SAN_T / XF_BUDGET, XF_SET (1: call 1's list, 2: transfer vs cpu again).
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
gpuattn)
    # tensor-core prefill attention (cuda_attn_prefill.cu): link in parallel, every GPU test while the Q4_K_M
    # file is written (failing programs again with HMOE_ATTN_PREFILL=old), memcheck of its test, the kernel
    # bench, then hmoe bench pp512/pp4096 new vs old, the 8-warp / 8-heads variants and a pp4096 profile
    log "gpuattn: link"
    cc $CF -o hmoe src/cli/*.c $LIB $LD > "$D/link.log" 2>&1 &
    for t in tests/gpu_test_*.c bench/bench_cuda_attn.c; do n=$(basename $t .c); o=$B/tests/$n; case $n in bench_*) o=$B/bench/$n;; esac
        cc $CF -o $o $t $LIB $LD >> "$D/link.log" 2>&1 & done
    wait; tail -5 "$D/link.log" | tee -a "$OUT/summary.txt"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/summary.txt"
    log "all gpu tests || synth q4"
    ( [ -f $Q4 ] || timeout 150 ./hmoe synth --preset qwen3-30b-a3b --vocab $SHARED/fixtures/tokenizer/qwen3-vocab.gguf -q -o $Q4 ) > "$D/synth.log" 2>&1 &
    SP=$!
    S0=$(date +%s)
    HMOE_SHARED=$SHARED BUILD=$B timeout ${TEST_T:-120} ./tests/run_gpu.sh > "$D/test_all.log" 2>&1; echo "rc=$? $(( $(date +%s) - S0 )) s" >> "$D/test_all.log"
    grep -E "FAIL|passed|rc=" "$D/test_all.log" | tail -25 | tee -a "$OUT/summary.txt"
    for f in $(grep -E "^gpu_test_[a-z_0-9]+ \.\.\. FAIL|FAIL" "$D/test_all.log" | grep -oE "gpu_test_[a-z_0-9]+" | sort -u); do
        log "rerun $f with HMOE_ATTN_PREFILL=old"
        HMOE_ATTN_PREFILL=old HMOE_SHARED=$SHARED timeout 60 $B/tests/$f > "$D/old_$f.log" 2>&1
        grep -E "FAIL|passed" "$D/old_$f.log" | tail -8 | tee -a "$OUT/summary.txt"; done
    log "bench_cuda_attn"
    timeout 45 $B/bench/bench_cuda_attn 16 64 512 4096 8192 > "$OUT/bench_attn.txt" 2>&1; echo "rc=$?" >> "$OUT/bench_attn.txt"
    cat "$OUT/bench_attn.txt" >> "$OUT/summary.txt"
    log "compute-sanitizer memcheck gpu_test_attn_prefill"
    timeout 60 compute-sanitizer --tool memcheck --print-limit 10 $B/tests/gpu_test_attn_prefill > "$D/san_attn_prefill.log" 2>&1
    grep -E "ERROR SUMMARY|FAIL|passed|Invalid" "$D/san_attn_prefill.log" | head -12 | tee -a "$OUT/summary.txt"
    wait $SP; ls -la $Q4 | tee -a "$OUT/summary.txt"
    for v in "mma" "old"; do
        log "hmoe bench pp512,pp4096 HMOE_ATTN_PREFILL=$v"
        HMOE_ATTN_PREFILL=$v timeout 60 ./hmoe bench -m $Q4 -p 512,4096 -n 0 -r 3 -ub 4096 --gpu on > "$D/pp_$v.log" 2>&1
        grep -E "^\| qwen|error" "$D/pp_$v.log" | tee -a "$OUT/summary.txt"; done
    log "profile pp4096 (mma, HMOE_GPU_PROFILE=1)"
    HMOE_GPU_PROFILE=1 timeout 45 ./hmoe bench -m $Q4 -p 4096 -n 0 -r 1 -ub 4096 --gpu on -v > "$D/prof_pp4096.log" 2>&1
    grep -E "^\| qwen|profile of|attention|us/token|error" "$D/prof_pp4096.log" | head -20 | tee -a "$OUT/summary.txt"
    log "compute-sanitizer racecheck gpu_test_attn_prefill (HMOE_TEST_QUICK)"
    HMOE_TEST_QUICK=1 timeout 60 compute-sanitizer --tool racecheck --print-limit 10 $B/tests/gpu_test_attn_prefill > "$D/race_attn_prefill.log" 2>&1
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAIL|passed|hazard" "$D/race_attn_prefill.log" | head -12 | tee -a "$OUT/summary.txt"
    for v in "HMOE_ATTN_PREFILL_WARPS=8" "HMOE_ATTN_PREFILL_HB=8"; do
        log "hmoe bench pp4096 $v"
        env $v timeout 40 ./hmoe bench -m $Q4 -p 4096 -n 0 -r 2 -ub 4096 --gpu on > "$D/pp_var.log" 2>&1
        grep -E "^\| qwen|error" "$D/pp_var.log" | tee -a "$OUT/summary.txt"; done
    ;;
gemm)
    # branch gpugemm (issues #5/#9 prefill GEMMs), one call: every GPU test + memcheck of the new
    # kernels' test while the two synthetic files are written; then, with the GPU to itself, the
    # engine new vs old (HMOE_MMQ=old: f16 expert GEMM + router matvec as before), bench_cuda_mmq
    # for both int8 kernels, and the prefill profile. Steps stop being started near the deadline.
    # Variants: old = HMOE_MMQ=old, rmmv = router matvec (HMOE_ROUTER=mmv), bm32 = 32-row expert
    # tiles (HMOE_MMQ_BM=32), dense8 = q/k/v/o through the int8 GEMM (HMOE_DENSE=int8).
    T0=$(date +%s); left() { echo $(( ${GEMM_T:-225} - ($(date +%s) - T0) )); }
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf
    IQ2=/tmp/iq2.gguf
    cc $CF -o $B/bench/bench_cuda_mmq bench/bench_cuda_mmq.c $LIB $LD 2>&1 | tail -3
    log "all gpu tests || memcheck gpu_test_mmq || synth q4, iq2"
    ( HMOE_SHARED=$SHARED BUILD=$B timeout ${TEST_T:-110} ./tests/run_gpu.sh > "$D/test_all.log" 2>&1; echo "rc=$?" >> "$D/test_all.log" ) &
    ( timeout 100 compute-sanitizer --tool memcheck --print-limit 10 $B/tests/gpu_test_mmq > "$D/san_mmq.log" 2>&1; echo "rc=$?" >> "$D/san_mmq.log" ) &
    ( [ -f $Q4 ] || ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) &
    ( [ -f $IQ2 ] || ./hmoe synth --preset qwen3-30b-a3b --mix synth-iq2_xxs --vocab $V -q -o $IQ2 ) &
    wait
    grep -E "FAIL|passed|rc=" "$D/test_all.log" | tail -30 | tee -a "$OUT/summary.txt"
    grep -E "ERROR SUMMARY|FAIL|passed|Invalid|rc=" "$D/san_mmq.log" | head -12 | tee -a "$OUT/summary.txt"
    ls -la $Q4 $IQ2 | tee -a "$OUT/summary.txt"
    i=0
    for run in "new $Q4 512,4096 3" "new $IQ2 512,4096 3" "old $Q4 512,4096 2" "old $IQ2 512 2" "rmmv $Q4 512 2" "bm32 $Q4 512 2" "dense8 $Q4 512 2"; do set -- $run
        [ $(left) -gt 25 ] || { log "skipped (time): $run"; continue; }
        i=$((i + 1)); e=""; [ $1 = old ] && e="HMOE_MMQ=old"; [ $1 = dense8 ] && e="HMOE_DENSE=int8"; [ $1 = bm32 ] && e="HMOE_MMQ_BM=32"
        [ $1 = rmmv ] && e="HMOE_ROUTER=mmv"
        log "hmoe bench $run $e"
        env $e timeout $(( $(left) < 60 ? $(left) : 60 )) ./hmoe bench -m $2 -p $3 -n 0 -r $4 -ub 4096 --gpu on > "$D/gb_$i.log" 2>&1
        grep -E "^\| qwen|error" "$D/gb_$i.log" | tee -a "$OUT/summary.txt"
    done
    for e in "" "HMOE_MMQ=old"; do
        [ $(left) -gt 20 ] || { log "skipped (time): bench_cuda_mmq $e"; continue; }
        log "bench_cuda_mmq $e (quick)"
        env $e HMOE_BENCH_QUICK=1 timeout $(( $(left) < 45 ? $(left) : 45 )) $B/bench/bench_cuda_mmq > "$D/mmq${e:+_old}.log" 2>&1
        grep -vE "^$" "$D/mmq${e:+_old}.log" | tee -a "$OUT/summary.txt"
    done
    for e in "" "HMOE_MMQ=old"; do
        [ $(left) -gt 20 ] || { log "skipped (time): profile $e"; continue; }
        log "profile pp512 $e"
        env $e HMOE_GPU_PROFILE=1 timeout $(( $(left) < 40 ? $(left) : 40 )) ./hmoe bench -m $Q4 -p 512 -n 0 -r 2 -ub 512 --gpu on -v > "$D/prof${e:+_old}.log" 2>&1
        grep -E "^\| qwen|profile of" "$D/prof${e:+_old}.log" | tee -a "$OUT/summary.txt"
    done
    log "gemm step done after $(( $(date +%s) - T0 )) s"
    ;;
plink)
    # link as 'link' does, the programs in parallel
    log "link (parallel)"
    cc $CF -o hmoe src/cli/*.c $LIB $LD 2>&1 | tail -5 &
    for t in tests/gpu_test_*.c bench/bench_cuda_decode.c; do n=$(basename $t .c); d=$B/tests; case $n in bench*) d=$B/bench;; esac
        cc $CF -o $d/$n $t $LIB $LD 2>&1 | tail -3 & done
    wait
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/summary.txt"
    ;;
r3)
    # decode round 3 (branch gpudecode3): every GPU test + memcheck of the changed kernels' tests while
    # the two synthetic files are written; then the decode-step variants (bench_cuda_decode --env),
    # the per-class ablation of the default step, and tg128 of both files new vs old kernels
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf
    log "r3: all gpu tests || memcheck attn, moe || synth q4, iq2"
    ( HMOE_SHARED=$SHARED BUILD=$B timeout ${R3_TEST_T:-110} ./tests/run_gpu.sh > "$D/test_all.log" 2>&1; echo "rc=$?" >> "$D/test_all.log" ) &
    for t in attn moe; do ( HMOE_SHARED=$SHARED timeout ${R3_TEST_T:-110} compute-sanitizer --tool memcheck --print-limit 5 \
        $B/tests/gpu_test_$t > "$D/san_$t.log" 2>&1; echo "rc=$?" >> "$D/san_$t.log" ) & done
    OLD="HMOE_ATTN_DECODE=old HMOE_TOPK=old HMOE_MOE_GU_TPR=64" # = main before round 3
    ( for t in attn moe; do env $OLD timeout 60 $B/tests/gpu_test_$t 2>&1 | tail -1 | sed "s/^/$t, old kernels: /"; done
      HMOE_IQ_SMEM=1 HMOE_MOE_DN_TPR=64 timeout 60 $B/tests/gpu_test_moe 2>&1 | tail -1 | sed "s/^/moe, smem codebooks, down TPR 64: /" ) > "$D/test_env.log" 2>&1 &
    ( [ -f $Q4 ] || timeout 150 ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) &
    ( [ -f /tmp/iq2.gguf ] || timeout 150 ./hmoe synth --preset qwen3-30b-a3b --mix synth-iq2_xxs --vocab $V -q -o /tmp/iq2.gguf ) &
    wait
    grep -E "FAIL|passed|rc=" "$D/test_all.log" | tail -24 | tee -a "$OUT/summary.txt"
    cat "$D/test_env.log" | tee -a "$OUT/summary.txt"
    for t in attn moe; do grep -E "ERROR SUMMARY|FAIL|passed|rc=" "$D/san_$t.log" | tail -6 | sed "s/^/memcheck $t: /" | tee -a "$OUT/summary.txt"; done
    ls -la /tmp/*.gguf | tee -a "$OUT/summary.txt"
    log "r3: bench_cuda_decode --mode default variants"
    VARS="$OLD;HMOE_ATTN_DECODE=old;HMOE_TOPK=old;HMOE_MOE_GU_TPR=64;HMOE_IQ_SMEM=1;HMOE_MOE_DN_TPR=64"
    for mx in q4_k_m iq2_xxs; do
        timeout 45 $B/bench/bench_cuda_decode --mix $mx --mode default --quick --env "$VARS" > "$D/bcd_$mx.log" 2>&1
        grep -E "variant|ms/token" "$D/bcd_$mx.log" | sed "s/^/$mx /" | tee -a "$OUT/summary.txt"; done
    log "r3: tg128 (hmoe bench -p 0 -n 128 -r 3 --gpu on)"
    for run in "q4 new" "iq2 new" "q4 old $OLD" "iq2 old $OLD" ${R3_TG_EXTRA:-}; do
        set -- $run; f=$Q4; [ $1 = iq2 ] && f=/tmp/iq2.gguf; tag="$1 $2"; shift 2
        env "$@" timeout 40 ./hmoe bench -m $f -p 0 -n 128 -r 3 --gpu on -v > "$D/tg.log" 2>&1
        grep -E "^\| qwen|decode:|error" "$D/tg.log" | sed "s/^/$tag: /" | tee -a "$OUT/summary.txt"; done
    log "r3: ablation of the default step (Q4_K_M mix)"
    timeout 40 $B/bench/bench_cuda_decode --mode default > "$D/bcd_ablation.log" 2>&1
    grep -E "ms/token|us/token" "$D/bcd_ablation.log" | tee -a "$OUT/summary.txt"
    ;;
r3ncu)
    # kernel durations without launch gaps: eager decode (no graph) under ncu, one metric, 3 layers' kernels
    log "r3: ncu kernel durations, eager decode step, Q4_K_M"
    HMOE_NO_GRAPH=1 timeout ${R3_NCU_T:-50} ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
        --launch-skip 400 --launch-count 40 --csv ./hmoe bench -m $Q4 -p 0 -n 4 -r 1 --gpu on > "$D/ncu.csv" 2> "$D/ncu.err"
    grep -E "gpu__time_duration" "$D/ncu.csv" | awk -F'","' '{n=$5; sub(/\(.*/,"",n); print n, $NF}' | tr -d '"' | head -40 | tee -a "$OUT/summary.txt"
    tail -3 "$D/ncu.err" | tee -a "$OUT/summary.txt"
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
amx)
    # branch amx (AMX int8 expert GEMM on the CPU), one call: link in parallel; then, while the Q4_K_M file
    # is written and the GPU tests run, the CPU tests on real AMX (HMOE_EXPECT_AMX=1: no AMX is a failure),
    # and the llama.cpp golden-logit tests of the tiny models with every batched Q4_K/Q6_K gemm on AMX
    # (HMOE_AMX=1 HMOE_AMX_MIN_TOK=2); with the CPU to itself: bench_cpu_gemm_amx (AMX vs VNNI, 1 and 16
    # threads, read probe) and CPU-only pp512 of the 30B file for each ';'-separated env set of AMX_PP
    # (default "HMOE_AMX=0;HMOE_AMX=1"), then hybrid pp512 forced onto CPU threads + tg32 at 2 GiB for each
    # env set of AMX_HYB (default none). Nothing is started after AMX_END seconds.
    T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf
    log "amx: host $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), flags: $(grep -m1 -oE 'amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    cc $CF -o hmoe src/cli/*.c $LIB $LD > "$D/link.log" 2>&1 &
    for t in tests/test_cpu_amx.c tests/test_cpu_kernels.c tests/test_model_golden.c tests/test_moe_tiny.c tests/gpu_test_*.c \
             bench/bench_cpu_gemm_amx.c; do n=$(basename $t .c); o=$B/tests/$n; case $n in bench_*) o=$B/bench/$n;; esac
        cc $CF -o $o $t $LIB $LD >> "$D/link.log" 2>&1 & done
    wait; grep -E "error|undefined" "$D/link.log" | head -5 | tee -a "$OUT/summary.txt"; log "linked at $(el) s"
    ( [ -f $Q4 ] || timeout 150 ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) > "$D/synth.log" 2>&1 &
    SP=$!
    ( HMOE_SHARED=$SHARED BUILD=$B timeout ${AMX_GPU_T:-60} ./tests/run_gpu.sh > "$D/test_gpu.log" 2>&1; echo "rc=$?" >> "$D/test_gpu.log" ) &
    GP=$!
    HMOE_EXPECT_AMX=1 HMOE_SHARED=$SHARED timeout 60 $B/tests/test_cpu_amx > "$OUT/test_cpu_amx.log" 2>&1; echo "rc=$?" >> "$OUT/test_cpu_amx.log"
    grep -vE " ok$" "$OUT/test_cpu_amx.log" | tee -a "$OUT/summary.txt"
    for t in test_model_golden test_moe_tiny test_cpu_kernels; do
        HMOE_AMX=1 HMOE_AMX_MIN_TOK=2 HMOE_SHARED=$SHARED timeout 60 $B/tests/$t > "$D/$t.log" 2>&1; echo "rc=$?" >> "$D/$t.log"
        grep -E "FAIL|passed|rc=" "$D/$t.log" | tail -4 | sed "s/^/$t (HMOE_AMX=1 HMOE_AMX_MIN_TOK=2): /" | tee -a "$OUT/summary.txt"; done
    wait $SP; wait $GP; log "synth + gpu tests done at $(el) s"; ls -la $Q4 | tee -a "$OUT/summary.txt"
    grep -E "FAIL|passed|rc=" "$D/test_gpu.log" | tail -14 | tee -a "$OUT/summary.txt"
    log "bench_cpu_gemm_amx (at $(el) s)"
    timeout ${AMX_BENCH_T:-70} $B/bench/bench_cpu_gemm_amx -t $(nproc) -s ${AMX_BENCH_S:-0.25} > "$OUT/bench_amx.txt" 2>&1; echo "rc=$?" >> "$OUT/bench_amx.txt"
    grep -vE "^$" "$OUT/bench_amx.txt" | tee -a "$OUT/summary.txt"
    IFS=';' read -ra PPV <<< "${AMX_PP:-HMOE_AMX=0;HMOE_AMX=1}"; i=0
    for e in "${PPV[@]}"; do i=$((i + 1))
        [ $(el) -gt ${AMX_END:-200} ] && { log "skipped (time): pp512 $e"; continue; }
        log "CPU-only pp512 $e (at $(el) s)"
        env $e timeout ${AMX_PP_T:-45} ./hmoe bench -m $Q4 --gpu off -t $(nproc) -p 512 -n 0 -r 1 -v > "$D/pp_$i.log" 2>&1; echo "rc=$?" >> "$D/pp_$i.log"
        grep -E "^\| qwen|RAM read|error|rc=" "$D/pp_$i.log" | tee -a "$OUT/summary.txt"; done
    IFS=';' read -ra HYV <<< "${AMX_HYB:-}"
    for e in "${HYV[@]}"; do i=$((i + 1))
        [ $(el) -gt ${AMX_END:-200} ] && { log "skipped (time): hybrid $e"; continue; }
        log "hybrid pp512 on CPU threads (--stream-min 1024) + tg32, --vram-budget 2048, $e (at $(el) s)"
        env $e timeout ${AMX_PP_T:-45} ./hmoe bench -m $Q4 -p 512 -n 32 -r 1 --vram-budget 2048 --no-profile --stream-min 1024 -v > "$D/hy_$i.log" 2>&1
        echo "rc=$?" >> "$D/hy_$i.log"; grep -E "^\| qwen|error|rc=" "$D/hy_$i.log" | tee -a "$OUT/summary.txt"; done
    log "amx step done at $(el) s"
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
splitchk)
    # the lead's check of a planner change (stop 14): the forward GPU tests while q4 is written, then pp512 at
    # 2 and 10 GiB with the default split and with it off, alternating, -r 3. Nothing starts after SC_END s.
    T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf
    ( HMOE_SHARED=$SHARED timeout 100 $B/tests/gpu_test_forward > "$D/test_forward.log" 2>&1; echo "rc=$? at $(el) s" >> "$D/test_forward.log" ) &
    ( [ -f $Q4 ] || ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) > "$D/synth.log" 2>&1 &
    wait; sync
    grep -E "FAIL|passed|rc=" "$D/test_forward.log" | tail -6 | tee -a "$OUT/summary.txt"
    for lab in u2:2048: u2off:2048:0 u10:10240: u10off:10240:0 u2b:2048: u2boff:2048:0; do
        IFS=: read -r l b sh <<< "$lab"
        [ $(el) -gt ${SC_END:-170} ] && { log "skipped (time): $l"; continue; }
        log "$l: HMOE_PREFILL_CPU_SHARE=${sh:-unset} hmoe bench -m $Q4 -p 512 -n 0 -r 3 --vram-budget $b --no-profile -v (at $(el) s)"
        if [ -n "$sh" ]; then export HMOE_PREFILL_CPU_SHARE=$sh; else unset HMOE_PREFILL_CPU_SHARE; fi
        timeout 40 ./hmoe bench -m $Q4 -p 512 -n 0 -r 3 --vram-budget $b --no-profile -v > "$D/$l.log" 2>&1; echo "rc=$?" >> "$D/$l.log"
        unset HMOE_PREFILL_CPU_SHARE
        grep -E "^\| qwen|hybrid prefill of|planner|error|rc=[1-9]" "$D/$l.log" | head -8 | tee -a "$OUT/summary.txt"
    done
    log "end at $(el) s"
    ;;
final4)
    # the lead's validation of merged main (stop 14): every GPU test and the AMX / batch-layout CPU tests while
    # the synthetic files are written; all-GPU Q4_K_M; hybrid uniform 2/10/14 GiB with the defaults (planned
    # prefill split, batch layout 2, page look-ahead) and pp512 with the split off (HMOE_PREFILL_CPU_SHARE=0)
    # in the same call; pp4096 at 2 GiB; Zipf 14/10 GiB with the profile; CPU-only pp512 (AMX). Nothing
    # starts after F4_END s.
    T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf
    for t in tests/test_cpu_amx.c tests/test_sched_moe_subset.c; do cc $CF -o $B/tests/$(basename $t .c) $t $LIB $LD 2>&1 | tail -3; done
    log "all gpu tests || cpu amx tests || synth q4 zipf"
    ( HMOE_SHARED=$SHARED BUILD=$B timeout 150 ./tests/run_gpu.sh > "$D/test_all.log" 2>&1; echo "rc=$? at $(el) s" >> "$D/test_all.log" ) &
    ( [ -f $Q4 ] || ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) > "$D/synth.log" 2>&1 &
    ( [ -f /tmp/zipf.gguf ] || ./hmoe synth --preset qwen3-30b-a3b --routing zipf:1.0 --vocab $V -q -o /tmp/zipf.gguf ) > "$D/synthz.log" 2>&1 &
    ( HMOE_EXPECT_AMX=1 HMOE_SHARED=$SHARED timeout 60 $B/tests/test_cpu_amx; echo "rc=$?"
      HMOE_SHARED=$SHARED timeout 60 $B/tests/test_sched_moe_subset; echo "rc=$?" ) > "$D/test_cpu.log" 2>&1 &
    wait; sync
    grep -E "FAIL|passed|rc=" "$D/test_all.log" | tail -24 | tee -a "$OUT/summary.txt"
    grep -E "FAIL|passed|rc=|amx" "$D/test_cpu.log" | tail -8 | tee -a "$OUT/summary.txt"
    fb() { # label timeout env... -- bench args...
        local lab=$1 t=$2; shift 2; local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
        [ $(el) -gt ${F4_END:-330} ] && { log "skipped (time): $lab"; return; }
        log "$lab: ${envs[*]} hmoe bench $* (at $(el) s)"
        env "${envs[@]}" timeout $t ./hmoe bench "$@" > "$D/$lab.log" 2>&1; echo "rc=$?" >> "$D/$lab.log"
        grep -E "^\| qwen|decode:|CPU expert phase|handoff|hybrid prefill of|planner|CPU kernels|error|rc=[1-9]" "$D/$lab.log" | head -14 | tee -a "$OUT/summary.txt"; }
    fb gpu 40 X=1 -- -m $Q4 -p 512 -n 128 -r 2 --gpu on
    fb u2 50 X=1 -- -m $Q4 -p 512 -n 128 -r 3 --vram-budget 2048 --no-profile -v
    fb u2off 30 HMOE_PREFILL_CPU_SHARE=0 -- -m $Q4 -p 512 -n 0 -r 3 --vram-budget 2048 --no-profile -v
    fb u10 45 X=1 -- -m $Q4 -p 512 -n 128 -r 3 --vram-budget 10240 --no-profile -v
    fb u10off 30 HMOE_PREFILL_CPU_SHARE=0 -- -m $Q4 -p 512 -n 0 -r 3 --vram-budget 10240 --no-profile -v
    fb u14 40 X=1 -- -m $Q4 -p 512 -n 128 -r 2 --vram-budget 14336 --no-profile -v
    fb pp4096 35 X=1 -- -m $Q4 -p 4096 -n 0 -r 1 -ub 4096 --vram-budget 2048 --no-profile -v
    fb z14a 45 HMOE_PIN=copy -- -m /tmp/zipf.gguf -p 512 -n 128 -r 1 --vram-budget 14336
    fb z14b 45 HMOE_PIN=copy -- -m /tmp/zipf.gguf -p 512 -n 128 -r 2 --vram-budget 14336 -v
    fb z10a 45 HMOE_PIN=copy -- -m /tmp/zipf.gguf -p 512 -n 128 -r 1 --vram-budget 10240
    fb z10b 45 HMOE_PIN=copy -- -m /tmp/zipf.gguf -p 512 -n 128 -r 2 --vram-budget 10240 -v
    fb cpu1 40 X=1 -- -m $Q4 --gpu off -t 16 -p 512 -n 0 -r 1
    log "end at $(el) s"
    ;;
final5|final6)
    # the lead's validation of merged main (stop 15): final4's runs with the split by token count as the default
    # (HMOE_PREFILL_SPLIT=count) against the split before (=index) and the old off (index + share 0) at 2 / 10 GiB,
    # and the Zipf file (every expert gets tokens at 512: the near-real routing case) at 2 / 10 GiB without a
    # profile, count vs index, before its profiled 14 / 10 GiB decode runs. final6 = the same without the
    # comparison runs (fc), for a check of main after later merges. Nothing starts after F5_END (F6_END) s.
    T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf
    for t in tests/test_cpu_amx.c tests/test_sched_moe_subset.c; do cc $CF -o $B/tests/$(basename $t .c) $t $LIB $LD 2>&1 | tail -3; done
    log "all gpu tests || cpu amx tests || synth q4 zipf"
    ( HMOE_SHARED=$SHARED BUILD=$B timeout 170 ./tests/run_gpu.sh > "$D/test_all.log" 2>&1; echo "rc=$? at $(el) s" >> "$D/test_all.log" ) &
    ( [ -f $Q4 ] || ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) > "$D/synth.log" 2>&1 &
    ( [ -f /tmp/zipf.gguf ] || ./hmoe synth --preset qwen3-30b-a3b --routing zipf:1.0 --vocab $V -q -o /tmp/zipf.gguf ) > "$D/synthz.log" 2>&1 &
    ( HMOE_EXPECT_AMX=1 HMOE_SHARED=$SHARED timeout 60 $B/tests/test_cpu_amx; echo "rc=$?"
      HMOE_SHARED=$SHARED timeout 60 $B/tests/test_sched_moe_subset; echo "rc=$?" ) > "$D/test_cpu.log" 2>&1 &
    wait; sync
    grep -E "FAIL|passed|rc=" "$D/test_all.log" | tail -24 | tee -a "$OUT/summary.txt"
    grep -E "FAIL|passed|rc=|amx" "$D/test_cpu.log" | tail -8 | tee -a "$OUT/summary.txt"
    fb() { # label timeout env... -- bench args...
        local lab=$1 t=$2; shift 2; local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
        [ $(el) -gt ${F5_END:-${F6_END:-330}} ] && { log "skipped (time): $lab"; return; }
        log "$lab: ${envs[*]} hmoe bench $* (at $(el) s)"
        env "${envs[@]}" timeout $t ./hmoe bench "$@" > "$D/$lab.log" 2>&1; echo "rc=$?" >> "$D/$lab.log"
        grep -E "^\| qwen|decode:|CPU expert phase|handoff|split by count:|CPU kernels|error|rc=[1-9]" "$D/$lab.log" | cut -c1-500 | head -14 | tee -a "$OUT/summary.txt"; }
    fc() { [ "$step" = final6 ] || fb "$@"; } # comparison runs: final5 only
    fb gpu 40 X=1 -- -m $Q4 -p 512 -n 128 -r 2 --gpu on
    fb u2 60 X=1 -- -m $Q4 -p 512 -n 128 -r 3 --vram-budget 2048 --no-profile -v
    fc u2idx 30 HMOE_PREFILL_SPLIT=index -- -m $Q4 -p 512 -n 0 -r 3 --vram-budget 2048 --no-profile -v
    fc u2off 30 HMOE_PREFILL_SPLIT=index HMOE_PREFILL_CPU_SHARE=0 -- -m $Q4 -p 512 -n 0 -r 3 --vram-budget 2048 --no-profile -v
    fb u10 45 X=1 -- -m $Q4 -p 512 -n 128 -r 3 --vram-budget 10240 --no-profile -v
    fc u10idx 30 HMOE_PREFILL_SPLIT=index -- -m $Q4 -p 512 -n 0 -r 3 --vram-budget 10240 --no-profile -v
    fb u14 40 X=1 -- -m $Q4 -p 512 -n 128 -r 2 --vram-budget 14336 --no-profile -v
    fb pp4096 35 X=1 -- -m $Q4 -p 4096 -n 0 -r 1 -ub 4096 --vram-budget 2048 --no-profile -v
    fc z2 50 HMOE_PIN=copy -- -m /tmp/zipf.gguf -p 512 -n 0 -r 3 --vram-budget 2048 --no-profile -v
    fc z2idx 30 HMOE_PIN=copy HMOE_PREFILL_SPLIT=index -- -m /tmp/zipf.gguf -p 512 -n 0 -r 3 --vram-budget 2048 --no-profile -v
    fc z10np 30 HMOE_PIN=copy -- -m /tmp/zipf.gguf -p 512 -n 0 -r 3 --vram-budget 10240 --no-profile -v
    fc z10npidx 30 HMOE_PIN=copy HMOE_PREFILL_SPLIT=index -- -m /tmp/zipf.gguf -p 512 -n 0 -r 3 --vram-budget 10240 --no-profile -v
    fb z14a 45 HMOE_PIN=copy -- -m /tmp/zipf.gguf -p 512 -n 128 -r 1 --vram-budget 14336
    fb z14b 45 HMOE_PIN=copy -- -m /tmp/zipf.gguf -p 512 -n 128 -r 2 --vram-budget 14336 -v
    fb z10a 45 HMOE_PIN=copy -- -m /tmp/zipf.gguf -p 512 -n 128 -r 1 --vram-budget 10240
    fb z10b 45 HMOE_PIN=copy -- -m /tmp/zipf.gguf -p 512 -n 128 -r 2 --vram-budget 10240 -v
    fb cpu1 40 X=1 -- -m $Q4 --gpu off -t 16 -p 512 -n 64 -r 1
    log "end at $(el) s"
    ;;
final3)
    # the lead's validation of merged main (stop 13): every GPU test while the synthetic files are written,
    # all-GPU Q4_K_M, hybrid uniform 2/10/14 GiB (decode CPU items, split off = default) and the prefill split
    # (HMOE_PREFILL_CPU_SHARE=auto, AMX on the CPU side), pp4096 at 2 GiB, Zipf 14/10 GiB with the profile,
    # CPU-only pp512 with/without AMX. Nothing starts after F3_END s.
    T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf
    log "all gpu tests || synth q4 zipf"
    ( HMOE_SHARED=$SHARED BUILD=$B timeout 150 ./tests/run_gpu.sh > "$D/test_all.log" 2>&1; echo "rc=$? at $(el) s" >> "$D/test_all.log" ) &
    ( [ -f $Q4 ] || ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) > "$D/synth.log" 2>&1 &
    ( [ -f /tmp/zipf.gguf ] || ./hmoe synth --preset qwen3-30b-a3b --routing zipf:1.0 --vocab $V -q -o /tmp/zipf.gguf ) > "$D/synthz.log" 2>&1 &
    wait; sync
    grep -E "FAIL|passed|rc=" "$D/test_all.log" | tail -24 | tee -a "$OUT/summary.txt"
    fb() { # label timeout env... -- bench args...
        local lab=$1 t=$2; shift 2; local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
        [ $(el) -gt ${F3_END:-330} ] && { log "skipped (time): $lab"; return; }
        log "$lab: ${envs[*]} hmoe bench $* (at $(el) s)"
        env "${envs[@]}" timeout $t ./hmoe bench "$@" > "$D/$lab.log" 2>&1; echo "rc=$?" >> "$D/$lab.log"
        grep -E "^\| qwen|decode:|CPU expert phase|handoff|prefill split: [0-9]|hybrid prefill of|CPU kernels|error|rc=[1-9]" "$D/$lab.log" | head -12 | tee -a "$OUT/summary.txt"; }
    fb gpu 40 X=1 -- -m $Q4 -p 512 -n 128 -r 2 --gpu on
    fb u2 45 X=1 -- -m $Q4 -p 512 -n 128 -r 2 --vram-budget 2048 --no-profile -v
    fb u2s 35 HMOE_PREFILL_CPU_SHARE=auto -- -m $Q4 -p 512 -n 0 -r 2 --vram-budget 2048 --no-profile -v
    fb u10 40 X=1 -- -m $Q4 -p 512 -n 128 -r 2 --vram-budget 10240 --no-profile -v
    fb u10s 35 HMOE_PREFILL_CPU_SHARE=auto -- -m $Q4 -p 512 -n 0 -r 2 --vram-budget 10240 --no-profile -v
    fb u14 40 X=1 -- -m $Q4 -p 512 -n 128 -r 2 --vram-budget 14336 --no-profile -v
    fb pp4096 35 X=1 -- -m $Q4 -p 4096 -n 0 -r 1 -ub 4096 --vram-budget 2048 --no-profile -v
    fb z14a 45 HMOE_PIN=copy -- -m /tmp/zipf.gguf -p 512 -n 128 -r 1 --vram-budget 14336
    fb z14b 45 HMOE_PIN=copy -- -m /tmp/zipf.gguf -p 512 -n 128 -r 2 --vram-budget 14336 -v
    fb cpu1 40 HMOE_AMX=1 -- -m $Q4 --gpu off -t 16 -p 512 -n 0 -r 1
    fb cpu0 40 HMOE_AMX=0 -- -m $Q4 --gpu off -t 16 -p 512 -n 0 -r 1
    fb z10a 45 HMOE_PIN=copy -- -m /tmp/zipf.gguf -p 512 -n 128 -r 1 --vram-budget 10240
    fb z10b 45 HMOE_PIN=copy -- -m /tmp/zipf.gguf -p 512 -n 128 -r 2 --vram-budget 10240 -v
    log "end at $(el) s"
    ;;
final2)
    # the lead's validation of merged main: every GPU test while the synthetic files are written, then
    # all-GPU (Q4_K_M, IQ2_XXS), hybrid uniform vs Zipf (pinned copies for the Zipf file, see HMOE_PIN), IQ2_XS/IQ2_M
    log "all gpu tests || synth q4 iq2 zipf"
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf
    ( HMOE_SHARED=$SHARED BUILD=$B timeout 240 ./tests/run_gpu.sh > "$D/test_all.log" 2>&1; echo "rc=$?" >> "$D/test_all.log" ) &
    ( [ -f $Q4 ] || ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) &
    ( [ -f /tmp/iq2.gguf ] || ./hmoe synth --preset qwen3-30b-a3b --mix synth-iq2_xxs --vocab $V -q -o /tmp/iq2.gguf ) &
    ( [ -f /tmp/zipf.gguf ] || ./hmoe synth --preset qwen3-30b-a3b --routing zipf:1.0 --vocab $V -q -o /tmp/zipf.gguf ) &
    wait; sync
    grep -E "FAIL|passed|rc=" "$D/test_all.log" | tail -30 | tee -a "$OUT/summary.txt"
    log "all-GPU Q4_K_M"
    timeout 90 ./hmoe bench -m $Q4 -p 512,4096 -n 128 -r 2 -ub 4096 --gpu on -v > "$D/gpu_q4.log" 2>&1
    grep -E "^\| qwen|decode:|peak|error" "$D/gpu_q4.log" | head -8 | tee -a "$OUT/summary.txt"
    log "all-GPU IQ2_XXS"
    timeout 60 ./hmoe bench -m /tmp/iq2.gguf -p 512,4096 -n 128 -r 2 -ub 4096 --gpu on > "$D/iq2_gpu.log" 2>&1
    grep -E "^\| qwen|error" "$D/iq2_gpu.log" | tee -a "$OUT/summary.txt"
    for f in $Q4 /tmp/zipf.gguf; do for b in 2048 10240 14336; do
        log "hybrid $f --vram-budget $b --no-profile (HMOE_PIN=${FINAL_PIN:-copy} for zipf)"
        pin=; [ $f = /tmp/zipf.gguf ] && pin=${FINAL_PIN:-copy}
        HMOE_PIN=$pin timeout 70 ./hmoe bench -m $f -p 512 -n 128 -r 2 --vram-budget $b --no-profile -v > "$D/h_$b.log" 2>&1
        echo "rc=$?" >> "$D/h_$b.log"
        grep -E "^\| qwen|RAM read|decode:|hybrid:|cache filled|streamed|pin|error|rc=" "$D/h_$b.log" | head -14 | tee -a "$OUT/summary.txt"
    done; done
    for b in 10240 14336; do
        log "hybrid /tmp/zipf.gguf --vram-budget $b with the routing profile (a first run writes it, the second is measured)"
        HMOE_PIN=${FINAL_PIN:-copy} timeout 60 ./hmoe bench -m /tmp/zipf.gguf -p 512 -n 128 -r 1 --vram-budget $b > "$D/hz1_$b.log" 2>&1
        HMOE_PIN=${FINAL_PIN:-copy} timeout 70 ./hmoe bench -m /tmp/zipf.gguf -p 512 -n 128 -r 2 --vram-budget $b -v > "$D/hz2_$b.log" 2>&1
        grep -E "^\| qwen|profile|hot set|decode:|hybrid:|cache filled|error" "$D/hz2_$b.log" | head -12 | tee -a "$OUT/summary.txt"
    done
    log "hybrid pp4096 -ub 4096 at 2 GiB"
    timeout 60 ./hmoe bench -m $Q4 -p 4096 -n 0 -r 1 -ub 4096 --vram-budget 2048 --no-profile -v > "$D/h_pp4096.log" 2>&1
    grep -E "^\| qwen|streamed|error" "$D/h_pp4096.log" | head -6 | tee -a "$OUT/summary.txt"
    log "IQ2_XXS --vram-budget 2048"
    timeout 60 ./hmoe bench -m /tmp/iq2.gguf -p 512 -n 128 -r 2 --vram-budget 2048 --no-profile -v > "$D/iq2_h.log" 2>&1
    grep -E "^\| qwen|RAM read|decode:|hybrid:|error" "$D/iq2_h.log" | head -10 | tee -a "$OUT/summary.txt"
    [ "${FINAL_XS:-0}" = 1 ] || continue
    rm -f /tmp/zipf.gguf
    log "IQ2_XS and IQ2_M mixes: all-GPU and --vram-budget 2048"
    ( ./hmoe synth --preset qwen3-30b-a3b --mix iq2_xs --vocab $V -q -o /tmp/iq2xs.gguf ) &
    ( ./hmoe synth --preset qwen3-30b-a3b --mix iq2_m --vocab $V -q -o /tmp/iq2m.gguf ) &
    wait; sync; ls -la /tmp/*.gguf | tee -a "$OUT/summary.txt"
    for f in /tmp/iq2xs.gguf /tmp/iq2m.gguf; do
        timeout 50 ./hmoe bench -m $f -p 512 -n 128 -r 2 --gpu on > "$D/x.log" 2>&1
        grep -E "^\| qwen|error" "$D/x.log" | sed "s|^|$f all-GPU: |" | tee -a "$OUT/summary.txt"
        timeout 60 ./hmoe bench -m $f -p 512 -n 128 -r 2 --vram-budget 2048 --no-profile -v > "$D/x.log" 2>&1
        grep -E "^\| qwen|RAM read|decode:|error" "$D/x.log" | sed "s|^|$f 2GiB: |" | head -6 | tee -a "$OUT/summary.txt"
    done
    ;;
quick3)
    # lead's check of the decode RMSNorm split and the adaptive streamed-prefill chunk
    log "all gpu tests || synth q4"
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf
    ( HMOE_SHARED=$SHARED BUILD=$B timeout 240 ./tests/run_gpu.sh > "$D/test_all.log" 2>&1; echo "rc=$?" >> "$D/test_all.log" ) &
    ( [ -f $Q4 ] || ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) &
    wait; sync
    grep -E "FAIL|passed|rc=" "$D/test_all.log" | tail -30 | tee -a "$OUT/summary.txt"
    for e in HMOE_NORM=new HMOE_NORM=old HMOE_NORM=new; do
        log "all-GPU tg128 $e"
        env $e timeout 40 ./hmoe bench -m $Q4 -p 0 -n 128 -r 3 --gpu on -v > "$D/tg_$e.log" 2>&1
        grep -E "^\| qwen|decode:|error" "$D/tg_$e.log" | head -4 | tee -a "$OUT/summary.txt"
    done
    log "hybrid pp4096 -ub 4096 at 2 GiB (adaptive chunk)"
    timeout 60 ./hmoe bench -m $Q4 -p 4096 -n 0 -r 2 -ub 4096 --vram-budget 2048 --no-profile -v > "$D/h_pp4096.log" 2>&1
    grep -E "^\| qwen|streamed|stream|note|error" "$D/h_pp4096.log" | head -8 | tee -a "$OUT/summary.txt"
    log "hybrid pp4096 -ub 4096 at 10 GiB"
    timeout 60 ./hmoe bench -m $Q4 -p 4096 -n 0 -r 2 -ub 4096 --vram-budget 10240 --no-profile -v > "$D/h_pp4096b.log" 2>&1
    grep -E "^\| qwen|streamed|stream|note|error" "$D/h_pp4096b.log" | head -8 | tee -a "$OUT/summary.txt"
    ;;
hybpf)
    # branch hybpf (issue #6: prefill split between CPU threads and PCIe streaming), one call: every GPU test
    # and memcheck of the expert-cache modes (split cases included) while the Q4_K_M file is written; then
    # pp512 at 2 and 10 GiB with HMOE_PREFILL_CPU_SHARE=auto (measured split), 0 (off: the old path, also
    # the default when unset) and fixed shares, pp4096 -ub 4096 at 2 GiB, cache off at 10 GiB (--cpu-moe).
    # Nothing starts after HYBPF_END s.
    T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf
    ( HMOE_SHARED=$SHARED BUILD=$B timeout ${HYBPF_TEST_T:-90} ./tests/run_gpu.sh > "$D/test_all.log" 2>&1; echo "rc=$? at $(el) s" >> "$D/test_all.log" ) &
    ( HMOE_TEST_HYBRID_CACHE=1 HMOE_SHARED=$SHARED timeout ${HYBPF_SAN_T:-85} compute-sanitizer --tool memcheck --print-limit 10 \
        $B/tests/gpu_test_forward > "$D/sanitize.log" 2>&1; echo "rc=$? at $(el) s" >> "$D/sanitize.log" ) &
    ( [ -f $Q4 ] || ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) > "$D/synth.log" 2>&1 &
    wait
    grep -E "FAIL|passed|rc=" "$D/test_all.log" | tail -24 | tee -a "$OUT/summary.txt"
    grep -E "ERROR SUMMARY|FAIL|passed|Invalid|rc=" "$D/sanitize.log" | head -12 | sed 's/^/memcheck: /' | tee -a "$OUT/summary.txt"
    ls -la $Q4 | tee -a "$OUT/summary.txt"
    hp() { # label budget share(- = unset) extra-args...
        local lab=$1 b=$2 sh=$3; shift 3
        [ $(el) -gt ${HYBPF_END:-175} ] && { log "skipped (time): $lab"; return; }
        log "$lab: --vram-budget $b HMOE_PREFILL_CPU_SHARE=$sh $* (at $(el) s)"
        if [ "$sh" = - ]; then unset HMOE_PREFILL_CPU_SHARE; else export HMOE_PREFILL_CPU_SHARE=$sh; fi
        timeout ${HYBPF_BT:-32} ./hmoe bench -m $Q4 -n 0 -r 2 --vram-budget $b --no-profile -v "$@" > "$D/$lab.log" 2>&1
        echo "rc=$?" >> "$D/$lab.log"; unset HMOE_PREFILL_CPU_SHARE
        grep -E "^\| qwen|hybrid prefill of|prefill split|host->device|error|rc=[1-9]" "$D/$lab.log" | grep -v "^  prefill split: adaptive" | tail -5 | tee -a "$OUT/summary.txt"; }
    hp a2048 2048 auto -p 512; hp off2048 2048 0 -p 512; hp a10240 10240 auto -p 512; hp off10240 10240 - -p 512
    hp a4096 2048 auto -p 4096 -ub 4096; hp s2048_15 2048 0.15 -p 512; hp s10240_15 10240 0.15 -p 512
    hp s2048_30 2048 0.3 -p 512; hp nocache10240 10240 auto -p 512 --cpu-moe; hp off4096 2048 - -p 4096 -ub 4096
    log "end at $(el) s"
    ;;
hybpf2)
    # branch hybpf2 (issue #6: the prefill split's planner, on by default), one call: every GPU test while
    # the Q4_K_M file is written; then pp512 at 2 / 10 / 14 GiB and pp4096 -ub 4096 at 2 GiB, each with
    # the split off (HMOE_PREFILL_CPU_SHARE=0) and with the default (unset = planned), -v: the per-batch
    # planner lines (warm-up first) go to summary.txt, the t/s to stdout too. Nothing starts after
    # HYBPF2_END s; each bench under HYBPF2_BT s.
    T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf
    ( HMOE_SHARED=$SHARED BUILD=$B timeout ${HYBPF2_TEST_T:-100} ./tests/run_gpu.sh > "$D/test_all.log" 2>&1; echo "rc=$? at $(el) s" >> "$D/test_all.log" ) &
    ( [ -f $Q4 ] || ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) > "$D/synth.log" 2>&1 &
    wait
    grep -E "FAIL|passed|rc=" "$D/test_all.log" | tail -24 | tee -a "$OUT/summary.txt"
    grep -E "default split|CPU share|refused" "$D/test_all.log" | head -12 >> "$OUT/summary.txt"
    ls -la $Q4 | tee -a "$OUT/summary.txt"
    hp2() { # label budget share(- = unset) bench-args...
        local lab=$1 b=$2 sh=$3; shift 3
        [ $(el) -gt ${HYBPF2_END:-200} ] && { log "skipped (time): $lab"; return; }
        echo "### $lab: --vram-budget $b HMOE_PREFILL_CPU_SHARE=$sh $* (at $(el) s)" >> "$OUT/summary.txt"
        if [ "$sh" = - ]; then unset HMOE_PREFILL_CPU_SHARE; else export HMOE_PREFILL_CPU_SHARE=$sh; fi
        timeout ${HYBPF2_BT:-30} ./hmoe bench -m $Q4 -n 0 --vram-budget $b --no-profile -v "$@" > "$D/$lab.log" 2>&1
        echo "rc=$?" >> "$D/$lab.log"; unset HMOE_PREFILL_CPU_SHARE
        grep -E "hybrid prefill of|prefill split|host->device|error|rc=[1-9]" "$D/$lab.log" | grep -v "^  prefill split: adaptive" >> "$OUT/summary.txt"
        grep -E "^\| qwen" "$D/$lab.log" | sed "s/^/$lab $sh: /" | tee -a "$OUT/summary.txt"; }
    hp2 off2048 2048 0 -p 512 -r 4; hp2 def2048 2048 - -p 512 -r 4
    hp2 off10240 10240 0 -p 512 -r 4; hp2 def10240 10240 - -p 512 -r 4
    hp2 off14336 14336 0 -p 512 -r 4; hp2 def14336 14336 - -p 512 -r 4
    hp2 off4096 2048 0 -p 4096 -ub 4096 -r 2; hp2 def4096 2048 - -p 4096 -ub 4096 -r 2
    hp2 def2048r8 2048 - -p 512 -r 8; hp2 def10240r8 10240 - -p 512 -r 8
    log "end at $(el) s"
    ;;
cpujob)
    # branch cpujob (issue #6: where the split's CPU job spends its time), one call: link; the forward GPU
    # test and the CPU subset test (AMX here) while the Q4_K_M file is written; bench_moe_subset on its 48
    # layers (16 threads; then workers put to sleep between calls, then 12 threads with and without 4
    # memory-streaming threads); pp512 at 2 / 10 GiB with the split, old (HMOE_MOE_BATCH=0) vs new batch
    # layout, HMOE_MOE_TIMING=1 -v (the "CPU jobs:" phase lines go to summary.txt). Nothing starts after
    # CJ_END s; each hmoe bench under CJ_BT s.
    T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf
    ( [ -f $Q4 ] || ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) > "$D/synth.log" 2>&1 &
    cc $CF -o $B/bench/bench_moe_subset bench/bench_moe_subset.c $LIB $LD > "$D/link2.log" 2>&1
    cc $CF -o $B/tests/test_sched_moe_subset tests/test_sched_moe_subset.c $LIB $LD >> "$D/link2.log" 2>&1
    head -5 "$D/link2.log" | tee -a "$OUT/summary.txt"
    ( HMOE_SHARED=$SHARED timeout ${CJ_TEST_T:-100} $B/tests/gpu_test_forward > "$D/test_forward.log" 2>&1; echo "rc=$? at $(el) s" >> "$D/test_forward.log" ) &
    HMOE_SHARED=$SHARED timeout 60 $B/tests/test_sched_moe_subset > "$D/test_subset.log" 2>&1; echo "rc=$?" >> "$D/test_subset.log"
    wait
    grep -E "FAIL|passed|rc=" "$D/test_forward.log" | tail -12 | tee -a "$OUT/summary.txt"
    grep -E "FAIL|passed|rc=" "$D/test_subset.log" | tail -12 | tee -a "$OUT/summary.txt"
    ls -la $Q4 | tee -a "$OUT/summary.txt"
    ms() { # label bench_moe_subset-args...
        local lab=$1; shift
        [ $(el) -gt ${CJ_END:-200} ] && { log "skipped (time): $lab"; return; }
        log "bench_moe_subset $lab: $* (at $(el) s)"
        timeout ${CJ_MT:-60} $B/bench/bench_moe_subset -m $Q4 "$@" > "$D/ms_$lab.log" 2>&1; echo "rc=$?" >> "$D/ms_$lab.log"
        grep -vE "^\|---" "$D/ms_$lab.log" | tee -a "$OUT/summary.txt"; }
    ms t16 -t 16 -r 2 -V 0,1,2,3
    cj() { # label budget batch-layout bench-args...
        local lab=$1 b=$2 bl=$3; shift 3
        [ $(el) -gt ${CJ_END:-200} ] && { log "skipped (time): $lab"; return; }
        echo "### $lab: --vram-budget $b HMOE_MOE_BATCH=$bl HMOE_MOE_TIMING=1 $* (at $(el) s)" >> "$OUT/summary.txt"
        HMOE_MOE_BATCH=$bl HMOE_MOE_TIMING=1 timeout ${CJ_BT:-30} ./hmoe bench -m $Q4 -n 0 --vram-budget $b --no-profile -v "$@" > "$D/$lab.log" 2>&1
        echo "rc=$?" >> "$D/$lab.log"
        grep -E "hybrid prefill of|CPU jobs:|error|rc=[1-9]" "$D/$lab.log" | tail -6 >> "$OUT/summary.txt"
        grep -E "^\| qwen" "$D/$lab.log" | sed "s/^/$lab batch=$bl: /" | tee -a "$OUT/summary.txt"; }
    cj old2048 2048 0 -p 512 -r 4; cj new2048 2048 1 -p 512 -r 4
    cj old10240 10240 0 -p 512 -r 4; cj new10240 10240 1 -p 512 -r 4
    ms t16gap -t 16 -r 1 -g 3000 -V 0,1
    ms t12 -t 12 -r 1 -V 0,1
    ms t12s4 -t 12 -r 1 -S 4 -V 0,1
    HMOE_SPIN_US=20000 cj new2048spin 2048 1 -p 512 -r 4
    cj new2048b 2048 1 -p 512 -r 4; cj old2048b 2048 0 -p 512 -r 4
    ms t16nommap -t 16 -r 1 -V 0,1 -M
    log "end at $(el) s"
    ;;
hybcnt)
    # branch hybcnt (issue #6: the prefill split chooses its CPU experts by token count after the router),
    # one call: the forward + MoE GPU tests while q4 is written; pp512 at 2 / 10 / 14 GiB with
    # HMOE_PREFILL_SPLIT=count (default) and =index, the CPU part off (HMOE_PREFILL_CPU_SHARE=0) in count mode
    # (experts without tokens still skipped) and the old 'split off' (index + share 0: everything streams) at
    # 2 / 10 GiB, pp4096 -ub 4096 at 2 GiB (count); then, if time is left, bench_moe_subset at 32 / 4 / 1
    # tokens per expert (the CPU job's cost per expert and per pair). -v: the per-batch split lines go to
    # summary.txt. Nothing starts after HCNT_END s; each hmoe bench under HCNT_BT s (the first, which
    # page-locks 17.6 GB cold, HCNT_BT1 s). HCNT_RUNS overrides the list (label:budget:split:share:p).
    T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf
    ( [ -f $Q4 ] || ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) > "$D/synth.log" 2>&1 &
    ( HMOE_SHARED=$SHARED timeout ${HCNT_TEST_T:-100} $B/tests/gpu_test_forward > "$D/test_forward.log" 2>&1; echo "rc=$? at $(el) s" >> "$D/test_forward.log"
      HMOE_SHARED=$SHARED timeout 40 $B/tests/gpu_test_moe > "$D/test_moe.log" 2>&1; echo "rc=$? at $(el) s" >> "$D/test_moe.log" ) &
    cc $CF -o $B/bench/bench_moe_subset bench/bench_moe_subset.c $LIB $LD > "$D/link2.log" 2>&1
    wait; sync
    grep -E "FAIL|passed|rc=" "$D/test_forward.log" | tail -14 | tee -a "$OUT/summary.txt"
    grep -E "FAIL|passed|rc=" "$D/test_moe.log" | tail -4 | tee -a "$OUT/summary.txt"
    grep -E "split by count" "$D/test_forward.log" | head -3 | cut -c1-400 >> "$OUT/summary.txt"
    ls -la $Q4 | tee -a "$OUT/summary.txt"
    hcb() { # label budget split share(- = unset) bench-args...
        local lab=$1 b=$2 sp=$3 sh=$4; shift 4
        [ $(el) -gt ${HCNT_END:-200} ] && { log "skipped (time): $lab"; return; }
        echo "### $lab: --vram-budget $b HMOE_PREFILL_SPLIT=$sp HMOE_PREFILL_CPU_SHARE=$sh $* (at $(el) s)" >> "$OUT/summary.txt"
        if [ "$sh" = - ]; then unset HMOE_PREFILL_CPU_SHARE; else export HMOE_PREFILL_CPU_SHARE=$sh; fi
        local bt=${HCNT_BT:-30}; [ -z "${hcnt_first:-}" ] && bt=${HCNT_BT1:-45}; hcnt_first=1  # the first run page-locks cold
        HMOE_PREFILL_SPLIT=$sp timeout $bt ./hmoe bench -m $Q4 -n 0 --vram-budget $b --no-profile -v "$@" > "$D/$lab.log" 2>&1
        echo "rc=$?" >> "$D/$lab.log"; unset HMOE_PREFILL_CPU_SHARE
        grep -E "hybrid prefill of|split by count:|error|rc=[1-9]" "$D/$lab.log" | cut -c1-700 >> "$OUT/summary.txt"
        grep -E "^\| qwen" "$D/$lab.log" | sed "s/^/$lab $sp $sh: /" | tee -a "$OUT/summary.txt"; }
    for r in ${HCNT_RUNS:-cnt2048:2048:count:-:512 idx2048:2048:index:-:512 cnt10240:10240:count:-:512 idx10240:10240:index:-:512 cnt4096:2048:count:-:4096 cnt0_2048:2048:count:0:512 off2048:2048:index:0:512 cnt14336:14336:count:-:512 idx14336:14336:index:-:512 cnt0_10240:10240:count:0:512 off10240:10240:index:0:512}; do
        IFS=: read -r l b sp sh pp <<< "$r"
        if [ "$pp" = 4096 ]; then hcb $l $b $sp $sh -p 4096 -ub 4096 -r 1; else hcb $l $b $sp $sh -p 512 -r 3; fi
    done
    for tp in 512 64 16; do
        [ $(el) -gt ${HCNT_END:-200} ] && { log "skipped (time): bench_moe_subset -p $tp"; continue; }
        log "bench_moe_subset -t 16 -p $tp -e 4,16 -L 16 -r 1 -V 1 (at $(el) s)"
        timeout 30 $B/bench/bench_moe_subset -m $Q4 -t 16 -p $tp -e 4,16 -L 16 -r 1 -V 1 > "$D/ms_$tp.log" 2>&1; echo "rc=$?" >> "$D/ms_$tp.log"
        grep -vE "^\|---" "$D/ms_$tp.log" | tail -12 | tee -a "$OUT/summary.txt"
    done
    log "end at $(el) s"
    ;;
xfer)
    # branch xfer (issue #6: --moe-miss transfer and --prefetch on, no longer experimental), one call: link;
    # gpu_test_forward (every case; transfer, prefetch and both at the expert-cache budget) and, at the same
    # time, compute-sanitizer memcheck of the transfer / prefetch cases alone (HMOE_TEST_XFER_ONLY, budget
    # XF_BUDGET MiB = what the plain run's search finds for the Q4_K_M model, 47) while q4 and zipf are written;
    # then tg128 at 2 GiB with --moe-miss cpu / transfer / auto (q4, --no-profile), and the Zipf file at
    # 10 GiB (HMOE_PIN=copy: its file pages never pin on this VM): a profile pass (-r 1), then --prefetch on
    # and off. Each bench under its own timeout (the first page-locks 17.6 GB cold: XF_BT1), nothing
    # started after XF_END s.
    T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf; Z=${ZIPF:-/tmp/zipf.gguf}
    ( [ -f $Q4 ] || ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) > "$D/synth_q4.log" 2>&1 &
    Q1=$!
    ( [ -f $Z ] || ./hmoe synth --preset qwen3-30b-a3b --routing zipf:1.0 --vocab $V -q -o $Z ) > "$D/synth_z.log" 2>&1 &
    Q2=$!
    ( HMOE_SHARED=$SHARED timeout ${XF_TEST_T:-90} $B/tests/gpu_test_forward > "$D/test_forward.log" 2>&1
      echo "rc=$? at $(el) s" >> "$D/test_forward.log" ) &
    TP=$!
    ( HMOE_TEST_XFER_ONLY=1 HMOE_TEST_HYB_BUDGET=${XF_BUDGET:-47} HMOE_SHARED=$SHARED timeout ${XF_SAN_T:-80} \
        compute-sanitizer --tool memcheck --print-limit 10 $B/tests/gpu_test_forward > "$D/san.log" 2>&1
      echo "rc=$? at $(el) s" >> "$D/san.log" ) &
    SP=$!
    wait $TP; log "gpu_test_forward (at $(el) s)"
    grep -E "FAIL|passed|rc=" "$D/test_forward.log" | tail -30 | cut -c1-700 | tee -a "$OUT/summary.txt"
    grep -E "transfer|prefetch" "$D/test_forward.log" | cut -c1-260 >> "$OUT/summary.txt"
    wait $Q1 $Q2; log "synth done at $(el) s"; ls -la $Q4 $Z | tee -a "$OUT/summary.txt"
    wait $SP; log "memcheck, transfer/prefetch cases (at $(el) s)"
    grep -E "ERROR SUMMARY|FAIL|passed|Invalid|at 0x|by thread|rc=" "$D/san.log" | head -24 | cut -c1-300 | sed 's/^/memcheck: /' | tee -a "$OUT/summary.txt"
    grep -E " \.\.\. ok" "$D/san.log" | cut -c1-200 | sed 's/^/memcheck: /' >> "$OUT/summary.txt"
    xb() { # label env file budget runs extra-args...
        local lab=$1 e=$2 f=$3 b=$4 r=$5; shift 5
        [ $(el) -gt ${XF_END:-200} ] && { log "skipped (time): $lab"; return; }
        local bt=${XF_BT:-30}; [ -z "${xf_first:-}" ] && bt=${XF_BT1:-45}; xf_first=1
        log "$lab: $e hmoe bench -m $f -p 0 -n 128 -r $r --vram-budget $b $* -v (at $(el) s)"
        env $e timeout $bt ./hmoe bench -m $f -p 0 -n 128 -r $r --vram-budget $b -v "$@" > "$D/$lab.log" 2>&1
        echo "rc=$?" >> "$D/$lab.log"
        grep -E "^\| qwen|decode:|misses:|transfer:|prefetch|hit rate|pinned|HMOE_PIN|routing profile|error|rc=" "$D/$lab.log" | head -14 | cut -c1-600 | tee -a "$OUT/summary.txt"; }
    if [ "${XF_SET:-1}" = 1 ]; then
        xb u2048_cpu X=1 $Q4 2048 2 --no-profile --moe-miss cpu
        xb u2048_xfer X=1 $Q4 2048 2 --no-profile --moe-miss transfer
        xb z10240_prof HMOE_PIN=copy $Z 10240 1
        xb z10240_pf HMOE_PIN=copy $Z 10240 2 --prefetch on
        xb z10240_off HMOE_PIN=copy $Z 10240 2
        xb u2048_auto X=1 $Q4 2048 2 --no-profile --moe-miss auto
        xb u10240_xfer X=1 $Q4 10240 2 --no-profile --moe-miss transfer
    else # XF_SET=2: after the zero-slot fix, the transfer runs again next to their CPU twins
        xb u2048_xfer X=1 $Q4 2048 2 --no-profile --moe-miss transfer
        xb u2048_cpu X=1 $Q4 2048 2 --no-profile --moe-miss cpu
        xb u10240_xfer X=1 $Q4 10240 2 --no-profile --moe-miss transfer
        xb u10240_cpu X=1 $Q4 10240 2 --no-profile --moe-miss cpu
        xb u2048_xfer_pf X=1 $Q4 2048 2 --no-profile --moe-miss transfer --prefetch on
        xb u2048_auto X=1 $Q4 2048 2 --no-profile --moe-miss auto
    fi
    log "end at $(el) s"
    ;;
hybcpu)
    # branch hybcpu (issue #6), one call: link in parallel; every GPU test, compute-sanitizer memcheck of
    # the decode handoff cases (publish / wait_add / clock probe) and the two synthetic files at once;
    # the CPU expert phase alone (bench_hyb_cpu: work items vs the old three-phase split, GB/s vs the
    # probe); then tg128 at 2 GiB new vs old (HMOE_HYB_CPU=old), Zipf 14 GiB profile pass + measured pass
    # (+ the same with the whole cache as the profile's hot set, --cache-fills 0), 10 GiB, repeats.
    # Nothing is started after HC_END seconds.
    T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf; Z=${ZIPF:-/tmp/zipf.gguf}
    log "hybcpu: link"
    cc $CF -o hmoe src/cli/*.c $LIB $LD > "$D/link.log" 2>&1 &
    for t in tests/gpu_test_*.c bench/bench_hyb_cpu.c; do n=$(basename $t .c); o=$B/tests/$n; case $n in bench_*) o=$B/bench/$n;; esac
        cc $CF -o $o $t $LIB $LD >> "$D/link.log" 2>&1 & done
    wait; tail -5 "$D/link.log" | tee -a "$OUT/summary.txt"
    log "host: $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), linked at $(el) s"
    # every GPU test program (run_gpu.sh's set), gpu_test_forward first: if the time limit cuts the run, it has run
    ( HMOE_SHARED=$SHARED timeout ${HC_TEST_T:-110} ./tests/run.sh $B/tests/gpu_test_forward \
        $(ls $B/tests/gpu_test_* | grep -v -e '\.d$' -e 'gpu_test_forward$') > "$D/test_all.log" 2>&1; echo "rc=$? at $(el) s" >> "$D/test_all.log" ) &
    TP=$!
    ( HMOE_TEST_HYBRID_DECODE=1 HMOE_SHARED=$SHARED timeout ${HC_SAN_T:-100} compute-sanitizer --tool memcheck --print-limit 10 \
        $B/tests/gpu_test_forward > "$D/san.log" 2>&1; echo "rc=$? at $(el) s" >> "$D/san.log" ) &
    SP=$!
    ( [ -f $Q4 ] || ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) > "$D/synth_q4.log" 2>&1 &
    Q1=$!
    ( [ -f $Z ] || ./hmoe synth --preset qwen3-30b-a3b --routing zipf:1.0 --vocab $V -q -o $Z ) > "$D/synth_z.log" 2>&1 &
    Q2=$!
    wait $Q1 $Q2; log "synth done at $(el) s"; ls -la /tmp/*.gguf | tee -a "$OUT/summary.txt"
    wait $TP; grep -E "FAIL|passed|rc=" "$D/test_all.log" | tail -24 | tee -a "$OUT/summary.txt"
    wait $SP; grep -E "ERROR SUMMARY|FAIL|passed|Invalid|rc=" "$D/san.log" | head -12 | sed 's/^/memcheck: /' | tee -a "$OUT/summary.txt"
    hc() { # label env file budget runs extra-args...
        local lab=$1 e=$2 f=$3 b=$4 r=$5; shift 5
        [ $(el) -gt ${HC_END:-205} ] && { log "skipped (time): $lab"; return; }
        log "$lab: $e hmoe bench -m $f -p 0 -n 128 -r $r --vram-budget $b $* -v (at $(el) s)"
        env $e timeout ${HC_BT:-35} ./hmoe bench -m $f -p 0 -n 128 -r $r --vram-budget $b -v "$@" > "$D/$lab.log" 2>&1
        echo "rc=$?" >> "$D/$lab.log"
        grep -E "^\| qwen|RAM read|decode:|CPU expert phase|handoff|hybrid:|hot set|routing profile|pinned|note|error|rc=" "$D/$lab.log" | head -14 | tee -a "$OUT/summary.txt"; }
    hc u2048_new HMOE_HYB_CPU=new $Q4 2048 2 --no-profile
    hc u2048_old HMOE_HYB_CPU=old $Q4 2048 2 --no-profile
    hc z14336_pass1 HMOE_PIN=copy $Z 14336 1
    hc z14336_pass2 HMOE_PIN=copy $Z 14336 2
    hc z14336_static HMOE_PIN=copy $Z 14336 2 --cache-fills 0
    hc u10240_new HMOE_HYB_CPU=new $Q4 10240 2 --no-profile
    if [ $(el) -le ${HC_END:-205} ]; then
        log "CPU expert phase alone (bench_hyb_cpu, at $(el) s)"
        timeout ${HC_CPU_T:-25} $B/bench/bench_hyb_cpu -e 16 -s 5 > "$OUT/bench_hyb_cpu.txt" 2>&1; echo "rc=$?" >> "$OUT/bench_hyb_cpu.txt"
        tee -a "$OUT/summary.txt" < "$OUT/bench_hyb_cpu.txt"
    fi
    hc u2048_new2 HMOE_HYB_CPU=new $Q4 2048 2 --no-profile
    hc u2048_old2 HMOE_HYB_CPU=old $Q4 2048 2 --no-profile
    hc u2048_items1 HMOE_HYB_ITEMS=1 $Q4 2048 2 --no-profile
    log "hybcpu done at $(el) s"
    ;;
quick4)
    # lead: threads per row of the LM head mat-vec (HMOE_MMV_BIG_TPR), tg128 and logits agreement
    V=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf
    ( [ -f $Q4 ] || ./hmoe synth --preset qwen3-30b-a3b --vocab $V -q -o $Q4 ) &
    ( [ -f /tmp/iq2.gguf ] || ./hmoe synth --preset qwen3-30b-a3b --mix synth-iq2_xxs --vocab $V -q -o /tmp/iq2.gguf ) &
    HMOE_SHARED=$SHARED timeout 60 $B/tests/gpu_test_mmv > "$D/mmv.log" 2>&1; grep -E "FAIL|passed" "$D/mmv.log" | tail -3 | tee -a "$OUT/summary.txt"
    wait
    for f in $Q4 /tmp/iq2.gguf; do for e in HMOE_MMV_BIG_TPR=0 HMOE_MMV_BIG_TPR=32 HMOE_MMV_BIG_TPR=64 HMOE_MMV_BIG_TPR=0 HMOE_MMV_BIG_TPR=32; do
        env $e timeout 40 ./hmoe bench -m $f -p 0 -n 128 -r 3 --gpu on -v > "$D/t.log" 2>&1
        grep -E "^\| qwen|decode:|error" "$D/t.log" | sed "s|^|$(basename $f) $e: |" | head -2 | tee -a "$OUT/summary.txt"
    done; done
    for e in HMOE_MMV_BIG_TPR=0 HMOE_MMV_BIG_TPR=32; do
        env $e timeout 40 ./hmoe logits -m $Q4 --ids 9707,11,1879,13,576 --gpu on --top 3 2>/dev/null | tail -4 | sed "s|^|logits $e: |" | tee -a "$OUT/summary.txt"
    done
    ;;
esac
done
