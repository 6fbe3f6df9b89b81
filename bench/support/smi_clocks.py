"""SM clock and power per GPU over a time window of an nvidia-smi log, busy samples only.

    python3 bench/support/smi_clocks.py SMI_CSV NAME T0 T1

SMI_CSV: `nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw[,...] --format=csv,noheader
-lms N`; T0, T1: epoch seconds (date +%s.%N). Prints one line per GPU: medians over the samples
drawing more than 200 W (a step's start-up and host work are idle). Under the card's power cap a
harness's duty cycle sets its clocks (bench/DECISIONS.md, "Both harnesses rest 2 ms before every
sample"), so bench/gpu-host.sh and
bench/repro/rest.sh print this beside their timings.
"""
import datetime
import sys

path, name, t0, t1 = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
rows = []
for line in open(path):
    f = [x.strip() for x in line.split(",")]
    try:
        ts = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        rows.append((ts, int(f[1]), float(f[2].split()[0]), float(f[3].split()[0])))
    except (ValueError, IndexError):
        continue
for g in sorted({r[1] for r in rows}):
    sel = [r for r in rows if r[1] == g and t0 <= r[0] <= t1 and r[3] > 200]
    if sel:
        clk, pw = sorted(r[2] for r in sel), sorted(r[3] for r in sel)
        print(f"{name:12} gpu{g}: busy {len(sel)} samples, SM clock median {clk[len(clk) // 2]:.0f} MHz "
              f"(p10 {clk[len(clk) // 10]:.0f}), power median {pw[len(pw) // 2]:.0f} W")
