#!/usr/bin/env bash
# ab-libs.sh — one command run against several builds of libweft.so, interleaved round by round in
# one device call (WEFT_LIBRARY picks the build, lib/native.ts): for changes inside the library
# only, where the bench and tests are the same in every variant (a change to the bench itself needs
# bench/ab-trees.sh). Variant NAME is .carry/NAME-libweft.so.xz. Round r runs COMMAND once per
# variant, the variants' order rotating by round, with stdout and stderr in DIR/NAME-r.txt; then, for
# bench/moe.ts, the median of each timing per config and variant (its JSON lines).
#   bash .gpu/enter.sh bash bench/ab-libs.sh ROUNDS DIR NAME[,NAME...] -- COMMAND...
set -uo pipefail
rounds=$1 dir=$2 names=$3
shift 3
[ "${1:-}" = "--" ] && shift
IFS=',' read -ra variants <<< "$names"
mkdir -p "$dir"
for v in "${variants[@]}"; do
  [ -f ".carry/$v-libweft.so.xz" ] || { echo "ab-libs.sh: .carry/$v-libweft.so.xz is missing" >&2; exit 2; }
  xz -dc ".carry/$v-libweft.so.xz" > "$dir/$v.so"
done
rc=0
n=${#variants[@]}
for ((r = 1; r <= rounds; r++)); do
  for ((i = 0; i < n; i++)); do
    v=${variants[$(((i + r - 1) % n))]}
    WEFT_LIBRARY="$dir/$v.so" timeout "${AB_STEP_TIMEOUT:-300}" "$@" > "$dir/$v-$r.txt" 2>&1 || { rc=1; echo "ab-libs.sh: $v round $r failed"; }
  done
done
python3 - "$dir" "$names" <<'PY'
import json, pathlib, statistics, sys
from collections import defaultdict
d, names = pathlib.Path(sys.argv[1]), sys.argv[2].split(",")
ms = defaultdict(lambda: defaultdict(list))
for v in names:
    for f in sorted(d.glob(f"{v}-*.txt")):
        for line in f.read_text(errors="replace").splitlines():
            if line.startswith("{") and '"ms"' in line:
                j = json.loads(line)
                for k, x in j["ms"].items():
                    ms[(j["config"], j.get("world", 1), j.get("routing", ""), k)][v].append(x)
if ms:
    print("config world routing timing " + " ".join(names) + " (median ms)" + (f"  {names[-1]}/{names[0]}" if len(names) > 1 else ""))
    for key, by in sorted(ms.items()):
        meds = [statistics.median(by[v]) if by[v] else float("nan") for v in names]
        ratio = f"  {meds[-1] / meds[0]:.3f}" if len(names) > 1 and meds[0] else ""
        print(" ".join(map(str, key)) + " " + " ".join(f"{m:.3f}" for m in meds) + ratio)
PY
rm -f "$dir"/*.so
exit $rc
