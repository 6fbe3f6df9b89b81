// moe-gemm-validate.ts — argument rules of the MoE ops with an expert GEMM (lib/ops/moe-gemm.ts,
// moe-layer.ts), checked on the CPU before anything crosses the ABI; tensors are Tensors or plain
// { shape, dtype, device } descriptions (CPU tests). Each rule throws an ArgumentError naming the
// argument.
import { WeftMoeMover } from "../abi/enums.ts";
import { ArgumentError, checkInt } from "../errors.ts";
import type { TensorDesc } from "./gemm.ts";
import type { MoeDispatchShape } from "./moe-validate.ts";

export type MoeActivation = "none" | "swiglu";
export type MoeMover = "push" | "pull";

export interface ExpertGemmConfig {
  /** CTAs of the fused kernel (default: every SM of the rank's budget). */
  ctas?: number;
  /** Columns of the 128-row math tile (default chosen from the shape). */
  tileN?: 128 | 256;
  /** moeDispatchGemm: how the owner's own rows reach its GEMM (default "push": bench/DECISIONS.md, "MoE rows are pushed into place, not gathered by the GEMM's producer"; weft.h WeftMoeMover). */
  mover?: MoeMover;
}

export interface ExpertGemmShape {
  /** Output columns: I (up-projection) or H (down-projection). */
  n: number;
  /** Input columns: H (up) or I (down). */
  k: number;
  swiglu: boolean;
  transW: boolean;
  ctas: number;
  tileN: number;
  /** weft.h WeftMoeMover: 0 auto, 1 push, 2 pull. */
  mover: number;
}

export const MOVERS: Record<MoeMover, number> = { push: WeftMoeMover.WEFT_MOE_MOVER_PUSH, pull: WeftMoeMover.WEFT_MOE_MOVER_PULL };

function dims3(t: TensorDesc | undefined, op: string, name: string): [number, number, number] {
  if (t === null || typeof t !== "object" || !Array.isArray(t.shape)) throw new ArgumentError(op, name, "must be a Tensor");
  if (t.shape.length !== 3) throw new ArgumentError(op, name, `must be 3-D [local experts, ·, ·] (got shape [${t.shape.join(", ")}])`);
  if (t.dtype !== "bf16") throw new ArgumentError(op, name, `must be bf16 (got ${t.dtype})`);
  return [t.shape[0]!, t.shape[1]!, t.shape[2]!];
}

function boolArg(v: unknown, op: string, name: string): boolean {
  if (v === undefined) return false;
  if (typeof v !== "boolean") throw new ArgumentError(op, name, `must be a boolean (got ${JSON.stringify(v)})`);
  return v;
}

export function activationOf(v: unknown, op: string): MoeActivation {
  if (v === undefined) return "none";
  if (v !== "none" && v !== "swiglu") throw new ArgumentError(op, "activation", `must be "none" or "swiglu" (got ${JSON.stringify(v)})`);
  return v;
}

/** config of an op with an expert GEMM: { ctas?, tileN?, mover? } (mover only with allowMover). */
export function validateExpertConfig(config: unknown, maxCtas: number, op: string, allowMover: boolean): Pick<ExpertGemmShape, "ctas" | "tileN" | "mover"> {
  const c = (config ?? {}) as ExpertGemmConfig;
  if (typeof c !== "object" || c === null) throw new ArgumentError(op, "config", "must be an object { ctas?, tileN?, mover? }");
  const keys = allowMover ? ["ctas", "tileN", "mover"] : ["ctas", "tileN"];
  for (const key of Object.keys(c)) if (!keys.includes(key)) throw new ArgumentError(op, `config.${key}`, `is not a config field (${keys.join(", ")})`);
  const ctas = c.ctas === undefined ? 0 : checkInt(op, "config.ctas", c.ctas, 1, maxCtas);
  if (c.tileN !== undefined && c.tileN !== 128 && c.tileN !== 256) {
    throw new ArgumentError(op, "config.tileN", `must be 128 or 256 (got ${JSON.stringify(c.tileN)})`);
  }
  if (c.mover !== undefined && !(c.mover in MOVERS)) throw new ArgumentError(op, "config.mover", `must be "push" or "pull" (got ${JSON.stringify(c.mover)})`);
  return { ctas, tileN: c.tileN ?? 0, mover: c.mover === undefined ? 0 : MOVERS[c.mover] };
}

/** moeDispatchGemm's w1: [E/W, H, N] (or [E/W, N, H] with transW), N = I, or 2I (gate | up) with
 * activation "swiglu"; I a multiple of 8. */
export function validateUpWeights(d: MoeDispatchShape, w1: TensorDesc | undefined, activation: unknown, transW: unknown,
  device: number, op: string): { inter: number; swiglu: boolean; transW: boolean } {
  const swiglu = activationOf(activation, op) === "swiglu";
  const t = boolArg(transW, op, "transW");
  const [g, b1, b2] = dims3(w1, op, "w1");
  if (w1!.device !== device) throw new ArgumentError(op, "w1", `is on device ${w1!.device} but this op runs on device ${device}`);
  const [k, n] = t ? [b2, b1] : [b1, b2];
  const layout = t ? "[E/W, N, H]" : "[E/W, H, N]";
  if (g !== d.localExperts) throw new ArgumentError(op, "w1", `has ${g} experts but this rank owns E/W = ${d.localExperts}`);
  if (k !== d.hidden) throw new ArgumentError(op, "w1", `is [${g}, ${b1}, ${b2}], read as ${layout}, so H = ${k}, but x has H = ${d.hidden}`);
  if (swiglu && n % 2 !== 0) throw new ArgumentError(op, "w1", `has N = ${n} columns; with activation "swiglu" it is gate | up, 2I columns`);
  const inter = swiglu ? n / 2 : n;
  if (inter % 8 !== 0) {
    throw new ArgumentError(op, "w1", `gives I = ${inter}; the hidden rows must be a multiple of 8 elements (16 bytes, as TMA needs)`);
  }
  return { inter, swiglu, transW: t };
}

/** moeGemmCombine's hidden [capacity, I] and w2 [E/W, I, H] (or [E/W, H, I] with transW). */
export function validateDownWeights(d: MoeDispatchShape, capacity: number, hidden: TensorDesc | undefined, w2: TensorDesc | undefined,
  transW: unknown, device: number, op: string): { inter: number; transW: boolean } {
  const t = boolArg(transW, op, "transW");
  if (hidden === null || typeof hidden !== "object" || !Array.isArray(hidden.shape)) throw new ArgumentError(op, "hidden", "must be a Tensor");
  if (hidden.shape.length !== 2 || hidden.dtype !== "bf16") {
    throw new ArgumentError(op, "hidden", `must be a 2-D bf16 tensor [capacity, I] (got [${hidden.shape.join(", ")}] ${hidden.dtype})`);
  }
  const [hr, inter] = [hidden.shape[0]!, hidden.shape[1]!];
  if (hr !== capacity) throw new ArgumentError(op, "hidden", `has ${hr} rows; the layout's receive buffer has ${capacity} (capacity)`);
  if (hidden.device !== device) throw new ArgumentError(op, "hidden", `is on device ${hidden.device} but this op runs on device ${device}`);
  if (inter % 8 !== 0) throw new ArgumentError(op, "hidden", `has rows of ${inter} elements; I must be a multiple of 8 (16 bytes, as TMA needs)`);
  const [g, b1, b2] = dims3(w2, op, "w2");
  if (w2!.device !== device) throw new ArgumentError(op, "w2", `is on device ${w2!.device} but this op runs on device ${device}`);
  const [k, n] = t ? [b2, b1] : [b1, b2];
  const layout = t ? "[E/W, H, I]" : "[E/W, I, H]";
  if (g !== d.localExperts) throw new ArgumentError(op, "w2", `has ${g} experts but this rank owns E/W = ${d.localExperts}`);
  if (k !== inter || n !== d.hidden) {
    throw new ArgumentError(op, "w2", `is [${g}, ${b1}, ${b2}], read as ${layout}: it must be [${g}, ${t ? `${d.hidden}, ${inter}` : `${inter}, ${d.hidden}`}] ` +
      `(I = ${inter} from hidden, H = ${d.hidden} from the layout)`);
  }
  return { inter, transW: t };
}
