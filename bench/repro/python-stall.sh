#!/usr/bin/env bash
# python-stall.sh — the two-local-ranks training stall (ffi/python/tests/test_torch_layers.py, whose
# [scatter-2] case times out in its backward), with what each thread of the process waits in, every
# 3 s for 36 s: its wchan, syscall and kernel stack from /proc, which tells a wait for the GPU (an
# ioctl into the driver) from a lock (a futex), plus py-spy's or gdb's native stacks where the host
# has them, and faulthandler's Python stacks at the same times. The whole file runs, so that scatter-2
# comes after the warm-up of the cases before it, as in the suite. GPU host; weft installed by
# gpu-host.sh's pytest step first.
#   PYTORCH_CUDA_ALLOC_CONF=... bash bench/repro/python-stall.sh    (logs in $OUT/python-stall/)
#   STALL_EXAMPLE=1 bash bench/repro/python-stall.sh                 (the example at --local-ranks 2, the
#                                                                     pytest suite's size, instead)
set -uo pipefail
STALL_EXAMPLE=${STALL_EXAMPLE:-}
dir=${OUT:-/tmp/weft-out}/python-stall
mkdir -p "$dir"
cuda_gdb=$(command -v cuda-gdb || ls /usr/local/cuda/bin/cuda-gdb 2>/dev/null || echo none)
echo "tools: py-spy $(command -v py-spy || echo none), gdb $(command -v gdb || echo none), cuda-gdb $cuda_gdb, eu-stack $(command -v eu-stack || echo none)"
start=$(date +%s.%N)
PYTHONFAULTHANDLER=1 timeout 150 python3 -X faulthandler -c "
import faulthandler, sys, pytest
faulthandler.dump_traceback_later(3, repeat=True, file=open('$dir/python-stacks.txt', 'w'))
if '$STALL_EXAMPLE':
    import runpy; sys.argv = ['examples/torch_tp_mlp.py', '--local-ranks', '2', '--tokens', '2048', '--hidden', '1024',
                              '--ffn', '4096', '--steps', '3', '--repeats', '2']
    runpy.run_path('examples/torch_tp_mlp.py', run_name='__main__')
sys.exit(pytest.main(['ffi/python/tests/test_torch_layers.py', '-x', '-q', '-p', 'no:cacheprovider']))
" > "$dir/test.txt" 2>&1 &
runner=$!
for i in $(seq 1 12); do
  sleep 3
  for pid in $(pgrep -f "^python3 -X faulthandler -c"); do  # not timeout(1), whose command line holds the same text
    for task in /proc/"$pid"/task/*; do
      { echo "== t+$((3 * i))s task ${task##*/} $(cat "$task/comm" 2>/dev/null) $(grep State "$task/status" 2>/dev/null | cut -f2)"
        echo "wchan $(cat "$task/wchan" 2>/dev/null); syscall $(cut -d' ' -f1-3 "$task/syscall" 2>/dev/null)"
        cat "$task/stack" 2>/dev/null | head -8; } >> "$dir/threads.txt"
    done
    if command -v py-spy > /dev/null; then py-spy dump --native --pid "$pid" >> "$dir/py-spy.txt" 2>&1
    elif command -v gdb > /dev/null; then gdb -batch -p "$pid" -ex "thread apply all bt 25" >> "$dir/gdb.txt" 2>&1
    elif [ "$cuda_gdb" != none ] && [ "$i" = 8 ]; then
      # Once, well inside the stall (the case starts within ~10 s): attaching stops the process a while.
      timeout 60 "$cuda_gdb" -batch -p "$pid" -ex "set cuda break_on_launch none" -ex "info threads" \
        -ex "thread apply all bt 30" >> "$dir/cuda-gdb.txt" 2>&1
    fi
  done
done
wait $runner
rc=$?
echo "test_torch_layers.py: rc $rc in $(python3 -c "import time; print(round(time.time() - $start, 1))") s: $(tail -1 "$dir/test.txt")"
grep -E "^== t|^wchan" "$dir/threads.txt" 2>/dev/null | paste - - | grep -v "futex_do_wait.*0x189$" | tail -30
[ -s "$dir/cuda-gdb.txt" ] && grep -E "^Thread|^#" "$dir/cuda-gdb.txt" | grep -v "python3.12\\|_PyEval\\|PyObject" | head -80
