#!/usr/bin/env bash
# sanitize.sh — compute-sanitizer's memcheck and racecheck over each fused tensor-parallel op: a few
# back-to-back launches at the soak's small shapes, two ranks sharing GPU 0 (bench/soak.ts --small).
# Prints one line per (tool, op) with the sanitizer's error summary and exits 1 unless every one says
# "0 errors".
#   bash .gpu/enter.sh bash bench/sanitize.sh [runs per op, default 4]
# GPU-side waits are bounded (WEFT_COMM_TIMEOUT_MS): under the sanitizer kernels run many times
# slower, so the bound here is generous.
set -uo pipefail
runs=${1:-4}
out=${OUT:-/tmp/weft-out}/sanitize
mkdir -p "$out"
export WEFT_COMM_TIMEOUT_MS=${WEFT_COMM_TIMEOUT_MS:-120000}
rc=0
for tool in memcheck racecheck; do
  for op in allGatherGemm gemmReduceScatter gemmAllReduce; do
    log="$out/$tool-$op.txt"
    timeout "${SANITIZE_TIMEOUT:-280}" compute-sanitizer --tool "$tool" --target-processes all --print-limit 20 \
      bun bench/soak.ts --small --runs "$runs" --ops "$op" > "$log" 2>&1
    status=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
    echo "$tool $op: rc $status; ${summary:-no summary (see $log)}"
    if [ "$status" -ne 0 ] || ! grep -qE "SUMMARY: 0 (errors|hazards)" <<< "$summary"; then rc=1; fi
  done
done
exit $rc
