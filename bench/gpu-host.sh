#!/usr/bin/env bash
# One call on the GPU host: checks the machine, runs what is asked, and writes every log to $OUT.
#   bash .gpu/enter.sh bash bench/gpu-host.sh info test demo [bench-name ...]
# Steps:  info -> weft info;  test -> REQUIRE_GPU=1 bun test;  demo -> the README's demo;
#         quickstart -> the README's API example;
#         anything else -> bun bench/<name>.ts
# GPU-side waits are bounded by WEFT_COMM_TIMEOUT_MS (3 s here), so a broken peer fails fast.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export WEFT_COMM_TIMEOUT_MS=${WEFT_COMM_TIMEOUT_MS:-3000}
OUT=${OUT:-/tmp/weft-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/nvidia-smi.txt" 2>&1
rc=0
for step in "$@"; do
  case "$step" in
    info) bun lib/cli.ts info 2>&1 | tee "$OUT/info.txt" || rc=1 ;;
    quickstart) bun examples/quickstart.ts 2>&1 | tee "$OUT/quickstart.txt"; [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1 ;;
    demo) bun examples/demo.ts 2>&1 | tee "$OUT/demo.txt"; [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1 ;;
    test) REQUIRE_GPU=1 bun test --timeout 300000 2>&1 | tee "$OUT/test.txt"; [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1 ;;
    *) bun "bench/$step.ts" 2>&1 | tee "$OUT/bench-$step.txt"; [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1 ;;
  esac
done
exit $rc
