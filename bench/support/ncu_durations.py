"""ncu_durations.py: kernel durations that ncu measured in two trees (bench/ab-trees.sh folders
<tree>-<round>/stdout.txt, ncu --csv output with gpu__time_duration.sum), per kernel and launch
shape: the median in each tree over every round, and head / base. The GPU's own clock of each
kernel, with none of a host loop's launch gaps, so a difference between trees that a loop timing
shows and this does not lies outside the kernels.
    python3 bench/support/ncu_durations.py DIR"""
import csv
import pathlib
import statistics
import sys
from collections import defaultdict


def durations(path: pathlib.Path) -> dict:
    rows = [line for line in path.read_text(errors="replace").splitlines() if line.startswith('"')]
    out = defaultdict(list)
    for r in csv.DictReader(rows):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = r["Kernel Name"].split("(")[0][-60:]
        key = f'{name} grid {r.get("Grid Size", "?")} block {r.get("Block Size", "?")}'
        # ncu writes "ns" / "us" / "ms" (older versions: "nsecond", ...); every value is kept in µs.
        unit = r.get("Metric Unit", "ns")
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[unit]
        out[key].append(float(r["Metric Value"].replace(",", "")) * scale)
    return out


def main(folder: str) -> None:
    trees = {"base": defaultdict(list), "head": defaultdict(list)}
    for d in sorted(pathlib.Path(folder).glob("*-*")):
        tree = d.name.split("-")[0]
        if tree in trees and (d / "stdout.txt").exists():
            for k, v in durations(d / "stdout.txt").items():
                trees[tree][k].extend(v)
    print(f"{'kernel (launch shape)':<90} {'n':>5} {'base us':>9} {'head us':>9} {'head/base':>9}")
    for k in sorted(set(trees["base"]) | set(trees["head"])):
        b, h = trees["base"].get(k, []), trees["head"].get(k, [])
        mb = statistics.median(b) if b else float("nan")
        mh = statistics.median(h) if h else float("nan")
        print(f"{k:<90} {min(len(b), len(h)):>5} {mb:>9.2f} {mh:>9.2f} {mh / mb if b and h else float('nan'):>9.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
