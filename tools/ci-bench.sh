#!/bin/sh
# After the tests, CI prints this machine's x86 figures (bench/bench_int8_vs_ort.py: the
# CPU, its peaks measured in the same run, qhost vs ONNX Runtime on the same QDQ files,
# the issue's bars). Information only: CI machines differ (some have only AVX2, the kind
# a session's machine cannot measure), and nothing here can fail the run. Needs the
# build/ of tools/test.sh.
cd "$(dirname "$0")/.." || exit 0
[ -x build/qhost ] || { echo "ci-bench: no build/qhost, skipped"; exit 0; }
log=$(mktemp) || exit 0
echo "== ci-bench: bench/bench_int8_vs_ort.py --threads 1,2 --rounds 3 (information only)"
timeout 1200 /usr/bin/python3 bench/bench_int8_vs_ort.py --qhost build/qhost --threads 1,2 --rounds 3 \
  >"$log" 2>&1
echo "ci-bench: exit $?"
# The summary table, the CPU and its peaks, the per-class shares and the bars.
grep -E '^(CPU|ISA|load average|one-thread peaks|model |resnet18 |mobilenet_v2 |[a-z_0-9]+, [12] thread|  class|  conv|  gemm|bars|  (PASS|MISS|n/a)|FAIL|SKIP)' "$log" | head -80
rm -f "$log"
exit 0
