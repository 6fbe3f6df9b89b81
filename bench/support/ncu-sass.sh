#!/usr/bin/env bash
# ncu-sass.sh — where the gathering kernel's extra cycles sit: one launch each of the world-1
# config-A up-projection kernels, the grouped GEMM (TMA A) and the fused dispatch + up (PULL,
# cp.async A), and of the ladder's plain GEMM and its consumer-fenced cp.async version
# (bench/ladder/07_gather_cpasync.cu, version 6), under ncu's full set at base clock. Keeps every raw
# metric (NAME-raw.csv) and the per-SASS-instruction stall samples (NAME-sass.csv), then prints the
# consumers' k-loop samples by stall reason per kernel (the instructions executed as often as the
# kernel's wgmmas; a wgmma's samples that ncu names no reason for are its warpgroup-arrive stalls).
#   bash bench/support/ncu-sass.sh DIR     (GPU host; the ladder binary from .carry/bin or built here)
set -uo pipefail
dir=$1
mkdir -p "$dir"
bin=.carry/bin/07_gather_cpasync
if [ ! -x "$bin" ]; then
  bin="$dir/07_gather_cpasync"
  nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++20 --expt-relaxed-constexpr -I ffi/include -I cuda \
    -o "$bin" bench/ladder/07_gather_cpasync.cu > "$dir/build.log" 2>&1 || { cat "$dir/build.log"; exit 1; }
fi
profile() {  # name, kernel regex (mangled), launch-skip, command...
  local name=$1 re=$2 skip=$3; shift 3
  ncu --clock-control base --kernel-name-base mangled --kernel-name "regex:$re" --launch-skip "$skip" --launch-count 1 \
    --set full --import-source no -f -o "$dir/$name" "$@" > "$dir/$name.log" 2>&1
  ncu -i "$dir/$name.ncu-rep" --page raw --csv > "$dir/$name-raw.csv" 2>&1
  ncu -i "$dir/$name.ncu-rep" --page source --csv --print-source sass > "$dir/$name-sass.csv" 2>&1
  rm -f "$dir/$name.ncu-rep"
}
moe=(bun bench/moe.ts --configs A --worlds 1 --routing uniform --samples 1 --name ncu-sass)
profile pull 'dispatch_gemm_kernel.*DispatchGemmHooksILb0ELb1E' 2 "${moe[@]}"
profile grouped 'gemm_kernel.*GroupedHooksILb0E' 2 "${moe[@]}"
profile ladder-plain 'gemm_kernel.*DefaultHooks' 0 "$bin" 32768 2048 7168 4096 once
profile ladder-v6 'cpasync_gemm_kernelILNS_7ArrivalE2' 0 "$bin" 32768 2048 7168 4096 once
python3 - "$dir" pull grouped ladder-v6 ladder-plain <<'PY'
import collections, csv, sys
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
out, names = {}, sys.argv[2:]
for name in names:
    rows = list(csv.reader(open(f"{sys.argv[1]}/{name}-sass.csv")))
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    h = rows[head]; ix = {k: i for i, k in enumerate(h)}
    data = [r for r in rows[head + 1:] if len(r) == len(h)]
    runs = lambda r: num(r[ix["Instructions Executed"]])
    loop = collections.Counter(runs(r) for r in data if "HGMMA" in r[1]).most_common(1)[0][0]
    st = collections.defaultdict(float)
    for r in data:
        if abs(runs(r) - loop) > 0.1 * loop: continue
        named = 0.0
        for k, i in ix.items():
            if k.startswith("stall_") and "Not" not in k:
                st[k[6:]] += num(r[i]); named += num(r[i])
        if "HGMMA" in r[1]: st["warpgroup_arrive"] += num(r[ix["Warp Stall Sampling (All Samples)"]]) - named
    out[name] = st
print("consumers' k-loop samples by stall reason")
print(f"{'':20s}" + "".join(f"{n:>14s}" for n in names))
for k in sorted(out[names[0]], key=lambda k: -out[names[0]][k]):
    if max(out[n].get(k, 0) for n in names) >= 300:
        print(f"{k:20s}" + "".join(f"{out[n].get(k, 0):14.0f}" for n in names))
PY
