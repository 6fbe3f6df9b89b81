// tp-validation.ts — the rules of the tensor-parallel ops' arguments and config, checked in TS
// before anything reaches a GPU (and testable without one): every failure is an ArgumentError
// naming the argument and the rule. lib/ops/tp.ts says what the shapes mean.
import { ArgumentError, checkInt } from "../errors.ts";
import type { Tensor } from "../tensor.ts";
import { matrix, type TensorDesc } from "./gemm.ts";

export type TpOp = "allGatherGemm" | "gemmReduceScatter" | "gemmAllReduce";
export type TpPath = "auto" | "fused" | "sequential";
export type TpMover = "auto" | "ctas" | "copyEngine" | "exchange";

/** Overrides of the cost model's choices; every field is optional and validated. */
export interface TpConfig {
  /** "fused": one persistent kernel (an error where the shape does not allow it); "sequential": our
   * GEMM and our collective one after the other; "auto" (default): whichever the cost model predicts
   * faster. */
  path?: TpPath;
  /** Who moves data between the GPUs on the fused path. allGatherGemm: "copyEngine" (default) copies
   * A's rows with the copy engines, no SM taken; "ctas" uses some CTAs of the kernel (see commCtas).
   * gemmReduceScatter / gemmAllReduce: "ctas" (the GEMM's epilogue stores and adds into the peers'
   * outputs over NVLink) or "copyEngine" (the epilogue stores the peers' partials locally, the copy
   * engines move them, the owner adds them in its epilogue; needs M a multiple of 128 x world size).
   * gemmAllReduce also: "exchange" (every rank's epilogue stores each partial tile into every peer
   * and adds theirs: decode sizes). "auto" picks by the cost model. */
  mover?: TpMover;
  /** All-gather with mover "ctas": how many CTAs move data (the rest run the GEMM). */
  commCtas?: number;
  /** Columns per CTA tile: 128 or 256 (all-reduce also 64; with mover "exchange", 256 only when the
   * tiles fit one wave of the GPU's SMs). */
  tileN?: 64 | 128 | 256;
  /** Tile-order band height in tile rows; must divide a shard's tile rows (M / W / 128). Default: the
   * largest power of two up to the GEMM engine's band (16 at 256-wide tiles; all-reduce: 4) that
   * divides them. */
  groupM?: number;
}

export interface AllGatherGemmArgs {
  a: Tensor;
  b: Tensor;
  out: Tensor;
  /** Receives allgather(a) [M, K] too (the backward pass needs it). */
  gatheredA?: Tensor;
  /** true: b is [n, K] and out = a · bᵀ (the weights layout). Default false: b is [K, n]. */
  transB?: boolean;
  config?: TpConfig;
}

export interface GemmScatterArgs {
  a: Tensor;
  b: Tensor;
  /** Symmetric (comm.empty): the peers write into it. */
  out: Tensor;
  transB?: boolean;
  config?: TpConfig;
}

/** A tensor as the validation sees it (a Tensor, or a plain description in CPU tests). */
export interface TpTensorDesc extends TensorDesc {
  /** A symmetric tensor of this communicator. */
  readonly symmetric?: boolean;
}

export interface TpShape {
  m: number;
  n: number;
  k: number;
  mShard: number;
  transB: boolean;
}

export const OPS: Record<TpOp, number> = { allGatherGemm: 0, gemmReduceScatter: 1, gemmAllReduce: 2 };
export const PATHS: Record<TpPath, number> = { auto: 0, fused: 1, sequential: 2 };
export const MOVERS: Record<TpMover, number> = { auto: 0, ctas: 1, copyEngine: 2, exchange: 4 };
export const MOVER_NAMES = ["none", "ctas", "copyEngine", "none", "exchange"] as const;
export const FLAG_B_NK = 1;

export function opName(op: TpOp): string {
  return `Communicator.${op}`;
}

function bf16Matrix(t: TpTensorDesc | undefined, op: string, name: string): [number, number] {
  const rc = matrix(t, op, name);
  if (t!.dtype !== "bf16") throw new ArgumentError(op, name, `must be bf16 (got ${t!.dtype})`);
  return rc;
}

function positiveInt(op: string, name: string, v: unknown, max = 2 ** 31 - 1): number {
  return checkInt(op, name, v, 1, max);
}

/** Checks a config override; returns it with 0 / "auto" for every field left to the cost model. */
export function validateTpConfig(config: TpConfig | undefined, op: string, tpOp: TpOp, maxCtas: number): Required<TpConfig> {
  const c = config ?? {};
  if (typeof c !== "object" || c === null) throw new ArgumentError(op, "config", "must be an object");
  for (const key of Object.keys(c)) {
    if (!["path", "mover", "commCtas", "tileN", "groupM"].includes(key)) {
      throw new ArgumentError(op, `config.${key}`, "is not a config field (path, mover, commCtas, tileN, groupM)");
    }
  }
  const path = c.path ?? "auto";
  if (typeof path !== "string" || !Object.hasOwn(PATHS, path)) throw new ArgumentError(op, "config.path", `must be 'auto', 'fused' or 'sequential' (got ${JSON.stringify(path)})`);
  const mover = c.mover ?? "auto";
  if (typeof mover !== "string" || !Object.hasOwn(MOVERS, mover)) {
    throw new ArgumentError(op, "config.mover", `must be 'auto', 'ctas', 'copyEngine' or 'exchange' (got ${JSON.stringify(mover)})`);
  }
  if (mover === "exchange" && tpOp !== "gemmAllReduce") throw new ArgumentError(op, "config.mover", "'exchange' applies to gemmAllReduce only");
  const commCtas = c.commCtas === undefined ? 0 : positiveInt(op, "config.commCtas", c.commCtas, maxCtas - 1);
  if (commCtas > 0 && (tpOp !== "allGatherGemm" || mover === "copyEngine")) {
    throw new ArgumentError(op, "config.commCtas", "applies to allGatherGemm's CTA mover only (mover 'ctas')");
  }
  const allowed = tpOp === "gemmAllReduce" ? [64, 128, 256] : [128, 256];
  if (c.tileN !== undefined && !allowed.includes(c.tileN)) {
    throw new ArgumentError(op, "config.tileN", `must be one of ${allowed.join(", ")} for ${tpOp} (got ${JSON.stringify(c.tileN)})`);
  }
  const groupM = c.groupM === undefined ? 0 : positiveInt(op, "config.groupM", c.groupM);
  return { path, mover, commCtas, tileN: (c.tileN ?? 0) as 64 | 128 | 256, groupM };
}

/** Validates one rank's operands of a tensor-parallel op without touching a GPU. Throws
 * ArgumentError naming the argument and the rule; returns this rank's GEMM problem. */
export function validateTp(op: TpOp, world: number, device: number,
  args: { a: TpTensorDesc; b: TpTensorDesc; out: TpTensorDesc; gatheredA?: TpTensorDesc; transB?: boolean }): TpShape {
  if (typeof op !== "string" || !Object.hasOwn(OPS, op)) {
    throw new ArgumentError("validateTp", "op", `must be 'allGatherGemm', 'gemmReduceScatter' or 'gemmAllReduce' (got ${JSON.stringify(op)})`);
  }
  const name = opName(op);
  checkInt(name, "world", world, 1);
  checkInt(name, "device", device, 0);
  if (args === null || typeof args !== "object") throw new ArgumentError(name, "args", "must be an object { a, b, out, ... }");
  const transB = args.transB ?? false;
  if (typeof transB !== "boolean") throw new ArgumentError(name, "transB", `must be a boolean (got ${JSON.stringify(transB)})`);
  const [ar, ac] = bf16Matrix(args.a, name, "a");
  const [b0, b1] = bf16Matrix(args.b, name, "b");
  const [or, oc] = bf16Matrix(args.out, name, "out");
  for (const [arg, t] of [["a", args.a], ["b", args.b], ["out", args.out]] as const) {
    if (t.device !== device) throw new ArgumentError(name, arg, `is on device ${t.device} but this rank's communicator is on device ${device}`);
  }
  const [bn, bk] = transB ? [b0, b1] : [b1, b0];
  const bShape = transB ? "[n, K]" : "[K, n]";
  if (bk !== ac) {
    throw new ArgumentError(name, "b", `is [${b0}, ${b1}], read as ${bShape}${transB ? " (transB)" : ""}, so K = ${bk}, but a has ${ac} columns`);
  }
  if (oc !== bn) throw new ArgumentError(name, "out", `has ${oc} columns but b gives n = ${bn}`);
  const k = ac;
  const n = bn;
  let m: number;
  let mShard: number;
  if (op === "allGatherGemm") {
    m = or;
    mShard = Math.ceil(m / world);
    if (ar !== mShard) {
      throw new ArgumentError(name, "a", `has ${ar} rows but out has M = ${m} rows, so each of the ${world} ranks holds ceil(M / ${world}) = ${mShard}`);
    }
    if (args.gatheredA !== undefined) {
      const [gr, gc] = bf16Matrix(args.gatheredA, name, "gatheredA");
      if (args.gatheredA.device !== device) throw new ArgumentError(name, "gatheredA", `is on device ${args.gatheredA.device} but this rank is on device ${device}`);
      if (gr !== m || gc !== k) throw new ArgumentError(name, "gatheredA", `must be [${m}, ${k}] (got [${gr}, ${gc}])`);
    }
  } else {
    if (args.gatheredA !== undefined) throw new ArgumentError(name, "gatheredA", "is an allGatherGemm output");
    m = ar;
    mShard = Math.ceil(m / world);
    const rows = op === "gemmReduceScatter" ? mShard : m;
    if (or !== rows) {
      throw new ArgumentError(name, "out", `has ${or} rows but must have ${op === "gemmReduceScatter" ? `ceil(M / ${world}) = ${mShard}` : `M = ${m}`} (a is [${ar}, ${ac}])`);
    }
    if (!args.out.symmetric) {
      throw new ArgumentError(name, "out", "must be a symmetric tensor of this communicator (comm.empty): the peers write into it");
    }
  }
  return { m, n, k, mShard, transB };
}

