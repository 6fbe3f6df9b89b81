#!/usr/bin/env bash
# bench/tp-stages.sh — bench/tp-stages.ts under each stage-out variant and tile order, one process
# per setting (the native planner reads WEFT_TP_SCATTER_VARIANT / WEFT_TP_SCATTER_LAG from the
# environment at plan creation; a lag of 2^24 is version 1's order, all own tiles first).
#   bash .gpu/enter.sh bash bench/tp-stages.sh [per-setting-timeout-s]
# Every setting's JSON lines go to $OUT/stages.jsonl, its log to $OUT/stages.log.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 WEFT_COMM_TIMEOUT_MS=3000
OUT=${OUT:-/tmp/weft-out}
mkdir -p "$OUT"
T=${1:-60}
OLD=16777216
run() {  # label, then VAR=value settings
  local label=$1; shift
  env "$@" timeout "$T" bun bench/tp-stages.ts --label "$label" >> "$OUT/stages.log" 2>&1 || echo "$label: rc=$?" >> "$OUT/stages.log"
}
run full
run full-v1order WEFT_TP_SCATTER_LAG=$OLD
run stores WEFT_TP_SCATTER_VARIANT=2
run local WEFT_TP_SCATTER_VARIANT=1
run nocomm WEFT_TP_SCATTER_VARIANT=3
run nocomm-v1order WEFT_TP_SCATTER_VARIANT=3 WEFT_TP_SCATTER_LAG=$OLD
run nohandshake WEFT_TP_SCATTER_VARIANT=4
run plainorder WEFT_TP_SCATTER_VARIANT=5
cat "$OUT"/stages-*.jsonl > "$OUT/stages.jsonl" && rm -f "$OUT"/stages-*.jsonl
grep -v '^{' "$OUT/stages.log" | tail -n 5
