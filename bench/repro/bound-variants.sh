#!/usr/bin/env bash
# Temporary: the overlap bound with the fused kernel's stage-out variants beside the same copies, and
# the chunk counts later in the next tile (count_at 6), at (4096, 14336, 4096).
set -u
cd "$(dirname "$0")/../.."
export WEFT_LIBRARY=$PWD/build/libweft.so
timeout 250 bun bench/tp-split.ts --cases rs,ar-ce --samples 15 --also 'at6:WEFT_TP_CE_COUNT_AT=6' 2>&1 | grep -v garbage
