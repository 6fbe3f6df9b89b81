#!/usr/bin/env bash
# bench/comm-device.sh — issue 3's one call on the GPU host: the whole test suite under
# REQUIRE_GPU=1 (collectives in one process with both GPUs and in one process per GPU), then the
# NCCL comparison bench. Every log goes to $OUT.
#   bash .gpu/enter.sh bash bench/comm-device.sh [test-timeout-s] [bench-timeout-s]
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/weft-out}
mkdir -p "$OUT"
{
  nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  nvidia-smi topo -m
  echo "--- nccl.h enums (checked against ffi/src/baseline/nccl.cpp)"
  grep -nE "NCCL_(MAJOR|MINOR|PATCH) |ncclInt8 *=|ncclUint8 *=|ncclInt32 *=|ncclFloat16 *=|ncclFloat32 *=|ncclBfloat16 *=|ncclSum *=" /usr/include/nccl.h
} > "$OUT/host.txt" 2>&1
rc=0
REQUIRE_GPU=1 WEFT_COMM_TIMEOUT_MS=3000 timeout "${1:-240}" bun test 2>&1 | tee "$OUT/test.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
timeout "${2:-150}" bun bench/collectives.ts 2>&1 | tee "$OUT/bench.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
cp bench/results/collectives.json bench/results/collectives.md "$OUT/" 2>/dev/null
exit $rc
