#!/usr/bin/env bash
# bench/tp-count-device.sh — version 3.2 of the copy-engine mover (chunk counts published with the
# next tile's first k-block) against 3.1 (a tile later), one device call: the TP tests, then
# bench/tp-stages.ts for both settings in one session (8 ms loops). Logs and JSON lines go to $OUT.
#   bash .gpu/enter.sh bash bench/tp-count-device.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 WEFT_COMM_TIMEOUT_MS=3000
OUT=${OUT:-/tmp/weft-out}
mkdir -p "$OUT"
REQUIRE_GPU=1 timeout 120 bun test test/ops/tp.test.ts > "$OUT/tp-test.txt" 2>&1
grep -E "^\(fail\)|^ *[0-9]+ (pass|fail)$" "$OUT/tp-test.txt"
for setting in early late; do
  WEFT_TP_CE_COUNT=$setting timeout 200 bun bench/tp-stages.ts --label "count-$setting" --mover copyEngine --cases rs,ar \
    --loop-ms 8 --samples 4 > "$OUT/stages-$setting.log" 2>&1 || echo "$setting: rc=$?"
done
for f in "$OUT"/stages-count-*.jsonl; do
  bun -e "for (const l of require('fs').readFileSync('$f','utf8').trim().split('\n')) { const j = JSON.parse(l);
    console.log(j.label.padEnd(12), j.op.padEnd(18), [j.M,j.N,j.K].join(',').padEnd(16), j.fusedMs.toFixed(4), j.gemmMs.toFixed(4), j.ratio.toFixed(3), 'host', j.hostOnceFusedMs.toFixed(3), 'rel', (j.rel??0).toExponential(1)); }"
done
