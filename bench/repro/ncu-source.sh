#!/usr/bin/env bash
# Temporary: ncu's per-instruction stall samples (SourceCounters, SASS) of our GEMM and of the
# copy-engine reduce-scatter's "no comm" kernel at (4096, 14336, 4096), one launch each.
set -u
cd "$(dirname "$0")/../.."
export WEFT_LIBRARY=$PWD/build/libweft.so
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for k in 'regex:CeIntoOutHooks' 'regex:^_ZN4weft4gemm11gemm_kernel'; do
  name=$(echo "$k" | tr -cd 'A-Za-z')
  timeout 250 $NCU --kernel-name-base mangled -k "$k" --launch-skip 4 --launch-count 1 --section SourceCounters \
    --section WarpStateStats --section SpeedOfLight --page source --print-source sass --csv \
    bun bench/tp-split.ts --cases rs --variants 'gemm,no%20comm' --samples 2 --loop-ms 0.5 > "$OUT/ncu-$name.csv" 2> "$OUT/ncu-$name.err"
  echo "$k rc=$? $(wc -l < "$OUT/ncu-$name.csv") lines"; tail -3 "$OUT/ncu-$name.err"
  gzip -f "$OUT/ncu-$name.csv"
done
