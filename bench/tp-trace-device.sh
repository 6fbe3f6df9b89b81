#!/usr/bin/env bash
# bench/tp-trace-device.sh — the TP tests, then bench/tp-stages.ts with WEFT_TP_TRACE=1 (the copy-engine
# mover's per-chunk stamps of one steady-state launch per plan) into $OUT/trace.log.
#   bash .gpu/enter.sh bash bench/tp-trace-device.sh
export NCCL_NVLS_ENABLE=0 WEFT_COMM_TIMEOUT_MS=3000
REQUIRE_GPU=1 timeout 120 bun test test/ops/tp.test.ts 2>&1 | grep -E "^\(fail\)|^ *[0-9]+ (pass|fail)$"
WEFT_TP_TRACE=1 timeout 200 bun bench/tp-stages.ts --label trace --mover copyEngine --cases rs,ar --loop-ms 8 --samples 2 > $OUT/trace.log 2>&1; echo rc=$?
grep -c trace $OUT/trace.log
