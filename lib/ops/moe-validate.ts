// moe-validate.ts — argument rules of the MoE ops (lib/ops/moe.ts), checked on the CPU before
// anything crosses the ABI. Each function takes tensor descriptions (a Tensor, or a plain
// { shape, dtype, device } in CPU tests) and throws ArgumentError naming the argument and the rule.
import { ArgumentError, checkInt } from "../errors.ts";
import type { TensorDesc } from "./gemm.ts";

/** weft.h WEFT_MOE_MAX_EXPERTS and WEFT_MOE_BLOCK_ROWS. */
export const MOE_MAX_EXPERTS = 1024;
export const MOE_BLOCK_ROWS = 128;

export interface MoeRouteShape {
  tokens: number;
  experts: number;
  topk: number;
  logitsDtype: "f32" | "bf16";
  normalize: boolean;
}

export interface MoeDispatchShape {
  world: number;
  tokens: number;
  hidden: number;
  experts: number;
  localExperts: number;
  topk: number;
  maxTokens: number;
  /** 0: the worst case (the plan computes it). */
  capacity: number;
  /** Routed from logits inside the dispatch kernel. */
  route: boolean;
  normalize: boolean;
  logitsDtype: "f32" | "bf16";
  ctas: number;
}

function matrixOf(t: TensorDesc | undefined, op: string, name: string): [number, number] {
  if (t === null || typeof t !== "object" || !Array.isArray(t.shape)) throw new ArgumentError(op, name, "must be a Tensor");
  if (t.shape.length !== 2) throw new ArgumentError(op, name, `must be 2-D (got shape [${t.shape.join(", ")}])`);
  return [t.shape[0]!, t.shape[1]!];
}

function onDevice(t: TensorDesc, device: number, op: string, name: string): void {
  if (t.device !== device) throw new ArgumentError(op, name, `is on device ${t.device} but this op runs on device ${device}`);
}

function boolArg(v: unknown, op: string, name: string): boolean {
  if (v === undefined) return false;
  if (typeof v !== "boolean") throw new ArgumentError(op, name, `must be a boolean (got ${JSON.stringify(v)})`);
  return v;
}

function logitsDtype(t: TensorDesc, op: string): "f32" | "bf16" {
  if (t.dtype !== "f32" && t.dtype !== "bf16") throw new ArgumentError(op, "logits", `must be f32 or bf16 (got ${t.dtype})`);
  return t.dtype;
}

/** A [≥ tokens, cols] tensor of `dtype` on `device`. */
function routingTensor(t: TensorDesc | undefined, op: string, name: string, dtype: string, tokens: number, cols: number,
  device: number): void {
  const [r, c] = matrixOf(t, op, name);
  if (t!.dtype !== dtype) throw new ArgumentError(op, name, `must be ${dtype} (got ${t!.dtype})`);
  if (c !== cols) throw new ArgumentError(op, name, `has ${c} columns but topk is ${cols}: it must be [tokens, topk], contiguous`);
  if (r < tokens) throw new ArgumentError(op, name, `has ${r} rows but tokens is ${tokens}`);
  onDevice(t!, device, op, name);
}

function tokensOf(v: unknown, rows: number, op: string): number {
  return v === undefined ? rows : checkInt(op, "tokens", v, 0, rows);
}

export interface RouteDesc {
  logits: TensorDesc;
  topk: number;
  normalize?: boolean;
  tokens?: number;
  ids?: TensorDesc;
  weights?: TensorDesc;
}

/** moeRoute: logits [≥ tokens, E] f32 or bf16; ids / weights, when given, [≥ tokens, topk]. */
export function validateMoeRoute(args: RouteDesc, op = "moeRoute"): MoeRouteShape {
  if (args === null || typeof args !== "object") throw new ArgumentError(op, "args", "must be an object { logits, topk, ... }");
  const [rows, experts] = matrixOf(args.logits, op, "logits");
  const dtype = logitsDtype(args.logits, op);
  if (experts > MOE_MAX_EXPERTS) throw new ArgumentError(op, "logits", `has ${experts} experts (columns); at most ${MOE_MAX_EXPERTS}`);
  const topk = checkInt(op, "topk", args.topk, 1, experts);
  const tokens = tokensOf(args.tokens, rows, op);
  const normalize = boolArg(args.normalize, op, "normalize");
  if (args.ids !== undefined) routingTensor(args.ids, op, "ids", "i32", tokens, topk, args.logits.device);
  if (args.weights !== undefined) routingTensor(args.weights, op, "weights", "f32", tokens, topk, args.logits.device);
  return { tokens, experts, topk, logitsDtype: dtype, normalize };
}

export interface DispatchDesc {
  x: TensorDesc;
  tokens?: number;
  experts?: number;
  topkIds?: TensorDesc;
  topkWeights?: TensorDesc;
  logits?: TensorDesc;
  topk?: number;
  normalize?: boolean;
  maxTokens?: number;
  capacity?: number;
  config?: { ctas?: number };
}

const DISPATCH_KEYS = ["x", "tokens", "experts", "topkIds", "topkWeights", "logits", "topk", "normalize", "maxTokens", "capacity", "config"];

/** comm.moeDispatch on one rank of `world`: x [≥ tokens, H] bf16 with H a multiple of 8; the routing
 * as topkIds [≥ tokens, k] i32 (+ experts), or as logits [≥ tokens, E] (+ topk) to route on the GPU. */
export function validateMoeDispatch(world: number, device: number, maxCtas: number, args: DispatchDesc,
  op = "Communicator.moeDispatch"): MoeDispatchShape {
  if (args === null || typeof args !== "object") throw new ArgumentError(op, "args", "must be an object { x, topkIds | logits, ... }");
  for (const key of Object.keys(args)) {
    if (!DISPATCH_KEYS.includes(key)) throw new ArgumentError(op, key, `is not a moeDispatch argument (${DISPATCH_KEYS.join(", ")})`);
  }
  const [xRows, hidden] = matrixOf(args.x, op, "x");
  if (args.x.dtype !== "bf16") throw new ArgumentError(op, "x", `must be bf16 (got ${args.x.dtype})`);
  if (hidden % 8 !== 0) throw new ArgumentError(op, "x", `has rows of ${hidden} elements; the row movers need a multiple of 8 (16 bytes)`);
  onDevice(args.x, device, op, "x");
  const tokens = tokensOf(args.tokens, xRows, op);
  const route = args.logits !== undefined;
  let experts: number, topk: number, dtype: "f32" | "bf16" = "f32";
  if (route) {
    const [lr, le] = matrixOf(args.logits, op, "logits");
    dtype = logitsDtype(args.logits!, op);
    onDevice(args.logits!, device, op, "logits");
    if (lr < tokens) throw new ArgumentError(op, "logits", `has ${lr} rows but tokens is ${tokens}`);
    if (args.experts !== undefined && args.experts !== le) {
      throw new ArgumentError(op, "experts", `is ${args.experts} but logits has ${le} columns (one per expert)`);
    }
    experts = le;
    if (args.topk === undefined) throw new ArgumentError(op, "topk", "must be given with logits (how many experts each token goes to)");
  } else {
    if (args.topkIds === undefined) throw new ArgumentError(op, "topkIds", "must be given (or logits, to route on the GPU)");
    if (args.experts === undefined) throw new ArgumentError(op, "experts", "must be given with topkIds (the number of experts E)");
    experts = checkInt(op, "experts", args.experts, 1, MOE_MAX_EXPERTS);
    if (args.normalize !== undefined) throw new ArgumentError(op, "normalize", "applies to routing from logits only");
  }
  if (experts > MOE_MAX_EXPERTS) throw new ArgumentError(op, "experts", `must be at most ${MOE_MAX_EXPERTS} (got ${experts})`);
  if (experts % world !== 0) {
    throw new ArgumentError(op, "experts", `is ${experts}, which does not split over ${world} ranks: E must be a multiple of the world size`);
  }
  const idsCols = args.topkIds !== undefined ? matrixOf(args.topkIds, op, "topkIds")[1] : undefined;
  topk = checkInt(op, "topk", args.topk ?? idsCols, 1, experts);
  if (args.topkIds !== undefined) routingTensor(args.topkIds, op, "topkIds", "i32", tokens, topk, device);
  if (args.topkWeights !== undefined) routingTensor(args.topkWeights, op, "topkWeights", "f32", tokens, topk, device);
  const normalize = boolArg(args.normalize, op, "normalize");
  const maxTokens = args.maxTokens === undefined ? tokens : checkInt(op, "maxTokens", args.maxTokens, tokens, 2 ** 31 - 1);
  if (world * maxTokens * topk + (experts / world) * MOE_BLOCK_ROWS >= 2 ** 31) {
    throw new ArgumentError(op, "maxTokens", `gives world x maxTokens x topk = ${world * maxTokens * topk} rows, at or above 2^31`);
  }
  let capacity = 0;
  if (args.capacity !== undefined) {
    capacity = checkInt(op, "capacity", args.capacity, MOE_BLOCK_ROWS, 2 ** 31 - MOE_BLOCK_ROWS);
    if (capacity % MOE_BLOCK_ROWS !== 0) {
      throw new ArgumentError(op, "capacity", `must be a multiple of ${MOE_BLOCK_ROWS} rows (each expert's rows are padded to it; got ${capacity})`);
    }
  }
  const config = args.config ?? {};
  if (typeof config !== "object" || config === null) throw new ArgumentError(op, "config", "must be an object { ctas? }");
  for (const key of Object.keys(config)) if (key !== "ctas") throw new ArgumentError(op, `config.${key}`, "is not a config field (ctas)");
  const ctas = config.ctas === undefined ? 0 : checkInt(op, "config.ctas", config.ctas, 1, maxCtas);
  return { world, tokens, hidden, experts, localExperts: experts / world, topk, maxTokens, capacity, route, normalize, logitsDtype: dtype, ctas };
}

export interface CombineDesc {
  hidden: TensorDesc;
  out: TensorDesc;
  topkWeights?: TensorDesc;
  config?: { ctas?: number };
}

/** comm.moeCombine: hidden [capacity, H] bf16 (the experts' outputs in the dispatch's receive
 * layout), out [≥ tokens, H] bf16, topkWeights [≥ tokens, k] f32 (required unless the dispatch
 * routed from logits: then its own weights are the default). */
export function validateMoeCombine(d: MoeDispatchShape, capacity: number, device: number, maxCtas: number, args: CombineDesc,
  hasRoutedWeights: boolean, op = "Communicator.moeCombine"): { ctas: number } {
  if (args === null || typeof args !== "object") throw new ArgumentError(op, "args", "must be an object { dispatch, hidden, out, ... }");
  const [hr, hc] = matrixOf(args.hidden, op, "hidden");
  if (args.hidden.dtype !== "bf16") throw new ArgumentError(op, "hidden", `must be bf16 (got ${args.hidden.dtype})`);
  if (hr !== capacity || hc !== d.hidden) {
    throw new ArgumentError(op, "hidden", `must be [${capacity}, ${d.hidden}] (the dispatch's receive layout: capacity x hidden; got [${hr}, ${hc}])`);
  }
  onDevice(args.hidden, device, op, "hidden");
  const [or, oc] = matrixOf(args.out, op, "out");
  if (args.out.dtype !== "bf16") throw new ArgumentError(op, "out", `must be bf16 (got ${args.out.dtype})`);
  if (oc !== d.hidden || or < d.tokens) throw new ArgumentError(op, "out", `must be [${d.tokens}, ${d.hidden}] or taller (got [${or}, ${oc}])`);
  onDevice(args.out, device, op, "out");
  if (args.topkWeights !== undefined) routingTensor(args.topkWeights, op, "topkWeights", "f32", d.tokens, d.topk, device);
  else if (!hasRoutedWeights) {
    throw new ArgumentError(op, "topkWeights", "must be given: the dispatch took topkIds without topkWeights");
  }
  const config = args.config ?? {};
  if (typeof config !== "object" || config === null) throw new ArgumentError(op, "config", "must be an object { ctas? }");
  for (const key of Object.keys(config)) if (key !== "ctas") throw new ArgumentError(op, `config.${key}`, "is not a config field (ctas)");
  return { ctas: config.ctas === undefined ? 0 : checkInt(op, "config.ctas", config.ctas, 1, maxCtas) };
}
