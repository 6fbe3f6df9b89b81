#!/usr/bin/env bash
# bench/tp-device.sh — issue 5's one call on the GPU host: the GPU tests (fused TP ops in both
# process models, the GEMM engine they extend, the ABI), torch's fused ops under torchrun, then
# bench/tp.ts reading torch's numbers from the same session, then the demo. Logs go to $OUT.
#   bash .gpu/enter.sh bash bench/tp-device.sh [test-timeout-s] [torch-timeout-s] [bench-timeout-s]
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/weft-out}
mkdir -p "$OUT"
{
  nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
  nvidia-smi topo -m
} > "$OUT/host.txt" 2>&1
rc=0
REQUIRE_GPU=1 WEFT_COMM_TIMEOUT_MS=3000 timeout "${1:-150}" bun test test/ops/tp.test.ts test/ops/gemm.test.ts test/abi.test.ts > "$OUT/test.log" 2>&1
[ $? -eq 0 ] || rc=1
tail -5 "$OUT/test.log"
TORCHRUN=$(command -v torchrun || echo "python3 -m torch.distributed.run")
timeout "${2:-120}" $TORCHRUN --nproc-per-node=2 bench/peers/torch_tp.py --out "$OUT/torch_tp.json" > "$OUT/torch.log" 2>&1
[ $? -eq 0 ] || rc=1
tail -3 "$OUT/torch.log"
TORCH_TP_JSON="$OUT/torch_tp.json" timeout "${3:-150}" bun bench/tp.ts > "$OUT/bench.log" 2>&1
[ $? -eq 0 ] || rc=1
timeout 60 bun examples/demo.ts > "$OUT/demo.log" 2>&1
[ $? -eq 0 ] || rc=1
cat "$OUT/demo.log" | tail -3
exit $rc
