#!/usr/bin/env bash
# bench/tp-add-device.sh — one device call for NOTES-tp version 3.1 (received partials by TMA): the TP
# tests, then bench/tp-stages.ts for reduce-scatter with the copy-engine mover, the TMA add against
# the 4-byte-load add (WEFT_TP_CE_ADD=loads), same binary. Logs go to $OUT.
#   bash .gpu/enter.sh bash bench/tp-add-device.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 WEFT_COMM_TIMEOUT_MS=3000
OUT=${OUT:-/tmp/weft-out}
mkdir -p "$OUT"
REQUIRE_GPU=1 timeout 50 bun test test/ops/tp.test.ts > "$OUT/test.log" 2>&1; echo "tests rc=$?"
grep -E "^\(fail\)|^ *[0-9]+ (pass|fail)$" "$OUT/test.log"
S=$(mktemp -d)
stage() {  # label, then VAR=value settings
  local label=$1; shift
  env "$@" OUT="$S" timeout 18 bun bench/tp-stages.ts --label "$label" --mover copyEngine --cases rs --samples 4 --loop-ms 8 \
    >> "$OUT/stages.log" 2>&1 || echo "$label: rc=$?" >> "$OUT/stages.log"
}
stage ce-tma
stage ce-loads WEFT_TP_CE_ADD=loads
cat "$S"/stages-*.jsonl > "$OUT/stages.jsonl"
grep -v "^{" "$OUT/stages.log" | tail -n 5 || true
