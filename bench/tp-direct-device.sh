#!/usr/bin/env bash
# bench/tp-direct-device.sh — all-reduce with the copy-engine mover: the final round's chunks stored
# into the peers by the epilogue (default) against all chunks broadcast by copy engine
# (WEFT_TP_CE_DIRECT=0), one device call: the TP tests, bench/tp-stages.ts for both settings in one
# session (8 ms loops), then one traced run. Logs and JSON lines go to $OUT.
#   bash .gpu/enter.sh bash bench/tp-direct-device.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 WEFT_COMM_TIMEOUT_MS=3000
OUT=${OUT:-/tmp/weft-out}
mkdir -p "$OUT"
REQUIRE_GPU=1 timeout 120 bun test test/ops/tp.test.ts > "$OUT/tp-test.txt" 2>&1
grep -E "^\(fail\)|^ *[0-9]+ (pass|fail)$" "$OUT/tp-test.txt"
for setting in 1 0; do
  WEFT_TP_CE_DIRECT=$setting timeout 150 bun bench/tp-stages.ts --label "direct-$setting" --mover copyEngine --cases ar \
    --loop-ms 8 --samples 4 > "$OUT/stages-direct-$setting.log" 2>&1 || echo "direct $setting: rc=$?"
done
WEFT_TP_TRACE=1 timeout 100 bun bench/tp-stages.ts --label trace --mover copyEngine --cases ar --loop-ms 8 --samples 2 > "$OUT/trace.log" 2>&1
for f in "$OUT"/stages-direct-*.jsonl; do
  bun -e "for (const l of require('fs').readFileSync('$f','utf8').trim().split('\n')) { const j = JSON.parse(l);
    console.log(j.label.padEnd(10), [j.M,j.N,j.K].join(',').padEnd(16), j.fusedMs.toFixed(4), j.gemmMs.toFixed(4), j.ratio.toFixed(3), 'rel', (j.rel??0).toExponential(1)); }"
done
