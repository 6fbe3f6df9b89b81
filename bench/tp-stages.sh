#!/usr/bin/env bash
# bench/tp-stages.sh — bench/tp-stages.ts under each stage-out variant (and, given as arguments,
# tile-order lags), one process per setting (the native planner reads them from the environment
# at plan creation).
#   bash .gpu/enter.sh bash bench/tp-stages.sh [per-setting-timeout-s] [lag ...]
# Every setting's JSON lines go to $OUT/stages.jsonl, its log to $OUT/stages.log.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 WEFT_COMM_TIMEOUT_MS=3000
OUT=${OUT:-/tmp/weft-out}
mkdir -p "$OUT"
T=${1:-60}
shift || true
run() {  # label, then VAR=value settings
  local label=$1; shift
  env "$@" timeout "$T" bun bench/tp-stages.ts --label "$label" >> "$OUT/stages.log" 2>&1 || echo "$label: rc=$?" >> "$OUT/stages.log"
}
run full
run local WEFT_TP_SCATTER_VARIANT=1
run stores WEFT_TP_SCATTER_VARIANT=2
run nocomm WEFT_TP_SCATTER_VARIANT=3
for lag in "$@"; do run "lag$lag" WEFT_TP_SCATTER_LAG="$lag"; done
cat "$OUT"/stages-*.jsonl > "$OUT/stages.jsonl" && rm -f "$OUT"/stages-*.jsonl
grep -v '^{' "$OUT/stages.log" | tail -n 5
