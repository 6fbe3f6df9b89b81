#!/usr/bin/env bash
# bench/tp-ce-device.sh — one device call for the copy-engine mover of GEMM + RS / AR (NOTES-tp
# version 3): the TP tests, bench/tp-stages.ts for both movers (loops of 1 and 8 ms, the copy-engine
# stage-out variants, the graph on and off), then bench/tp.ts for RS / AR at M >= 4096 into
# bench/results/tp-ce.{json,md}. Logs go to $OUT (at most 6 files).
#   bash .gpu/enter.sh bash bench/tp-ce-device.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 WEFT_COMM_TIMEOUT_MS=3000
OUT=${OUT:-/tmp/weft-out}
mkdir -p "$OUT"
REQUIRE_GPU=1 timeout 45 bun test test/ops/tp.test.ts > "$OUT/test.log" 2>&1; echo "tests rc=$?"
grep -E "^ [0-9]+ (pass|fail)" "$OUT/test.log"
S=$(mktemp -d)
stage() {  # label, mover, loop ms, then VAR=value settings
  local label=$1 mover=$2 loop=$3; shift 3
  env "$@" OUT="$S" timeout 30 bun bench/tp-stages.ts --label "$label" --mover "$mover" --cases rs,ar --samples 4 --loop-ms "$loop" \
    >> "$OUT/stages.log" 2>&1 || echo "$label: rc=$?" >> "$OUT/stages.log"
}
stage ce-l1 copyEngine 1
stage ce-l8 copyEngine 8
stage ctas-l8 ctas 8
stage ce-nograph-l8 copyEngine 8 WEFT_TP_CE_GRAPH=0
stage ce-local-l8 copyEngine 8 WEFT_TP_SCATTER_VARIANT=1
stage ce-nocomm-l8 copyEngine 8 WEFT_TP_SCATTER_VARIANT=3
cat "$S"/stages-*.jsonl > "$OUT/stages.jsonl"
timeout 70 bun bench/tp.ts --only rs,ar --min-m 4096 --samples 12 --name tp-ce > "$OUT/bench.log" 2>&1; echo "bench rc=$?"
grep -E "^gemm" "$OUT/bench.log" | cut -c1-200
