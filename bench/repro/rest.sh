#!/usr/bin/env bash
# exp/rest-ms (unmeasured): both harnesses with 2 ms of idle GPU before every sample, AG and RS at
# M >= 8192; compare the GEMM columns (own GEMM, cuBLAS GEMM only, torch_matmul_only) with run 40's.
set -u
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 WEFT_COMM_TIMEOUT_MS=3000
export WEFT_LIBRARY=$PWD/build/libweft.so
TORCHRUN=$(command -v torchrun || echo "python3 -m torch.distributed.run")
timeout 100 $TORCHRUN --nproc-per-node=2 bench/peers/torch_tp.py --rest-ms 2 --out $OUT/torch_rest.json > $OUT/torch.txt 2>&1
echo "torch rc $?"; grep -E "ag_gemm|gemm_rs" $OUT/torch.txt | grep -E " (8192|16384) " | head -24
export TORCH_TP_JSON=$OUT/torch_rest.json
timeout 100 bun bench/tp.ts --only ag,rs --min-m 8192 --max-m 16384 --rest-ms 2 --name x-rest > $OUT/tp.txt 2>&1
echo "tp rc $?"; grep -E "^\| (8192|16384)" $OUT/tp.txt | cut -d'|' -f2-9
