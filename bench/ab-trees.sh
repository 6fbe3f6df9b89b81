#!/usr/bin/env bash
# ab-trees.sh — one benchmark in two trees of weft, interleaved round by round in one device call, so
# that a change is measured against its base on the same card, at the same clocks, in the same run.
#
#   bash .gpu/enter.sh bash bench/ab-trees.sh ROUNDS DIR -- COMMAND...
#
# The head tree is this checkout (build/libweft.so, or .carry/libweft.so.xz unpacked there). The
# base tree is unpacked once from .carry/base-src.tar.xz (`git archive BASE | xz`) with its library
# from .carry/base-libweft.so.xz; AB_BASE=NAME takes .carry/NAME-src.tar.xz and NAME-libweft.so.xz
# instead, so one call can hold several bases. Round r runs COMMAND in both trees, base first on odd rounds and
# head first on even ones, each with OUT=DIR/<tree>-<r> so that the files a bench writes land apart
# (bench/gemm.ts and bench/tp-split.ts copy their results to $OUT). stdout goes to the same folder.
set -uo pipefail
rounds=$1 dir=$2
shift 2
[ "${1:-}" = "--" ] && shift
head_root=$(pwd)
base=${AB_BASE:-base}
base_root=/tmp/weft-$base
if [ ! -d "$base_root/lib" ]; then
  mkdir -p "$base_root/build"
  xz -dc ".carry/$base-src.tar.xz" | tar -x -C "$base_root"
  xz -dc ".carry/$base-libweft.so.xz" > "$base_root/build/libweft.so"
  ln -sfn "$head_root/node_modules" "$base_root/node_modules"
fi
if [ -f .carry/libweft.so.xz ] && [ ! -f build/libweft.so ]; then
  mkdir -p build && xz -dc .carry/libweft.so.xz > build/libweft.so
fi
mkdir -p "$dir"
rc=0
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order="base head"; else order="head base"; fi
  for tree in $order; do
    root=$base_root; [ "$tree" = head ] && root=$head_root
    out="$dir/$tree-$r"; mkdir -p "$out"
    (cd "$root" && OUT="$out" WEFT_LIBRARY="$root/build/libweft.so" timeout "${AB_STEP_TIMEOUT:-300}" "$@" \
      > "$out/stdout.txt" 2>&1) || { rc=1; echo "ab-trees: $tree round $r failed (rc $?)"; tail -5 "$out/stdout.txt"; }
    echo "ab-trees: $tree round $r done"
  done
done
exit $rc
