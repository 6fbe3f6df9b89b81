#!/usr/bin/env bash
# Why does tp.ts's process run GEMMs slower than torch_tp.py's? Both harnesses at rest 0 and at
# --rest-ms R (equal idle GPU time before every sample), AG and RS at two shapes, with nvidia-smi
# sampling clocks and power every 25 ms; per phase: SM clock / power medians per GPU.
#   bash .gpu/enter.sh bash bench/repro/rest.sh [R]        (GPU host; logs in $OUT)
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp}
REST=${1:-2}
SHAPES=8192x8192x8192,4096x14336x4096
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 WEFT_COMM_TIMEOUT_MS=3000
export WEFT_LIBRARY=$PWD/build/libweft.so
TORCHRUN=$(command -v torchrun || echo "python3 -m torch.distributed.run")
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 25 > "$OUT/smi.csv" &
SMI=$!
phase() { # name, command...
  local name=$1; shift
  echo "$name start $(date +%s.%N)" >> "$OUT/phases.txt"
  "$@" > "$OUT/$name.txt" 2>&1; echo "$name rc $?"
  echo "$name end $(date +%s.%N)" >> "$OUT/phases.txt"
}
for rest in 0 "$REST"; do
  phase torch-rest$rest timeout 120 $TORCHRUN --nproc-per-node=2 bench/peers/torch_tp.py --only ag,rs --shapes $SHAPES --rest-ms $rest --out "$OUT/torch-rest$rest.json"
  TORCH_TP_JSON=$OUT/torch-rest$rest.json phase tp-rest$rest timeout 120 bun bench/tp.ts --only ag,rs --shapes $SHAPES --rest-ms $rest --name x-rest$rest
  grep -E "ag_gemm|gemm_rs" "$OUT/torch-rest$rest.txt"
  grep -E "^(allGatherGemm|gemmReduceScatter) " "$OUT/tp-rest$rest.txt" | cut -c1-400
done
kill $SMI
python3 - "$OUT" <<'PY'
import sys, datetime
out = sys.argv[1]
ph = {}
for l in open(f"{out}/phases.txt"):
    name, what, t = l.split()
    ph.setdefault(name, {})[what] = float(t)
rows = []
for l in open(f"{out}/smi.csv"):
    f = [x.strip() for x in l.split(",")]
    try:
        ts = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        rows.append((ts, int(f[1]), float(f[2].split()[0]), float(f[3].split()[0]), float(f[4])))
    except Exception:
        continue
for name, p in ph.items():
    for g in (0, 1):
        # busy samples only (power > 300 W): the phase's start-up and host work are idle
        sel = [r for r in rows if r[1] == g and p["start"] <= r[0] <= p["end"] and r[3] > 300]
        if sel:
            clk = sorted(r[2] for r in sel); pw = sorted(r[3] for r in sel)
            print(f"{name:12} gpu{g} busy samples {len(sel):4d}  sm MHz median {clk[len(clk)//2]:.0f} (p10 {clk[len(clk)//10]:.0f})  W median {pw[len(pw)//2]:.0f}  temp max {max(r[4] for r in sel):.0f}")
PY
