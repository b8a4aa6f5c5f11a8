#!/usr/bin/env bash
# run.sh — run every test program (build/tests/test_*), test script (tests/test_*.sh) and the
# layering check (tests/check_layers.sh), or the
# programs given as arguments (tests/run_gpu.sh), print their output, and end with the suite's
# "N passed, N failed" line. A program that dies without printing its own summary counts as one failure.
set -u
cd "$(dirname "$0")/.."
export HMOE_SHARED="${HMOE_SHARED:-tests}"
pass=0; fail=0
# BUILD=<dir>: the build directory whose test programs run (make test passes its own).
if [ $# -eq 0 ]; then
    set -- "${BUILD:-build}"/tests/test_* tests/test_*.sh tests/check_layers.sh
    if [ ! -e "$1" ]; then # the glob matched nothing: the programs were not built there
        echo "${BUILD:-build}/tests ... FAIL: no test programs (build them with make test)"; fail=1
    fi
fi
for t in "$@"; do
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
