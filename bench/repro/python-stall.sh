#!/usr/bin/env bash
# python-stall.sh — the two-local-ranks training stall (ffi/python/tests/test_torch_layers.py
# [scatter-2]) under torch's two allocators, then bench/repro/jax_exit.py (GPU host; weft installed
# by gpu-host.sh's pytest step first). Logs into $OUT/python-stall/.
set -uo pipefail
dir=${OUT:-/tmp/weft-out}/python-stall
mkdir -p "$dir"
t='ffi/python/tests/test_torch_layers.py::test_tp_mlp_forward_and_backward_match_one_device_fp32[scatter-2]'
for alloc in native backend:cudaMallocAsync; do
  conf=""; [ "$alloc" = native ] || conf=$alloc
  start=$(date +%s.%N)
  PYTORCH_CUDA_ALLOC_CONF=$conf timeout 90 python3 -m pytest "$t" -x -q -p no:cacheprovider -o faulthandler_timeout=12 \
    > "$dir/scatter-2-${alloc//:/-}.txt" 2>&1
  rc=$?
  echo "scatter-2 allocator $alloc: rc $rc in $(python3 -c "import time; print(round(time.time() - $start, 1))") s: $(tail -1 "$dir/scatter-2-${alloc//:/-}.txt")"
done
timeout 200 python3 bench/repro/jax_exit.py 2>&1 | tee "$dir/jax-exit.txt"
