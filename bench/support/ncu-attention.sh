#!/usr/bin/env bash
# ncu-attention.sh — our attention kernel and cuDNN's (torch SDPA) under ncu, one case at a time:
# each kernel's GPU duration, elapsed SM cycles, the clock they imply, the tensor pipe's active share
# and the instructions issued. Cycles do not depend on the clock, so cycles(cuDNN) / cycles(ours) is
# the per-clock speed ratio, apart from what the power cap does to either (bench/attention.ts's
# table, with the clocks of the same call beside it). ncu serialises the kernels (--clock-control
# none: the card's own clocks); one metric pass per replay, caches flushed between.
#   bash bench/support/ncu-attention.sh DIR        (GPU host; NCU_CASES: bench/attention.ts names)
set -uo pipefail
dir=$1
mkdir -p "$dir"
metrics=gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,dram__bytes_read.sum,lts__t_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed
IFS=',' read -ra cases <<< "${NCU_CASES:-D128 S8k full,D128 S32k full,D128 S8k causal}"
for name in "${cases[@]}"; do
  tag=${name// /_}
  # Ours: the launches after bench/attention.ts's warm-up (the reference kernel is not matched).
  ncu --clock-control none --kernel-name regex:attention_kernel --launch-skip 4 --launch-count 2 --metrics "$metrics" --csv --print-units base \
    bun bench/attention.ts --no-torch --no-ring --only "$name" --samples 1 --rounds 1 > "$dir/ours-$tag.csv" 2> "$dir/ours-$tag.err"
  # cuDNN: every kernel of the peer's run; the report keeps those over 100 µs (the attention calls).
  json=$(bun -e "
    const n = process.argv[1]; const m = /^D(\d+) S(\d+)k (full|causal)( GQA(\d+))?$/.exec(n);
    console.log(JSON.stringify([{ name: n, batch: 1, seq: +m[2] * 1024, heads: 32, kvHeads: m[5] ? +m[5] : 32, headDim: +m[1], causal: m[3] === 'causal' }]));" "$name")
  ncu --clock-control none --launch-skip 0 --launch-count 40 --metrics "$metrics" --csv --print-units base \
    python3 bench/peers/torch_attention.py --cases "$json" --out "$dir/torch-$tag.json" --samples 1 --loop-ms 1 --backends cudnn \
    > "$dir/cudnn-$tag.csv" 2> "$dir/cudnn-$tag.err"
done
python3 - "$dir" "$(dirname "$0")" <<'PY'
import pathlib, statistics, sys
sys.path.insert(0, sys.argv[2])
from ncu_csv import launches
d = pathlib.Path(sys.argv[1])
def kernels(path):
    return [(k[1][:70], m) for k, m in launches(path).items() if m.get("gpu__time_duration.sum", 0) > 100]
print(f"{'case':18} {'who':6} {'us':>9} {'Mcycles':>9} {'GHz':>6} {'tensor%':>8} {'Minst':>8} {'DRAM MB':>8} {'L2 MB':>8} {'L2%':>5}  kernel")
for f in sorted(d.glob("*.csv")):
    who, tag = f.stem.split("-", 1)
    for name, m in kernels(f):
        us, cyc = m["gpu__time_duration.sum"], m["sm__cycles_elapsed.avg"]
        print(f"{tag.replace('_', ' '):18} {who:6} {us:9.1f} {cyc / 1e6:9.3f} {cyc / us / 1e3:6.3f} "
              f"{m.get('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed', float('nan')):8.1f} "
              f"{m.get('smsp__inst_executed.sum', float('nan')) / 1e6:8.1f} {m.get('dram__bytes_read.sum', float('nan')) / 1e6:8.1f} {m.get('lts__t_bytes.sum', float('nan')) / 1e6:8.1f} {m.get('lts__throughput.avg.pct_of_peak_sustained_elapsed', float('nan')):5.1f}  {name}")
PY
