#!/usr/bin/env bash
# python-stall.sh — the two-local-ranks training stall (ffi/python/tests/test_torch_layers.py
# [scatter-2]), with what each of the process's threads waits in, 12 s in: its wchan, syscall and
# kernel stack from /proc (no gdb on the GPU host), which tells a wait for the GPU (an ioctl into the
# driver) from a lock (a futex). GPU host, weft installed by gpu-host.sh's pytest step first.
#   PYTORCH_CUDA_ALLOC_CONF=... bash bench/repro/python-stall.sh    (logs in $OUT/python-stall/)
set -uo pipefail
dir=${OUT:-/tmp/weft-out}/python-stall
mkdir -p "$dir"
t='ffi/python/tests/test_torch_layers.py::test_tp_mlp_forward_and_backward_match_one_device_fp32[scatter-2]'
start=$(date +%s.%N)
timeout 90 python3 -m pytest "$t" -x -q -p no:cacheprovider -o faulthandler_timeout=12 > "$dir/scatter-2.txt" 2>&1 &
runner=$!
sleep 12
for pid in $(pgrep -f "pytest ffi/python/tests/test_torch_layers.py::"); do
  for task in /proc/"$pid"/task/*; do
    { echo "== task ${task##*/} $(cat "$task/comm" 2>/dev/null) state $(grep State "$task/status" 2>/dev/null | cut -f2)"
      echo "wchan $(cat "$task/wchan" 2>/dev/null); syscall $(cut -d' ' -f1-3 "$task/syscall" 2>/dev/null)"
      cat "$task/stack" 2>/dev/null | head -12; } >> "$dir/threads.txt"
  done
done
wait $runner
rc=$?
echo "scatter-2: rc $rc in $(python3 -c "import time; print(round(time.time() - $start, 1))") s: $(tail -1 "$dir/scatter-2.txt")"
grep -c "^== task" "$dir/threads.txt" 2>/dev/null | sed 's/^/threads listed: /'
grep -E "^== task|^wchan" "$dir/threads.txt" 2>/dev/null | paste - - | awk '{$1=$1}1' | sort | uniq -c | sort -rn | head -20
