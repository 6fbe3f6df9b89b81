#!/usr/bin/env bash
# bench/tp-variants.sh — bench/tp-stages.ts under several settings in one device call, one process per
# setting (the native planner reads its WEFT_TP_* switches at plan creation), then one line per
# (setting, op, shape) with the ratio to our GEMM in the same process. Logs and JSON lines go to $OUT.
#   bash .gpu/enter.sh bash bench/tp-variants.sh [--tests] [--trace] [--mover copyEngine] [--cases rs,ar] \
#       at0:WEFT_TP_CE_COUNT_AT=0 late:WEFT_TP_CE_COUNT=late ...
# A setting is label[:VAR=value[,VAR=value...]]. --tests runs test/ops/tp.test.ts first; --trace sets
# WEFT_TP_TRACE=1 (the copy-engine mover's per-chunk stamps of one steady-state launch per plan, on
# stderr in the setting's log). Loops of 8 ms (the host's launch skew amortised), 3 samples.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 WEFT_COMM_TIMEOUT_MS=3000
OUT=${OUT:-/tmp/weft-out}
mkdir -p "$OUT"
MOVER=copyEngine CASES=rs,ar TRACE=0
settings=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tests) REQUIRE_GPU=1 timeout 120 bun test test/ops/tp.test.ts > "$OUT/tp-test.txt" 2>&1
             grep -E "^\(fail\)|^ *[0-9]+ (pass|fail)$" "$OUT/tp-test.txt" ;;
    --trace) TRACE=1 ;;
    --mover) MOVER=$2; shift ;;
    --cases) CASES=$2; shift ;;
    *) settings+=("$1") ;;
  esac
  shift
done
for s in "${settings[@]}"; do
  label=${s%%:*}
  vars=()
  [ "$s" != "$label" ] && IFS=, read -ra vars <<< "${s#*:}"
  env "${vars[@]}" WEFT_TP_TRACE=$TRACE timeout 150 bun bench/tp-stages.ts --label "$label" --mover "$MOVER" --cases "$CASES" \
    --loop-ms 8 --samples 3 > "$OUT/$label.log" 2>&1 || echo "$label: rc=$?"
done
grep -h '^{"label' "$OUT"/*.log | bun -e "for (const l of (await Bun.stdin.text()).trim().split('\n')) { const j = JSON.parse(l);
  console.log(j.label.padEnd(10), j.op.padEnd(18), [j.M,j.N,j.K].join(',').padEnd(16), j.fusedMs.toFixed(4), j.gemmMs.toFixed(4), j.ratio.toFixed(3), 'rel', (j.rel ?? 0).toExponential(1)); }"
