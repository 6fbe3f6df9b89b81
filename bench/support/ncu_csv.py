"""ncu_csv.py: one ncu --csv report (--print-units base) as {(launch ID, kernel name): {metric: value}},
every launch apart, gpu__time_duration.sum in µs whatever unit ncu wrote it in. Read by
bench/support/ncu-attention.sh and ncu-moe.sh."""
import csv
import pathlib
from collections import defaultdict

# ncu writes "ns" / "us" / "ms" (older versions: "nsecond", ...).
_TO_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def launches(path: pathlib.Path) -> dict:
    rows = [line for line in path.read_text(errors="replace").splitlines() if line.startswith('"')]
    by = defaultdict(dict)
    for r in csv.DictReader(rows):
        v = float(r["Metric Value"].replace(",", "") or "nan")
        if r["Metric Name"] == "gpu__time_duration.sum":
            v *= _TO_US.get(r.get("Metric Unit", ""), 1.0)
        by[(r["ID"], r["Kernel Name"])][r["Metric Name"]] = v
    return by
