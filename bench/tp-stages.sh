#!/usr/bin/env bash
# bench/tp-stages.sh — bench/tp-stages.ts under each stage-out variant and tile-order lag, one
# process per setting (the native planner reads them from the environment at plan creation).
#   bash .gpu/enter.sh bash bench/tp-stages.sh [per-setting-timeout-s]
# Logs and stages-<label>.jsonl go to $OUT.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 WEFT_COMM_TIMEOUT_MS=3000
OUT=${OUT:-/tmp/weft-out}
mkdir -p "$OUT"
T=${1:-60}
run() {  # label, then VAR=value settings
  local label=$1; shift
  env "$@" timeout "$T" bun bench/tp-stages.ts --label "$label" >> "$OUT/stages.log" 2>&1 || echo "$label: rc=$?" >> "$OUT/stages.log"
}
run full
run old WEFT_TP_SCATTER_LAG=16777216
run local WEFT_TP_SCATTER_VARIANT=1
run stores WEFT_TP_SCATTER_VARIANT=2
run nocomm WEFT_TP_SCATTER_VARIANT=3
run lag66 WEFT_TP_SCATTER_LAG=66
run lag198 WEFT_TP_SCATTER_LAG=198
tail -n 3 "$OUT/stages.log"
