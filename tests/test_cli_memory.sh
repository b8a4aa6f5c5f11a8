#!/usr/bin/env bash
# test_cli_memory.sh — the RAM plan of `hmoe run` / `bench`: --no-mmap and --mlock are refused
# before loading when the model cannot stay in RAM (HMOE_MEM_AVAILABLE_MIB stands in for a small
# machine), with the sizes and the flag to drop; they run when it fits (--mlock then shows in the
# page-locked count, or warns when 'ulimit -l' refuses it); -v prints peak RSS, page-locked bytes;
# bench -o json carries rss_peak_mib and pinned_mib.
# Prints the harness format: one "name ... ok|FAIL" line per case, then "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
S="${HMOE_SHARED:-tests}"
Q4="$S/fixtures/models/tiny-qwen3moe-A-Q4_K_M.gguf"
H=./hmoe
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
check() { # check NAME STATUS DETAIL
    if [ "$2" -eq 0 ]; then echo "$1 ... ok"; pass=$((pass + 1)); else echo "$1 ... FAIL: $3"; fail=$((fail + 1)); fi
}
RUN="run -m $Q4 -p hello -n 2 -t 1 --temp 0 --gpu off"

for flag in --no-mmap --mlock; do
    out=$(HMOE_MEM_AVAILABLE_MIB=1 $H $RUN $flag 2>&1 >/dev/null); rc=$?
    echo "$out" | grep -q "error: not enough memory: $flag keeps the whole model (.*) in RAM but only 1.0 MiB is available; drop $flag"
    check "memory: $flag on a machine too small is refused before loading, with the sizes and the flag" \
        $(( rc == 0 || $? )) "rc $rc: $out"
done

out=$(HMOE_MEM_AVAILABLE_MIB=100000 $H $RUN --no-mmap -v 2>&1 >/dev/null); rc=$?
echo "$out" | grep -Eq "^memory: peak RSS [0-9]+ MiB, page-locked [0-9]+ MiB \(device 0 MiB, mlock 0 MiB\)"
check "memory: --no-mmap runs when it fits; -v prints peak RSS and page-locked bytes" $(( rc != 0 || $? )) \
    "rc $rc: $out"

size=$(stat -c %s "$Q4")
out=$($H $RUN --mlock -v 2>&1 >/dev/null); rc=$?
# the lock is refused beyond 'ulimit -l' unless the process may lock any amount (CAP_IPC_LOCK);
# AddressSanitizer turns mlock into a no-op
if $H --version 2>&1 | grep -q ASan; then
    check "memory: --mlock runs (an ASan build, where mlock does nothing)" $(( rc != 0 )) "rc $rc: $out"
elif echo "$out" | grep -q "warning: --mlock"; then
    echo "$out" | grep -q "warning: --mlock: cannot lock the .* MiB of .* in RAM (.*; the lock limit is .*): the weights stay evictable; raise the limit with 'ulimit -l unlimited'"
    check "memory: --mlock refused by the system warns with the limit and still runs" $(( rc != 0 || $? )) \
        "rc $rc: $out"
else
    mib=$(echo "$out" | sed -n 's/.*mlock \([0-9]*\) MiB.*/\1/p' | head -n 1)
    check "memory: --mlock locks the weights (VmLck >= the file, $size bytes)" \
        $(( rc != 0 || ${mib:-0} * 1048576 + 1048576 < size )) "rc $rc mlock ${mib:-?} MiB: $out"
fi

out=$($H bench -m "$Q4" -p 8 -n 2 -r 1 -t 1 -o json -q --gpu off 2>&1); rc=$?
rss=$(echo "$out" | sed -n 's/.*"rss_peak_mib": *\([0-9.]*\).*/\1/p' | head -n 1)
pin=$(echo "$out" | sed -n 's/.*"pinned_mib": *\([0-9.]*\).*/\1/p' | head -n 1)
awk -v r="${rss:-0}" -v p="${pin:--1}" 'BEGIN {exit !(r > 1 && p == 0)}'
check "memory: bench -o json has rss_peak_mib (> 1) and pinned_mib (0 on the CPU)" $(( rc != 0 || $? )) \
    "rc $rc rss '$rss' pinned '$pin': $out"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
