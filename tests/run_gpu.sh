#!/usr/bin/env bash
# run_gpu.sh — run every GPU test program (build/tests/gpu_test_*) through tests/run.sh (same
# output and "N passed, N failed" rules). Without a CUDA device each program prints
# "... skipped: no CUDA device" and counts nothing.
# BUILD=<dir> selects another build directory (make test-gpu BUILD=/tmp/b passes it on).
set -u
cd "$(dirname "$0")/.."
build="${BUILD:-build}"
exec ./tests/run.sh "$build"/tests/gpu_test_*
