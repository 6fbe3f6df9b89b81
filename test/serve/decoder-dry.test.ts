// The decoder's orchestration without a GPU (test/support/decoder-dry.ts, its own process because
// module mocks are process-wide): every op of prefill, a mixed prefill + decode step and the
// warm-up gets operands its validator accepts (the attention engine's plans too: the KV cache read in
// place), at world 1 and 2, and the ops come in the order of decoder.ts's comment.
import { expect, onlyUnderBun, test } from "../support/test-api.ts";
import { spawn } from "node:child_process";

import { readAll, scriptArgv } from "../support/processes.ts";

onlyUnderBun("the dry run replaces modules with bun:test's mock.module, which Deno has no counterpart of");

const SCRIPT = new URL("../support/decoder-dry.ts", import.meta.url).pathname;

test("dry run: every op's operands validate; prefill and decode run the documented sequence", async () => {
  const argv = scriptArgv(SCRIPT);
  const proc = spawn(argv[0]!, argv.slice(1), { stdio: ["ignore", "pipe", "pipe"] });
  const code = new Promise<number | null>((resolve) => proc.on("exit", resolve));
  const [out, err] = await Promise.all([readAll(proc.stdout!), readAll(proc.stderr!)]);
  if ((await code) !== 0) throw new Error(`decoder-dry.ts failed (exit ${await code}):\n${err}\n${out}`);
  const report = JSON.parse(out) as Record<string, { prefillOps: string[]; mixedOps: string[]; info: { world: number } }>;
  // One rank has nothing to communicate: its tensor-parallel GEMMs are plain GEMMs (T rows, 128 of the prefill bucket).
  const tpOp = (w: number, op: string, gemm: string) => (w > 1 ? `tp ${op} x${w}` : gemm);
  const layer = (w: number, tp: string[]) => {
    const each = (op: string) => Array(w).fill(op);
    return [...each("rmsNorm"), tpOp(w, tp[0]!, "gemm 128x512x128"), ...Array(w).fill(["rope", "kvAppend", "copyColumns", "attention"]).flat(),
      tpOp(w, tp[1]!, "gemm 128x128x256"), ...each("rmsNorm"), tpOp(w, tp[0]!, "gemm 128x512x128"), ...each("swiglu"), tpOp(w, tp[1]!, "gemm 128x128x256")];
  };
  for (const [name, r] of Object.entries(report)) {
    const w = r.info.world;
    const prefill = [...Array(w).fill("embedding"), ...layer(w, ["allGatherGemm", "gemmReduceScatter"]), ...layer(w, ["allGatherGemm", "gemmReduceScatter"]),
      ...Array(w).fill("rmsNorm"), ...(w > 1 ? Array(w).fill("allGather") : []), "embedding", "gemm 3x264x128", "sample 3 of vocab 264"];
    expect(r.prefillOps, name).toEqual(prefill);
    const tail = r.mixedOps.slice(r.mixedOps.indexOf("sample 1 of vocab 264") + 1);
    // Decode bucket 4 (3 rows): qkv and gate|up local GEMMs on every rank, o and down all-reduced (world 1: GEMMs too), 2 layers.
    expect(tail.filter((o) => o === `tp gemmAllReduce x${w}`).length, name).toBe(w > 1 ? 4 : 0);
    expect(tail.filter((o) => o.startsWith("gemm 4x")).length, name).toBe(w > 1 ? 4 * w : 8);
    expect(tail.at(-1), name).toBe("sample 3 of vocab 264");
  }
  expect(Object.keys(report).length).toBe(3);
}, 120_000);
