#!/usr/bin/env bash
# One call on the GPU host: checks the machine, runs what is asked, and packs every log (and every
# bench/results file the steps rewrote) into $OUT/gpu-host.tgz: one file, since the device tool
# returns only a few files per call.
#   bash .gpu/enter.sh bash bench/gpu-host.sh info test demo [step ...]
# REQUIRE_GPU is the host's GPU count (test/support/gpu.ts: a suite that fits the host must run).
# Steps:  info -> weft info;  test -> REQUIRE_GPU=N bun test;  demo -> the README's demo;
#         quickstart -> the README's API example;
#         torch -> bench/peers/torch_tp.py under torchrun (2 ranks); a later `tp` step reads it;
#         pytest -> pip install ./ffi/python, then REQUIRE_GPU=N pytest ffi/python/tests (PYTEST_SELECT: some
#           tests only; PYTEST_TEST_TIMEOUT: each test's bound where pytest-timeout is installed, 120 s);
#           a test still running at 2/3 of its bound (PYTEST_DUMP_AFTER s) dumps every thread's stack, native
#           ones too where gdb exists;
#         serve -> bench/serve-load.ts, two ranks on GPU 0, 8 and 64 clients (64 for 60 s), auto and sequential;
#         mlp -> examples/torch_tp_mlp.py with 2 ranks on GPU 0; mlp2 -> the same under torchrun (2 GPUs);
#         torch-ring -> bench/peers/torch_ring_attention.py under torchrun (2 ranks): torch_ring.json;
#         NAME.cu -> bench/NAME.cu built with nvcc (linked against build/libweft.so) and run;
#         ladder/NAME.cu -> bench/ladder/NAME.cu built against the library's headers (cuda/,
#         ffi/include; never linked with libweft.so) and run (bench/ladder/README.md);
#         t/FILE[,FILE...] -> REQUIRE_GPU=N bun test on those files only;
#         sanitize -> bench/sanitize.sh (compute-sanitizer memcheck + racecheck over each fused TP op);
#         soak -> bench/soak.ts (1000 checked back-to-back runs of each fused TP op, world 2 on GPU 0);
#         sass/PATTERN -> per kernel of build/libweft.so whose name matches PATTERN: HGMMA, LDL/STL counts;
#         sassdump/PATTERN -> the whole SASS of those kernels, into sass-PATTERN.txt;
#         ab/gemm, ab/tp-split -> that bench in the base tree and this one, interleaved (bench/ab-trees.sh;
#           AB_ROUNDS rounds, default 2; AB_ITERATIONS: bench/gemm.ts's timed iterations, default 40;
#           AB_CASES, AB_DECODE_M: tp-split's cases and decode rows, default decode,rs,ar and 16,128,512);
#         ab/attention -> bench/attention.ts's D 128 rows, ours only (no torch, no ring), in both trees
#           (AB_BASE names the base: bench/ab-trees.sh);
#         ncu/attention -> our attention kernel and cuDNN's under ncu, per case (NCU_CASES): cycles, clock,
#           tensor pipe share (bench/support/ncu-attention.sh);
#         ncu/moe -> the gathered-A ladder (07) and the world-1 MoE kernels at config A under ncu at base clock:
#           cycles, tensor pipe, shared-memory wavefronts, L2 and DRAM bytes (bench/support/ncu-moe.sh);
#         ncu/sass -> one launch each of the world-1 grouped up, dispatch + up and the ladder's plain and
#           gathered GEMMs under ncu's full set: every raw metric and per-SASS-instruction stall samples
#           (bench/support/ncu-sass.sh; CSVs of a few MB, packed with the logs);
#         ab/ncu-tp-split -> tp-split's one-GPU decode case (AB_DECODE_M rows, default 128) under ncu in
#           both trees: each kernel's GPU duration, head / base (bench/support/ncu_durations.py);
#         test1 -> bun test without REQUIRE_GPU (a one-GPU host: the two-GPU suites skip);
#         deno-info, deno-demo, deno-test -> info, demo and test (DENO_TEST_FILES, or all) under Deno (deno on PATH:
#           bench/pack-deno.sh's .gpu-deno/enter.sh);
#         anything else -> bun bench/<name>.ts (repro/rank-spread: bench/repro/rank-spread.ts)
# A library built elsewhere travels as .carry/libweft.so.xz (the whole build/ folder is too large to
# carry beside .gpu/); it is unpacked to build/libweft.so when that is missing. Ladder programs
# built elsewhere travel as .carry/bin/NAME and are used instead of building them here.
# A step may carry its own bound in seconds, `test:150`; STEP_TIMEOUT (default 300) bounds the rest. GPU-side waits are bounded by WEFT_COMM_TIMEOUT_MS
# (3 s here), so a broken peer fails fast.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export WEFT_COMM_TIMEOUT_MS=${WEFT_COMM_TIMEOUT_MS:-3000}
export REQUIRE_GPU=${REQUIRE_GPU:-$(nvidia-smi -L 2>/dev/null | grep -c "^GPU")}
OUT=${OUT:-/tmp/weft-out}
LOGS=$(mktemp -d)
mkdir -p "$OUT" "$LOGS/results"
touch "$LOGS/.start"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$LOGS/nvidia-smi.txt" 2>&1
# Clocks and power every 50 ms through the whole call; after each step, its medians per GPU
# (clocks.txt, bench/support/smi_clocks.py).
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw --format=csv,noheader -lms 50 > "$LOGS/smi.csv" 2>/dev/null &
SMI=$!
export SMI_CSV="$LOGS/smi.csv"  # bench/support/smi-window.ts: clocks per timed window
trap 'kill $SMI 2>/dev/null' EXIT
step_clocks() {  # name, start epoch, end epoch
  python3 bench/support/smi_clocks.py "$LOGS/smi.csv" "$@" >> "$LOGS/clocks.txt"
}
if [ ! -f build/libweft.so ] && [ -f .carry/libweft.so.xz ]; then
  mkdir -p build && xz -dc .carry/libweft.so.xz > build/libweft.so
fi
# weft's permissions under Deno (README "From Deno"); the tests add starting workers and all of sys,
# as test/run-suites.mjs does.
DENO_RUN="--allow-ffi --allow-env --allow-net --allow-read --allow-write --allow-sys=hostname,uid"
DENO_TEST="--no-check --allow-ffi --allow-env --allow-net --allow-read --allow-write --allow-sys --allow-run --preload test/support/preload.ts"
rc=0
# Packed after every step, so a call cut short by the device's limit still returns what ran.
pack() {
  find bench/results -newer "$LOGS/.start" -type f -exec cp {} "$LOGS/results/" \;
  tar -czf "$OUT/gpu-host.tgz.part" -C "$LOGS" . && mv "$OUT/gpu-host.tgz.part" "$OUT/gpu-host.tgz"
}
step_rc() {  # name, status: a failed step fails the call and is named in the summary
  [ "$2" -eq 0 ] || { rc=1; echo "STEP FAILED: $1 (rc $2)"; }
}
for spec in "$@"; do
  step=${spec%%:*}
  T=${STEP_TIMEOUT:-300}
  [ "$spec" = "$step" ] || T=${spec#*:}
  echo "=== $step (bound ${T} s)"
  log="$LOGS/bench-${step//\//-}.txt"
  t0=$(date +%s.%N)
  case "$step" in
    info) timeout "$T" bun lib/cli.ts info > "$LOGS/info.txt" 2>&1; step_rc "$step" $?; cat "$LOGS/info.txt" ;;
    quickstart) timeout "$T" bun examples/quickstart.ts > "$LOGS/quickstart.txt" 2>&1; step_rc "$step" $?; tail -5 "$LOGS/quickstart.txt" ;;
    demo) timeout "$T" bun examples/demo.ts > "$LOGS/demo.txt" 2>&1; step_rc "$step" $?; tail -6 "$LOGS/demo.txt" ;;
    test) timeout "$T" bun test --timeout 300000 > "$LOGS/test.txt" 2>&1; step_rc "$step" $?
          grep -E "^\(fail\)|^ *[0-9]+ (pass|fail|skip)$|^Ran " "$LOGS/test.txt" ;;
    test1) env -u REQUIRE_GPU timeout "$T" bun test --timeout 300000 > "$LOGS/test1.txt" 2>&1; step_rc "$step" $?
           grep -E "^\(fail\)|^ *[0-9]+ (pass|fail|skip)$|^Ran " "$LOGS/test1.txt" ;;
    deno-info) timeout "$T" deno run $DENO_RUN lib/cli.ts info > "$LOGS/deno-info.txt" 2>&1; step_rc "$step" $?; cat "$LOGS/deno-info.txt" ;;
    deno-demo) timeout "$T" deno run $DENO_RUN examples/demo.ts > "$LOGS/deno-demo.txt" 2>&1; step_rc "$step" $?; tail -6 "$LOGS/deno-demo.txt" ;;
    deno-test) NO_COLOR=1 timeout "$T" deno test $DENO_TEST ${DENO_TEST_FILES:-test/} > "$LOGS/deno-test.txt" 2>&1; step_rc "$step" $?
               grep -E "\.\.\. FAILED|^(ok|FAILED) \|" "$LOGS/deno-test.txt" ;;
    torch) TORCHRUN=$(command -v torchrun || echo "python3 -m torch.distributed.run")
           timeout "$T" $TORCHRUN --nproc-per-node=2 bench/peers/torch_tp.py --out "$LOGS/torch_tp.json" > "$LOGS/torch.txt" 2>&1
           step_rc "$step" $?; export TORCH_TP_JSON="$LOGS/torch_tp.json"; tail -3 "$LOGS/torch.txt" ;;
    pytest) dump_after=${PYTEST_DUMP_AFTER:-$(( ${PYTEST_TEST_TIMEOUT:-$T} * 2 / 3 ))}
            # Native stacks too, where gdb exists: once, dump_after seconds in, of every pytest process.
            if command -v gdb > /dev/null; then
              ( sleep "$dump_after"; for pid in $(pgrep -f "python3 -m pytest"); do
                  gdb -batch -p "$pid" -ex "thread apply all bt 30" > "$LOGS/pytest-gdb-$pid.txt" 2>&1; done ) &
            fi
            { python3 -m pip install --no-index --no-deps --force-reinstall ./ffi/python &&
              per_test=$(python3 -c "import pytest_timeout" 2>/dev/null && echo "--timeout=${PYTEST_TEST_TIMEOUT:-120}")
              timeout "$T" python3 -m pytest ${PYTEST_SELECT:-ffi/python/tests} -v -rfEs --tb=short --durations=12 $per_test \
                -o faulthandler_timeout="$dump_after"; } > "$LOGS/pytest.txt" 2>&1
            step_rc "$step" $?; grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$LOGS/pytest.txt" | tail -40 ;;
    serve) timeout "$T" bun bench/serve-load.ts --world 2 --one-gpu --clients 8,64 --duration 15 --duration-max 60 \
             > "$log" 2>&1; step_rc "$step" $?; tail -30 "$log" ;;
    mlp) timeout -s ABRT "$T" python3 -X faulthandler examples/torch_tp_mlp.py --local-ranks 2 > "$log" 2>&1  # ABRT: stacks
         step_rc "$step" $?; tail -60 "$log" ;;
    mlp2) TORCHRUN=$(command -v torchrun || echo "python3 -m torch.distributed.run")
          timeout "$T" $TORCHRUN --nproc-per-node=2 examples/torch_tp_mlp.py > "$log" 2>&1; step_rc "$step" $?; tail -8 "$log" ;;
    sanitize) SANITIZE_TIMEOUT=$((T / 6)) OUT=$LOGS bash bench/sanitize.sh > "$log" 2>&1; step_rc "$step" $?; cat "$log" ;;
    sass/*) cuobjdump --dump-sass build/libweft.so 2>/dev/null | awk -v pat="${step#sass/}" '
              /Function :/ { f = $3 } f ~ pat && /HGMMA/ { h[f]++ } f ~ pat && /(LDL|STL)/ { l[f]++ }
              END { for (k in h) printf "%5d HGMMA %4d LDL/STL  %s\n", h[k], l[k], k }' > "$log" 2>&1
            step_rc "$step" $?; cat "$log" ;;
    sassdump/*) cuobjdump --dump-sass build/libweft.so 2>/dev/null | awk -v pat="${step#sassdump/}" '
              /Function :/ { f = $3 } f ~ pat' > "$LOGS/sass-${step#sassdump/}.txt" 2>&1
            step_rc "$step" $?; wc -l "$LOGS/sass-${step#sassdump/}.txt" ;;
    t/*) files=${step#t/}
         timeout "$T" bun test --timeout 300000 ${files//,/ } > "$log" 2>&1; step_rc "$step" $?
         grep -E "^\(fail\)|^ *[0-9]+ (pass|fail|skip)$|^Ran " "$log" ;;
    ab/gemm) AB_STEP_TIMEOUT=$T bash bench/ab-trees.sh "${AB_ROUNDS:-2}" "$LOGS/ab-gemm" -- bun bench/gemm.ts --iterations "${AB_ITERATIONS:-40}" > "$log" 2>&1
             step_rc "$step" $?; cat "$log" ;;
    ab/tp-split) AB_STEP_TIMEOUT=$T bash bench/ab-trees.sh "${AB_ROUNDS:-2}" "$LOGS/ab-tp-split" -- \
                   bun bench/tp-split.ts --cases "${AB_CASES:-decode,rs,ar}" --decode-m "${AB_DECODE_M:-16,128,512}" --devices 0 \
                     --variants gemm,gemm+done,op > "$log" 2>&1
                 step_rc "$step" $?; cat "$log" ;;
    ab/attention) AB_STEP_TIMEOUT=$T bash bench/ab-trees.sh "${AB_ROUNDS:-2}" "$LOGS/ab-attention" -- bun bench/attention.ts \
                    --no-torch --no-ring --only "D128 S8k full,D128 S32k full,D128 S8k full GQA8,D128 S8k causal" > "$log" 2>&1
                  step_rc "$step" $?; tail -4 "$log"; grep -H ": ours" "$LOGS"/ab-attention/*/stdout.txt ;;
    ncu/moe) bash bench/support/ncu-moe.sh "$LOGS/ncu-moe" > "$log" 2>&1; step_rc "$step" $?; tail -30 "$log" ;;
    ncu/sass) bash bench/support/ncu-sass.sh "$LOGS/ncu-sass" > "$log" 2>&1; step_rc "$step" $?; tail -5 "$log" ;;
    ncu/attention) bash bench/support/ncu-attention.sh "$LOGS/ncu-attention" > "$log" 2>&1; step_rc "$step" $?; tail -20 "$log" ;;
    ab/ncu-tp-split) AB_STEP_TIMEOUT=$T bash bench/ab-trees.sh "${AB_ROUNDS:-2}" "$LOGS/ab-ncu-tp-split" -- \
                   ncu --clock-control none --launch-skip 200 --launch-count "${AB_NCU_KERNELS:-300}" \
                     --metrics gpu__time_duration.sum --csv \
                   bun bench/tp-split.ts --cases decode --decode-m "${AB_DECODE_M:-128}" --devices 0 \
                     --variants gemm,gemm+done,op --samples 3 > "$log" 2>&1
                     step_rc "$step" $?; python3 bench/support/ncu_durations.py "$LOGS/ab-ncu-tp-split" | tee -a "$log" ;;
    ladder/*.cu) bin="$LOGS/$(basename "$step" .cu)"
          if [ -x ".carry/bin/$(basename "$step" .cu)" ]; then
            cp ".carry/bin/$(basename "$step" .cu)" "$bin" && timeout "$T" "$bin" > "$log" 2>&1
          else nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++20 --expt-relaxed-constexpr -I ffi/include -I cuda \
            -o "$bin" "bench/$step" > "$log" 2>&1 && timeout "$T" "$bin" >> "$log" 2>&1
          fi
          step_rc "$step" $?; rm -f "$bin"; tail -40 "$log" ;;
    torch-ring) TORCHRUN=$(command -v torchrun || echo "python3 -m torch.distributed.run")
           timeout "$T" $TORCHRUN --nproc-per-node=2 bench/peers/torch_ring_attention.py --out "$LOGS/results/torch_ring.json" \
             > "$LOGS/torch-ring.txt" 2>&1; step_rc "$step" $?; tail -3 "$LOGS/torch-ring.txt" ;;
    *.cu) bin="$LOGS/$(basename "$step" .cu)"
          nvcc -arch=sm_90a -O3 -std=c++17 -I ffi/include -o "$bin" "bench/$step" -L build -lweft \
            -Xlinker -rpath -Xlinker "$PWD/build" > "$log" 2>&1 && timeout "$T" "$bin" >> "$log" 2>&1
          step_rc "$step" $?; rm -f "$bin"; tail -40 "$log" ;;
    *) timeout "$T" bun "bench/$step.ts" > "$log" 2>&1; step_rc "$step" $?; tail -40 "$log" ;;
  esac
  step_clocks "$step" "$t0" "$(date +%s.%N)"; grep "^$step " "$LOGS/clocks.txt"
  pack
done
exit $rc
