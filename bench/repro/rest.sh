#!/usr/bin/env bash
# Why does tp.ts's process run GEMMs slower than torch_tp.py's? Both harnesses at rest 0 and at
# --rest-ms R (equal idle GPU time before every sample), AG and RS at two shapes, with nvidia-smi
# sampling clocks and power every 25 ms; per phase: SM clock / power medians per GPU
# (bench/support/smi_clocks.py).
#   bash .gpu/enter.sh bash bench/repro/rest.sh [R]        (GPU host; logs in $OUT)
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}
REST=${1:-2}
SHAPES=8192x8192x8192,4096x14336x4096
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 WEFT_COMM_TIMEOUT_MS=3000
export WEFT_LIBRARY=$PWD/build/libweft.so
TORCHRUN=$(command -v torchrun || echo "python3 -m torch.distributed.run")
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -lms 25 > "$OUT/smi.csv" &
SMI=$!
phase() { # name, command...
  local name=$1; shift
  echo "$name start $(date +%s.%N)" >> "$OUT/phases.txt"
  "$@" > "$OUT/$name.txt" 2>&1; echo "$name rc $?"
  echo "$name end $(date +%s.%N)" >> "$OUT/phases.txt"
}
for rest in 0 "$REST"; do
  phase torch-rest$rest timeout 120 $TORCHRUN --nproc-per-node=2 bench/peers/torch_tp.py --only ag,rs --shapes $SHAPES --rest-ms $rest --out "$OUT/torch-rest$rest.json"
  TORCH_TP_JSON=$OUT/torch-rest$rest.json phase tp-rest$rest timeout 120 bun bench/tp.ts --only ag,rs --shapes $SHAPES --rest-ms $rest --name x-rest$rest
  grep -E "ag_gemm|gemm_rs" "$OUT/torch-rest$rest.txt"
  grep -E "^(allGatherGemm|gemmReduceScatter) " "$OUT/tp-rest$rest.txt" | cut -c1-400
done
kill $SMI
while read -r name what t; do
  [ "$what" = start ] && t0=$t || python3 bench/support/smi_clocks.py "$OUT/smi.csv" "$name" "$t0" "$t"
done < "$OUT/phases.txt"
