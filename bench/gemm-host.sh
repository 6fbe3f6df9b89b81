#!/usr/bin/env bash
# One call on the GPU host for the GEMM engine (issue 4): cuBLASLt ABI check, SASS check, GPU tests,
# benchmark. Run from the repository root with libweft.so already in build/:
#   bash .gpu/enter.sh bash bench/gemm-host.sh [tests|notests] [bench-args...]
# Logs go to $OUT: nvidia-smi.txt, cublaslt-abi.txt, sass.txt, test.log, bench.log, clocks.csv, gemm.json,
# gemm.md.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/weft-out}
mkdir -p "$OUT"
mode=${1:-tests}
shift || true
rc=0

nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/nvidia-smi.txt" 2>&1

# The cuBLASLt enum values and struct size ffi/src/baselines/cublaslt.cpp declares, from the header.
inc=/usr/local/cuda-13.0/targets/x86_64-linux/include
cat > /tmp/cublaslt_abi.cpp <<'CPP'
#include <cstdio>
#include <cublasLt.h>
int main() {
  std::printf("CUBLAS_COMPUTE_32F %d (want 68)\n", int(CUBLAS_COMPUTE_32F));
  std::printf("CUBLASLT_MATMUL_DESC_TRANSA %d (want 3)\n", int(CUBLASLT_MATMUL_DESC_TRANSA));
  std::printf("CUBLASLT_MATMUL_DESC_TRANSB %d (want 4)\n", int(CUBLASLT_MATMUL_DESC_TRANSB));
  std::printf("CUBLAS_OP_N %d (want 0) CUBLAS_OP_T %d (want 1)\n", int(CUBLAS_OP_N), int(CUBLAS_OP_T));
  std::printf("CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES %d (want 1)\n", int(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES));
  std::printf("sizeof(cublasLtMatmulAlgo_t) %zu (want 64)\n", sizeof(cublasLtMatmulAlgo_t));
  std::printf("sizeof(cublasLtMatmulHeuristicResult_t) %zu (want 96)\n", sizeof(cublasLtMatmulHeuristicResult_t));
  return 0;
}
CPP
( /usr/local/cuda/bin/nvcc -I"$inc" /tmp/cublaslt_abi.cpp -o /tmp/cublaslt_abi && /tmp/cublaslt_abi ) > "$OUT/cublaslt-abi.txt" 2>&1

# SASS: HGMMA count for the whole library, and per GEMM kernel the HGMMA and local-memory (LDL/STL)
# instruction counts (spills in the main loop would show as LDL/STL).
cuobjdump --dump-sass build/libweft.so > /tmp/sass.txt 2>&1
{
  echo "cuobjdump --dump-sass build/libweft.so | grep -c HGMMA: $(grep -c HGMMA /tmp/sass.txt)"
  awk '/Function :/ {fn=$3} /HGMMA/ {h[fn]++} /LDL|STL/ {l[fn]++} END {for (f in h) printf "%s HGMMA %d LDL/STL %d\n", f, h[f], l[f]+0}' /tmp/sass.txt | sort
  echo "reference kernel LDL/STL: $(awk '/Function :/ {fn=$3} /LDL|STL/ && fn ~ /reference/ {n++} END {print n+0}' /tmp/sass.txt)"
} > "$OUT/sass.txt"

if [ "$mode" = tests ]; then
  REQUIRE_GPU=1 timeout 420 bun test test/ops/gemm.test.ts test/abi.test.ts test/tensor.test.ts 2>&1 | tee "$OUT/test.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
fi
# Clocks, power and temperature every 500 ms while the benchmark runs (read-only).
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu --format=csv -lms 500 > "$OUT/clocks.csv" 2>&1 &
smi=$!
timeout 240 bun bench/gemm.ts "$@" 2>&1 | tee "$OUT/bench.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
kill "$smi" 2>/dev/null
cat "$OUT/cublaslt-abi.txt" "$OUT/sass.txt" | head -40
exit $rc
