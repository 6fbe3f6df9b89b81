// grouped-gemm.ts — the grouped GEMM on one GPU: for every group g, out[groupOffsets[g] ..
// groupOffsets[g + 1]) = a[the same rows] · b[g], bf16 in, fp32 accumulate, bf16 out
// (torch._grouped_mm with row offsets; cuda/moe/grouped.cuh).
//
//   a             [M, K] bf16
//   b             [G, K, N] bf16, or [G, N, K] with { transB: true } (a Linear's weights per group)
//   groupOffsets  [G + 1] i32 on the GPU: read by the kernel, never by the host, so the group sizes
//                 may come from an earlier kernel (MoE routing) with no sync. Groups may be empty;
//                 rows in no group (before groupOffsets[0], from groupOffsets[G] on) are not written.
//   out           [M, N] bf16
// K and N must be multiples of 8 (16-byte rows, as TMA needs); G at most 4096. Offsets that decrease
// or leave [0, M] reject the launch with an ArgumentError naming groupOffsets (and are clamped on the
// GPU meanwhile: nothing outside out is ever written).
import { GroupedGemmChoice, GroupedGemmParams, WeftGemmFailure, WeftGemmFlags, WeftGroupedGemmFailure } from "../abi.ts";
import { completionPerDevice, type FailureDescriber } from "../completion.ts";
import { ArgumentError, TimeoutError, WeftError } from "../errors.ts";
import { check, native } from "../native.ts";
import { Stream } from "../stream.ts";
import { Tensor } from "../tensor.ts";
import { packOpLaunch, type TensorDesc } from "./gemm.ts";

export interface GroupedGemmConfig {
  /** Columns of the 128-row tile: 256 (large groups) or 128; default chosen from the shape. */
  tileN?: 128 | 256;
  /** Upper bound on the persistent grid (default every SM). */
  maxCtas?: number;
}

export interface GroupedGemmArgs {
  a: Tensor;
  b: Tensor;
  groupOffsets: Tensor;
  out: Tensor;
  /** true: b is [G, N, K]. Default false: [G, K, N]. */
  transB?: boolean;
  config?: GroupedGemmConfig;
  stream?: Stream | null;
  /** groupedGemm() only: how long to wait before rejecting with TimeoutError (ms). */
  timeoutMs?: number;
}

export interface GroupedGemmDesc {
  a: TensorDesc;
  b: TensorDesc;
  groupOffsets: TensorDesc;
  out: TensorDesc;
  transB?: boolean;
  config?: GroupedGemmConfig;
}

export interface GroupedGemmPlan {
  device: number;
  m: number;
  n: number;
  k: number;
  groups: number;
  transB: boolean;
  tileN: number;
  maxCtas: number;
}

export const GROUPED_MAX_GROUPS = 4096;
const FLAG_B_NK = WeftGemmFlags.WEFT_GEMM_B_NK;
const FAIL_OFFSETS = WeftGroupedGemmFailure.WEFT_GROUPED_FAIL_OFFSETS;
const KEYS = ["a", "b", "groupOffsets", "out", "transB", "config", "stream", "timeoutMs"];

function dims(t: TensorDesc | undefined, op: string, name: string, rank: number): number[] {
  if (t === null || typeof t !== "object" || !Array.isArray(t.shape)) throw new ArgumentError(op, name, "must be a Tensor");
  if (t.shape.length !== rank) throw new ArgumentError(op, name, `must be ${rank}-D (got shape [${t.shape.join(", ")}])`);
  return [...t.shape];
}

/** Validates a grouped GEMM's operands without touching a GPU; throws ArgumentError naming the
 * argument and the rule. */
export function planGroupedGemm(args: GroupedGemmDesc, op = "groupedGemm"): GroupedGemmPlan {
  if (args === null || typeof args !== "object") throw new ArgumentError(op, "args", "must be an object { a, b, groupOffsets, out }");
  for (const key of Object.keys(args)) if (!KEYS.includes(key)) throw new ArgumentError(op, key, `is not a groupedGemm argument (${KEYS.join(", ")})`);
  const transB = args.transB ?? false;
  if (typeof transB !== "boolean") throw new ArgumentError(op, "transB", `must be a boolean (got ${JSON.stringify(transB)})`);
  const [m, k] = dims(args.a, op, "a", 2);
  const [g, b1, b2] = dims(args.b, op, "b", 3);
  const [om, on] = dims(args.out, op, "out", 2);
  const [offs] = dims(args.groupOffsets, op, "groupOffsets", 1);
  for (const [name, t, dtype] of [["a", args.a, "bf16"], ["b", args.b, "bf16"], ["out", args.out, "bf16"], ["groupOffsets", args.groupOffsets, "i32"]] as const) {
    if (t.dtype !== dtype) throw new ArgumentError(op, name, `must be ${dtype} (got ${t.dtype})`);
    if (t.device !== args.a.device) throw new ArgumentError(op, name, `is on device ${t.device} but a is on device ${args.a.device}`);
  }
  const [kb, n] = transB ? [b2!, b1!] : [b1!, b2!];
  const bShape = transB ? "[G, N, K]" : "[G, K, N]";
  if (kb !== k) throw new ArgumentError(op, "b", `is [${g}, ${b1}, ${b2}], read as ${bShape}, so K = ${kb}, but a is [${m}, ${k}] with K = ${k}`);
  if (om !== m || on !== n) throw new ArgumentError(op, "out", `must be [${m}, ${n}] (got [${om}, ${on}])`);
  if (g! > GROUPED_MAX_GROUPS) throw new ArgumentError(op, "b", `has ${g} groups; at most ${GROUPED_MAX_GROUPS}`);
  if (offs !== g! + 1) throw new ArgumentError(op, "groupOffsets", `must have groups + 1 = ${g! + 1} entries (got ${offs})`);
  for (const [name, v] of [["a", k], ["out", n]] as const) {
    if (v! % 8 !== 0) {
      throw new ArgumentError(op, name, `has rows of ${v} elements; the TMA copy engine needs rows that are a multiple of 16 bytes (8 elements): ` +
        `K and N must be multiples of 8`);
    }
  }
  const config = args.config ?? {};
  if (typeof config !== "object" || config === null) throw new ArgumentError(op, "config", "must be an object { tileN?, maxCtas? }");
  for (const key of Object.keys(config)) if (key !== "tileN" && key !== "maxCtas") throw new ArgumentError(op, `config.${key}`, "is not a config field (tileN, maxCtas)");
  if (config.tileN !== undefined && config.tileN !== 128 && config.tileN !== 256) {
    throw new ArgumentError(op, "config.tileN", `must be 128 or 256 (got ${JSON.stringify(config.tileN)})`);
  }
  if (config.maxCtas !== undefined && !(Number.isInteger(config.maxCtas) && config.maxCtas > 0)) {
    throw new ArgumentError(op, "config.maxCtas", `must be a positive integer (got ${JSON.stringify(config.maxCtas)})`);
  }
  return { device: args.a.device, m: m!, n: n!, k: k!, groups: g!, transB, tileN: config.tileN ?? 0, maxCtas: config.maxCtas ?? 0 };
}

function prepare(args: GroupedGemmArgs, op: string) {
  for (const name of ["a", "b", "groupOffsets", "out"] as const) {
    if (!(args?.[name] instanceof Tensor)) throw new ArgumentError(op, name, "must be a Tensor");
    args[name].guard(op);
  }
  const plan = planGroupedGemm(args, op);
  const stream = args.stream ?? null;
  if (stream !== null && (!(stream instanceof Stream) || stream.device !== plan.device)) {
    throw new ArgumentError(op, "stream", `must be a Stream on device ${plan.device} (or null)`);
  }
  const timeout = args.timeoutMs;
  if (timeout !== undefined && !(typeof timeout === "number" && timeout > 0)) {
    throw new ArgumentError(op, "timeoutMs", `must be a positive number of milliseconds (got ${JSON.stringify(timeout)})`);
  }
  return { plan, stream };
}

const paramsBuffer = GroupedGemmParams.alloc();

function pack(args: GroupedGemmArgs, plan: GroupedGemmPlan, stream: Stream | null): Uint8Array {
  return GroupedGemmParams.write(paramsBuffer, {
    a: args.a.ptr, b: args.b.ptr, offsets: args.groupOffsets.ptr, out: args.out.ptr, m: plan.m, n: plan.n, k: plan.k,
    groups: plan.groups, flags: plan.transB ? FLAG_B_NK : 0, tile_n: plan.tileN, max_ctas: plan.maxCtas,
    stream: stream ? stream.handle : 0,
  });
}

const completionFor = completionPerDevice();

const describe: FailureDescriber = (reason) => {
  const op = "groupedGemm";
  const code = Number(BigInt.asIntN(32, reason & 0xffffffffn));
  const where = Number(reason >> 32n);
  if (code === FAIL_OFFSETS) {
    return new ArgumentError(op, "groupOffsets", `is not non-decreasing within [0, M]: entry ${where} breaks it (the groups were clamped; ` +
      "rows of the groups around it may hold partial results)");
  }
  if (code === WeftGemmFailure.WEFT_GEMM_FAIL_BARRIER_TIMEOUT || code === WeftGemmFailure.WEFT_GEMM_FAIL_HOOK_WAIT) {
    return new TimeoutError(`the kernel reported a failure: a barrier wait timed out (stage ${where & 0xff})`, { code: "E_TIMEOUT", op });
  }
  return new WeftError(`the kernel reported a failure: code ${code} (stage ${where & 0xff})`, { code: "E_INTERNAL", op });
};

/** Enqueues the grouped GEMM on the stream and returns `out` at once (no host wait; capturable). */
export function groupedGemmSync(args: GroupedGemmArgs): Tensor {
  const op = "groupedGemmSync";
  const { plan, stream } = prepare(args, op);
  check(native().weft_grouped_gemm(pack(args, plan, stream), null), op);
  return args.out;
}

/** The grouped GEMM; resolves with `out` once the kernel has finished (and checked the offsets). */
export async function groupedGemm(args: GroupedGemmArgs): Promise<Tensor> {
  const op = "groupedGemm";
  const { plan, stream } = prepare(args, op);
  const completion = completionFor(plan.device);
  const slot = completion.slot();
  check(native().weft_grouped_gemm(pack(args, plan, stream), packOpLaunch(slot)), op);
  await completion.promise(slot.seq, op, describe, 0, args.timeoutMs ?? 60_000);
  return args.out;
}

/** The configuration groupedGemm would run (overrides applied, the rest chosen). */
export function groupedGemmConfigFor(args: GroupedGemmArgs): { tileN: number; ctas: number; band: number; stages: number } {
  const op = "groupedGemmConfigFor";
  const { plan, stream } = prepare(args, op);
  const buf = GroupedGemmChoice.alloc();
  check(native().weft_grouped_gemm_choose(pack(args, plan, stream), buf), op);
  const c = GroupedGemmChoice.read(buf);
  return { tileN: c.tile_n, ctas: c.ctas, band: c.band, stages: c.stages };
}
