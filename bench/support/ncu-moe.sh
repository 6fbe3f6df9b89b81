#!/usr/bin/env bash
# ncu-moe.sh — where the MoE up-projection's structure cost goes, per clock: the gathered-A ladder
# (bench/ladder/07_gather_cpasync.cu at config A's up-projection, each version once) and the
# product's world-1 kernels at config A (bench/moe.ts: the grouped GEMM, dispatch + up, the layer's
# halves) under ncu with the clock locked at base (--clock-control base), so the power cap does not
# enter: each kernel's duration, SM cycles, tensor-pipe share, shared-memory wavefronts, L2 and DRAM
# bytes, median per kernel name. Beside the timed tables of the same call, a ratio of cycles that
# matches the timed ratio means the cost is per clock; one near 1.0 means it is the clock.
#   bash bench/support/ncu-moe.sh DIR     (GPU host; the ladder binary from .carry/bin or built here)
set -uo pipefail
dir=$1
mkdir -p "$dir"
metrics=${NCU_MOE_METRICS:-gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,lts__t_bytes.sum,dram__bytes_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed}
bin=.carry/bin/07_gather_cpasync
if [ ! -x "$bin" ]; then
  bin="$dir/07_gather_cpasync"
  nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++20 --expt-relaxed-constexpr -I ffi/include -I cuda \
    -o "$bin" bench/ladder/07_gather_cpasync.cu > "$dir/build.log" 2>&1 || { cat "$dir/build.log"; exit 1; }
fi
ncu --clock-control base --kernel-name regex:"gemm_kernel|cpasync_gemm_kernel|gather_rows" --metrics "$metrics" --csv --print-units base --print-kernel-base mangled \
  "$bin" 32768 2048 7168 4096 once > "$dir/ladder.csv" 2> "$dir/ladder.err"
ncu --clock-control base --kernel-name regex:"dispatch_gemm_kernel|gemm_kernel" --launch-count "${NCU_MOE_KERNELS:-120}" \
  --metrics "$metrics" --csv --print-units base --print-kernel-base mangled \
  bun bench/moe.ts --configs A --worlds 1 --routing uniform --samples 1 --name ncu-moe > "$dir/product.csv" 2> "$dir/product.err"
python3 - "$dir" "$(dirname "$0")" <<'PY'
import pathlib, re, statistics, sys
sys.path.insert(0, sys.argv[2])
from ncu_csv import launches
d = pathlib.Path(sys.argv[1])
def short(name):
    for key, label in (("cpasync_gemm_kernelILNS_7ArrivalE0", "cp.async noinc (3, 7)"), ("ArrivalE1", "cp.async fenced (4)"),
                       ("ArrivalE2", "cp.async consumer fence (6, 7)"), ("ArrivalE3", "early release (8)"),
                       ("TmaRowHooks", "1-row TMA (5)"), ("DefaultHooks", "plain TMA (1, 2)"), ("gather_rows", "gather copy (2)"),
                       ("DispatchGemmHooks", "dispatch+up"), ("GroupedHooks", "grouped GEMM"), ("GemmCombineHooks", "gemm+combine")):
        if key in name:
            extra = " swiglu" if "HooksILb1E" in name else ""
            if "DispatchGemmHooks" in name: extra += " pull" if "HooksILb0ELb1E" in name or "HooksILb1ELb1E" in name else " push"
            cfg = re.search(r"ConfigILi(\d+)ELi\dELi\dELb(\d)E", name)
            if cfg: extra += f" N{cfg.group(1)}" + (" KN" if cfg.group(2) == "1" else "")
            return label + extra
    return name[:60]
def kernels(path):
    by = launches(path)
    # Launches in order; neighbours of one name within 5% of each other's duration are one row.
    runs = []
    for (i, name), m in sorted(by.items(), key=lambda kv: int(kv[0][0])):
        us = m.get("gpu__time_duration.sum", 0)
        if us <= 50: continue
        label = short(name)
        if runs and runs[-1][0] == label and abs(runs[-1][1][-1]["gpu__time_duration.sum"] - us) < 0.05 * us:
            runs[-1][1].append(m)
        else:
            runs.append((label, [m]))
    return runs
cols = [("us", "gpu__time_duration.sum", 1), ("Mcycles", "sm__cycles_elapsed.avg", 1e-6),
        ("tensor%", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed", 1),
        ("Minst", "smsp__inst_executed.sum", 1e-6), ("M smem wf", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", 1e-6),
        ("M conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", 1e-6), ("L2 MB", "lts__t_bytes.sum", 1e-6),
        ("DRAM MB", "dram__bytes_read.sum", 1e-6), ("L2%", "lts__throughput.avg.pct_of_peak_sustained_elapsed", 1)]
for f in ("ladder.csv", "product.csv"):
    p = d / f
    if not p.exists(): continue
    print(f"## {f} (launches in order, neighbours of one kernel within 5% merged: medians; n launches)")
    print(f"{'kernel':34} {'n':>3} " + " ".join(f"{c[0]:>11}" for c in cols))
    for name, ms in kernels(p):
        vals = [statistics.median([m.get(c[1], float('nan')) for m in ms]) * c[2] for c in cols]
        print(f"{name:34} {len(ms):3d} " + " ".join(f"{v:11.3f}" for v in vals))
PY
