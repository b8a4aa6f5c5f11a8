#!/usr/bin/env bash
# run_gpu.sh — run every GPU test program (build/tests/gpu_test_*), print their output, and end
# with the suite's "N passed, N failed" line (same rules as tests/run.sh). Without a CUDA device
# each program prints "... skipped: no CUDA device" and counts nothing.
# BUILD=<dir> selects another build directory (make test-gpu BUILD=/tmp/b passes it on).
set -u
cd "$(dirname "$0")/.."
export HMOE_SHARED="${HMOE_SHARED:-../shared}"
build="${BUILD:-build}"
pass=0; fail=0
for t in "$build"/tests/gpu_test_*; do
    [ -e "$t" ] || continue
    case "$t" in *.d|*.o) continue;; esac
    echo "== $t"
    out=$( "$t" 2>&1 ); rc=$?
    printf '%s\n' "$out"
    summary=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$summary" ]; then
        echo "$t ... FAIL: exited with status $rc without a summary line"
        fail=$((fail + 1)); continue
    fi
    p=${summary%% passed*}; f=${summary#*, }; f=${f%% failed}
    pass=$((pass + p)); fail=$((fail + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "$t ... FAIL: exit status $rc"; fail=$((fail + 1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
