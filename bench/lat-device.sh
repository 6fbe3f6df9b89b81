#!/usr/bin/env bash
# bench/lat-device.sh — one call on the GPU host for the 8 KiB latency work: the awaited latency
# in two passes, the floors probe (build/latency-probe, built from bench/latency-probe.cu), the
# communicator and TP tests, then the NCCL comparison table.
#   bash .gpu/enter.sh bash bench/lat-device.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/weft-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/host.txt" 2>&1
{
  for pass in 1 2; do
    echo "=== pass $pass"
    ROUNDS=${ROUNDS:-4} timeout 25 bun bench/latency.ts
  done
} > "$OUT/lat.log" 2>&1
[ -x build/latency-probe ] && timeout 20 ./build/latency-probe > "$OUT/probe.txt" 2>&1
rc=0
# TESTS: which test files (default: the communicator and TP suites; TESTS=all runs everything)
if [ "${TESTS:-}" = all ]; then files=(); else read -ra files <<< "${TESTS:-test/comm.test.ts test/ops/tp.test.ts}"; fi
REQUIRE_GPU=1 WEFT_COMM_TIMEOUT_MS=3000 timeout "${TEST_TIMEOUT:-60}" bun test "${files[@]}" > "$OUT/test.log" 2>&1 || rc=1
[ -n "${NO_TABLE:-}" ] || { timeout "${BENCH_TIMEOUT:-95}" bun bench/collectives.ts > "$OUT/bench.log" 2>&1 || rc=1; }
cp bench/results/collectives.json bench/results/collectives.md "$OUT/" 2>/dev/null
tail -4 "$OUT/test.log"; grep -E "^rank|^===" "$OUT/lat.log"; grep -E "latency|x[0-9]" "$OUT/bench.log" 2>/dev/null | head -60
exit $rc
