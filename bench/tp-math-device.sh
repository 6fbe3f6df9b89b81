#!/usr/bin/env bash
# bench/tp-math-device.sh — why the copy-engine mover's math runs slower than our plain GEMM: traced
# runs of bench/tp-stages.ts (8 ms loops) for the full op and two stage-out variants, one process
# each, in one device call: 3 (no comm: staging stores and chunk counts, no copies, waits or adds)
# and 4 (no comm and no counts: the plain GEMM's epilogue in this mover's tile order).
#   bash .gpu/enter.sh bash bench/tp-math-device.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 WEFT_COMM_TIMEOUT_MS=3000
OUT=${OUT:-/tmp/weft-out}
mkdir -p "$OUT"
[ -n "${WITH_TESTS:-}" ] && { REQUIRE_GPU=1 timeout 120 bun test test/ops/tp.test.ts > "$OUT/tp-test.txt" 2>&1; grep -E "^\(fail\)|^ *[0-9]+ (pass|fail)$" "$OUT/tp-test.txt"; }
for v in ${VARIANTS:-0 3 4}; do
  WEFT_TP_TRACE=1 WEFT_TP_SCATTER_VARIANT=$v timeout 120 bun bench/tp-stages.ts --label "math-$v" --mover copyEngine \
    --cases rs,ar --loop-ms 8 --samples 3 > "$OUT/math-$v.log" 2>&1 || echo "variant $v: rc=$?"
done
grep -h '^{"label' "$OUT"/math-*.log | bun -e "for (const l of (await Bun.stdin.text()).trim().split('\n')) { const j = JSON.parse(l);
  console.log(j.label.padEnd(8), j.op.padEnd(18), [j.M,j.N,j.K].join(',').padEnd(16), j.fusedMs.toFixed(4), j.gemmMs.toFixed(4), j.ratio.toFixed(3)); }"
