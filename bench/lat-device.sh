#!/usr/bin/env bash
# bench/lat-device.sh — one call on the GPU host for the 8 KiB latency work (NOTES-collectives.md,
# run 7): launch-path A/B in alternating worker pairs, the kernel's phase stamps, the floors probe
# (build/latency-probe, built from bench/latency-probe.cu), then the communicator tests.
#   bash .gpu/enter.sh bash bench/lat-device.sh [test-timeout-s]
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/weft-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/host.txt" 2>&1
{
  for pass in 1 2; do
    echo "=== pass $pass: driver launch (default)"
    ROUNDS=${ROUNDS:-4} timeout 40 bun bench/latency.ts
    echo "=== pass $pass: WEFT_COLLECTIVE_LAUNCH=runtime"
    WEFT_COLLECTIVE_LAUNCH=runtime ROUNDS=${ROUNDS:-4} timeout 40 bun bench/latency.ts
  done
  echo "=== stamps (runSync only)"
  WEFT_COLLECTIVE_STAMPS=1 LAT_VARIANTS=runSync ROUNDS=2 timeout 40 bun bench/latency.ts
} > "$OUT/lat.log" 2>&1
timeout 30 ./build/latency-probe > "$OUT/probe.txt" 2>&1
rc=0
REQUIRE_GPU=1 WEFT_COMM_TIMEOUT_MS=3000 timeout "${1:-100}" bun test test/comm.test.ts > "$OUT/test.log" 2>&1 || rc=1
tail -4 "$OUT/test.log"; grep -h "p50" "$OUT/lat.log" | grep -v "^\[" | head -80; cat "$OUT/probe.txt"
exit $rc
