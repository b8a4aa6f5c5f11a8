#!/usr/bin/env bash
# gpu_device_run.sh — the GPU machine's sequence: build, the CPU and GPU test suites,
# compute-sanitizer over the GPU tests, then the headline benchmarks of bench/README.md.
#
#   bench/gpu_device_run.sh [STEP...]      steps: build test test-gpu sanitize bench (default: all)
#
# Environment: SHARED (fixtures and the Qwen3 vocabulary; default ../shared), OUT (logs and JSON;
# default ./out), MODEL_DIR (where the synthetic models are written and kept; default /tmp),
# BUDGETS (hybrid VRAM budgets in MiB; default "2048 10240 14336"). Every command's output goes
# to $OUT/<step>.log, every benchmark's result to $OUT/<name>.json (hmoe bench -o json), and one
# line per step to $OUT/summary.txt.
set -u
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
OUT=${OUT:-./out}
MODEL_DIR=${MODEL_DIR:-/tmp}
BUDGETS=${BUDGETS:-"2048 10240 14336"}
mkdir -p "$OUT"
VOCAB=$SHARED/fixtures/tokenizer/qwen3-vocab.gguf
# the GPU's compute capability without the dot (9.0 -> 90): code for exactly this GPU
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
ARCH=${ARCH:-86}
status=0

say() { echo "$*" | tee -a "$OUT/summary.txt"; }
# run NAME CMD...: the command's output into $OUT/NAME.log, its last line and exit status into the summary
run() {
    local name=$1; shift
    "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    say "$name: rc=$rc: $(tail -1 "$OUT/$name.log")"
    [ $rc -eq 0 ] || status=1
    return $rc
}
# bench NAME ARGS...: hmoe bench with -o json into $OUT/NAME.json (stderr: $OUT/NAME.log)
bench() {
    local name=$1; shift
    ./hmoe bench "$@" -o json > "$OUT/$name.json" 2> "$OUT/$name.log"
    local rc=$?
    say "$name: rc=$rc: hmoe bench $*"
    [ $rc -eq 0 ] || status=1
}
# synth FILE ARGS...: write a synthetic Qwen3-30B-A3B model once (kept for later calls)
synth() {
    local f=$1; shift
    [ -f "$f" ] || ./hmoe synth --preset qwen3-30b-a3b --vocab "$VOCAB" "$@" -q -o "$f" > "$OUT/synth.log" 2>&1
}

steps=${*:-build test test-gpu sanitize bench}
for step in $steps; do
case $step in
build)
    nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/summary.txt"
    run build make -j"$(nproc)" CUDA_ARCH="$ARCH" hmoe gpu-tests bench ;;
test)
    run test make test CUDA_ARCH="$ARCH" SHARED="$SHARED" ;;
test-gpu)
    run test-gpu make test-gpu CUDA_ARCH="$ARCH" SHARED="$SHARED" ;;
sanitize)
    # every GPU test program under memcheck; gpu_test_forward on its quick subset (one path each)
    for t in build/tests/gpu_test_*; do
        n=$(basename "$t")
        run "sanitize-$n" env HMOE_TEST_QUICK=1 HMOE_SHARED="$SHARED" \
            compute-sanitizer --tool memcheck --error-exitcode 1 "$t"
    done ;;
bench)
    Q4=$MODEL_DIR/q4.gguf IQ2=$MODEL_DIR/iq2.gguf
    synth "$Q4" && synth "$IQ2" --mix synth-iq2_xxs || { say "synth failed (see $OUT/synth.log)"; status=1; continue; }
    bench gpu-q4 -m "$Q4" -p 512,4096 -n 128 -ub 4096 -r 3 --gpu on
    bench gpu-iq2 -m "$IQ2" -p 512,4096 -n 128 -ub 4096 -r 3 --gpu on
    for b in $BUDGETS; do bench "hybrid-$b-q4" -m "$Q4" -p 512 -n 128 -r 3 --vram-budget "$b" --no-profile; done
    bench hybrid-2048-pp4096 -m "$Q4" -p 4096 -n 0 -ub 4096 -r 2 --vram-budget 2048 --no-profile
    bench cpu-q4 -m "$Q4" -p 512 -n 64 -r 1 --gpu off -t "$(nproc)"
    run bench_cuda_decode build/bench/bench_cuda_decode --quick ;;
*)
    say "unknown step '$step' (steps: build test test-gpu sanitize bench)"; status=2 ;;
esac
done
exit $status
