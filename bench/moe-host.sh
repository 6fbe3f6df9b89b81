#!/usr/bin/env bash
# One device call for the MoE bench: torch's path (bench/peers/torch_moe.py), then ours (bench/moe.ts)
# with torch's numbers in the same tables, then the model (bench/model-moe.ts). With two GPUs also the
# two-rank forms (issue 31). Every step is bounded, and on one GPU the bounds add up to under the
# device tool's 600 s per command; logs and results go to $OUT.
#   bash .gpu/enter.sh bash bench/moe-host.sh [--configs A,B,decode]
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/weft-out}
mkdir -p "$OUT"
CONFIGS=${2:-A,B,decode}
[ "${1:-}" = "--configs" ] || CONFIGS=A,B,decode
GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
rc=0
step() {  # bound seconds, name, command...
  local bound=$1 name=$2; shift 2
  echo "=== $name (bound ${bound} s)"
  timeout "$bound" "$@" > "$OUT/$name.log" 2>&1 || { rc=1; echo "STEP FAILED: $name"; }
  tail -25 "$OUT/$name.log"
}
step 200 torch-moe python3 bench/peers/torch_moe.py --out "$OUT/torch_moe.json" --configs "$CONFIGS"
TORCH=$OUT/torch_moe.json
if [ "$GPUS" -ge 2 ]; then
  TORCHRUN=$(command -v torchrun || echo "python3 -m torch.distributed.run")
  step 600 torch-moe2 $TORCHRUN --nproc-per-node=2 bench/peers/torch_moe.py --out "$OUT/torch_moe2.json" --configs "$CONFIGS"
  TORCH=$TORCH,$OUT/torch_moe2.json
  cp "$OUT/torch_moe2.json" bench/results/torch_moe2.json 2>/dev/null
fi
cp "$OUT/torch_moe.json" bench/results/torch_moe.json 2>/dev/null
step 330 moe env TORCH_MOE_JSON="$TORCH" bun bench/moe.ts --configs "$CONFIGS" --worlds 1,2
if [ "$GPUS" -ge 2 ]; then
  step 600 moe-2gpu env TORCH_MOE_JSON="$TORCH" bun bench/moe.ts --configs "$CONFIGS" --worlds 2 --devices 0,1 --name moe-2gpu
fi
step 30 model-moe bun bench/model-moe.ts
cp bench/results/moe*.json bench/results/moe*.md "$OUT/" 2>/dev/null
exit $rc
