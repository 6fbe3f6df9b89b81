#!/usr/bin/env bash
# bench/repro/clocks.ts with nvidia-smi sampling every 25 ms; prints clock and power per phase.
#   bash .gpu/enter.sh bash bench/repro/clocks.sh   (GPU host; logs in $OUT)
OUT=${OUT:-/tmp}
nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader -lms 25 > "$OUT/smi.csv" &
SMI=$!
sleep 0.5
bun bench/repro/clocks.ts > "$OUT/clocks.txt" 2>&1
kill $SMI
python3 - "$OUT" <<'PY'
import json, sys, datetime
out = sys.argv[1]
ph = [json.loads(l) for l in open(f"{out}/clocks.txt") if l.startswith("{")]
rows = []
for l in open(f"{out}/smi.csv"):
    f = [x.strip() for x in l.split(",")]
    try:
        ts = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp() * 1000
    except Exception:
        continue
    rows.append((ts, int(f[1]), float(f[2].split()[0]), float(f[4].split()[0])))
for p in ph:
    for g in (0, 1):
        sel = [r for r in rows if r[1] == g and p["t0"] + 300 <= r[0] <= p["t1"]]
        if sel:
            clk = sorted(r[2] for r in sel); pw = sorted(r[3] for r in sel)
            print(f'{p["phase"]:6} gpu{g} us/launch {p["us"]:.1f}  sm MHz median {clk[len(clk)//2]:.0f} (min {clk[0]:.0f})  W median {pw[len(pw)//2]:.0f}  n={len(sel)}')
PY
