// nn.ts — the small layers of a transformer decoder on one GPU (cuda/nn): embedding lookup, RMSNorm
// (optionally fused with the residual add), rotary position embedding, SwiGLU, a slotted KV cache
// with its attention, and a column copy. Sampling is in ./sample.ts.
//
//   embedding({ table, ids, out });                         // out[r] = table[ids[r]]
//   rmsNorm({ x, weight, out, residual });                  // residual += x; out = norm(residual) * weight
//   rope({ x: qkv, positions, heads: hq + hkv, headDim });  // rotate q and k heads in place
//   swiglu({ x: gateUp, out });                             // out = silu(gate) * up
//   kvAppend({ src: qkv, kColumn, vColumn, kCache, vCache, slotIds, positions });
//   cacheAttention({ q: qkv, heads, kvHeads, kCache, vCache, slotIds, positions, out });
//   copyColumns({ src: qkv, column: 0, out: q });           // out[r] = src[r, 0 .. out's width)
//
// Every call validates its tensors, then enqueues one kernel (copyColumns: one 2-D copy) on
// `stream` (default: the device's legacy default stream) and returns at once. bf16 throughout; the
// per-row side inputs (ids, positions, slot ids) are int32 device tensors, so a continuous batch
// changes them step by step without new calls. `rows` (default: the side input's length or the tensor's rows) lets buffers
// sized for the largest batch serve smaller ones: only the leading rows are read and written.
import {
  CacheAttentionParams, EmbeddingParams, KvAppendParams, RmsNormParams, RopeParams, SwigluParams, WeftCopyKind,
} from "../abi.ts";
import { ArgumentError } from "../errors.ts";
import { check, native } from "../native.ts";
import { Stream } from "../stream.ts";
import { Tensor } from "../tensor.ts";
import type { TensorDesc } from "./gemm.ts";

export interface NnCall {
  /** Stream to run on (default: the device's legacy default stream). */
  stream?: Stream | null;
}

export interface EmbeddingArgs<T = Tensor> extends NnCall {
  /** [vocab, dim] bf16. */
  table: T;
  /** int32 [>= rows]: row r of out gets table[ids[r]]; an id outside [0, vocab) gives NaN. */
  ids: T;
  /** [>= rows, dim] bf16. */
  out: T;
  rows?: number;
}

export interface RmsNormArgs<T = Tensor> extends NnCall {
  /** [>= rows, dim] bf16. */
  x: T;
  /** [dim] bf16. */
  weight: T;
  /** [>= rows, dim] bf16; may be x itself. */
  out: T;
  /** [>= rows, dim] bf16: first residual += x (stored), then out = norm(residual) * weight. */
  residual?: T;
  /** Default 1e-5. */
  eps?: number;
  rows?: number;
}

export interface RopeArgs<T = Tensor> extends NnCall {
  /** [>= rows, rowStride] bf16, rotated in place: `heads` heads of `headDim` from `column` on. */
  x: T;
  /** int32 [>= rows]: each row's position. */
  positions: T;
  heads: number;
  /** A multiple of 16. */
  headDim: number;
  /** Element offset of the first rotated head in each row (default 0). */
  column?: number;
  /** Base of the angles (default 10000; Llama 3 uses 500000). */
  theta?: number;
  rows?: number;
}

export interface SwigluArgs<T = Tensor> extends NnCall {
  /** [>= rows, 2 * dim] bf16: the gate projection's dim columns, then the up projection's. */
  x: T;
  /** [>= rows, dim] bf16. */
  out: T;
  rows?: number;
}

export interface CopyColumnsArgs<T = Tensor> extends NnCall {
  /** [>= rows, stride] bf16. */
  src: T;
  /** Element offset in src's rows of the first column copied (default 0). */
  column?: number;
  /** [>= rows, width] bf16, another tensor: out[r] = src[r, column .. column + width). */
  out: T;
  rows?: number;
}

/** The cache of one layer: [slots, maxSeq, width] bf16 each, width = kv heads x head dim. */
export interface KvCacheTensors<T = Tensor> {
  kCache: T;
  vCache: T;
  /** int32 [>= rows]: the slot each row's sequence owns (< 0: padding, skipped). */
  slotIds: T;
  /** int32 [>= rows]: each row's position in its sequence. */
  positions: T;
}

export interface KvAppendArgs<T = Tensor> extends NnCall, KvCacheTensors<T> {
  /** [>= rows, stride] bf16 holding each row's k at kColumn and v at vColumn (width elements each). */
  src: T;
  kColumn: number;
  vColumn: number;
  rows?: number;
}

export interface CacheAttentionArgs<T = Tensor> extends NnCall, KvCacheTensors<T> {
  /** [>= rows, stride] bf16: `heads` query heads of headDim from qColumn on. */
  q: T;
  qColumn?: number;
  heads: number;
  kvHeads: number;
  /** <= 256, a multiple of 8. */
  headDim: number;
  /** [>= rows, >= heads x headDim] bf16. */
  out: T;
  /** Default 1 / sqrt(headDim). */
  scale?: number;
  rows?: number;
}

type Shape2 = [number, number];

function tensorArg(t: TensorDesc | undefined, op: string, name: string): TensorDesc {
  if (t === null || typeof t !== "object" || !Array.isArray(t.shape)) throw new ArgumentError(op, name, "must be a Tensor");
  if (t instanceof Tensor) t.guard(op);
  return t;
}

function bf16(t: TensorDesc | undefined, op: string, name: string, dims: number): number[] {
  const d = tensorArg(t, op, name);
  if (d.dtype !== "bf16") throw new ArgumentError(op, name, `must be bf16 (got ${d.dtype})`);
  if (d.shape.length !== dims) throw new ArgumentError(op, name, `must be ${dims}-D (got shape [${d.shape.join(", ")}])`);
  return [...d.shape];
}

function matrix(t: TensorDesc | undefined, op: string, name: string): Shape2 {
  return bf16(t, op, name, 2) as Shape2;
}

function int32Vector(t: TensorDesc | undefined, op: string, name: string): number {
  const d = tensorArg(t, op, name);
  if (d.dtype !== "i32") throw new ArgumentError(op, name, `must be int32 (got ${d.dtype})`);
  if (d.shape.length !== 1) throw new ArgumentError(op, name, `must be 1-D (got shape [${d.shape.join(", ")}])`);
  return d.shape[0]!;
}

function int(op: string, name: string, v: unknown, min: number, max = 2 ** 31 - 1): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    throw new ArgumentError(op, name, `must be an integer in [${min}, ${max}] (got ${JSON.stringify(v)})`);
  }
  return v;
}

function multipleOf8(op: string, name: string, v: number): void {
  if (v % 8 !== 0) throw new ArgumentError(op, name, `is ${v}, which must be a multiple of 8 elements (the kernels move 16-byte vectors)`);
}

/** rows: given (<= every limit) or the smallest limit. */
function rowsOf(op: string, given: number | undefined, limits: [string, number][]): number {
  const fit = Math.min(...limits.map(([, n]) => n));
  if (given === undefined) return fit;
  int(op, "rows", given, 1);
  for (const [name, n] of limits) {
    if (given > n) throw new ArgumentError(op, "rows", `is ${given} but ${name} has only ${n}`);
  }
  return given;
}

function sameDevice(op: string, tensors: [string, TensorDesc | undefined][], stream: Stream | null | undefined): number {
  const present = tensors.filter(([, t]) => t !== undefined) as [string, TensorDesc][];
  const [firstName, first] = present[0]!;
  for (const [name, t] of present) {
    if (t.device !== first.device) throw new ArgumentError(op, name, `is on device ${t.device} but ${firstName} is on device ${first.device}`);
  }
  if (stream !== undefined && stream !== null) {
    if (!(stream instanceof Stream)) throw new ArgumentError(op, "stream", "must be a Stream or null");
    if (stream.device !== first.device) throw new ArgumentError(op, "stream", `is on device ${stream.device} but the tensors are on device ${first.device}`);
  }
  return first.device;
}

// ---- validation (no GPU needed; CPU tests pass plain descriptions) ------------------------------------

export function validateEmbedding(a: EmbeddingArgs<TensorDesc>, op = "embedding") {
  const [vocab, dim] = matrix(a.table, op, "table");
  const ids = int32Vector(a.ids, op, "ids");
  const [outRows, outDim] = matrix(a.out, op, "out");
  if (outDim !== dim) throw new ArgumentError(op, "out", `has ${outDim} columns but the table's rows have ${dim}`);
  multipleOf8(op, "dim (the table's columns)", dim);
  sameDevice(op, [["table", a.table], ["ids", a.ids], ["out", a.out]], a.stream);
  return { rows: rowsOf(op, a.rows, [["ids", ids], ["out", outRows]]), vocab, dim };
}

export function validateRmsNorm(a: RmsNormArgs<TensorDesc>, op = "rmsNorm") {
  const [xRows, dim] = matrix(a.x, op, "x");
  const [w] = bf16(a.weight, op, "weight", 1);
  if (w !== dim) throw new ArgumentError(op, "weight", `has ${w} elements but x's rows have ${dim}`);
  const [outRows, outDim] = matrix(a.out, op, "out");
  if (outDim !== dim) throw new ArgumentError(op, "out", `has ${outDim} columns but x has ${dim}`);
  const limits: [string, number][] = [["x", xRows], ["out", outRows]];
  if (a.residual !== undefined) {
    const [rr, rd] = matrix(a.residual, op, "residual");
    if (rd !== dim) throw new ArgumentError(op, "residual", `has ${rd} columns but x has ${dim}`);
    if (a.residual === a.x || a.residual === a.out) throw new ArgumentError(op, "residual", "must be a tensor of its own (not x or out)");
    limits.push(["residual", rr]);
  }
  multipleOf8(op, "dim (x's columns)", dim);
  if (dim > 65536) throw new ArgumentError(op, "x", `has rows of ${dim} elements; at most 65536 (one CTA holds a row)`);
  const eps = a.eps ?? 1e-5;
  if (typeof eps !== "number" || !(eps > 0 && eps < 1)) throw new ArgumentError(op, "eps", `must be in (0, 1) (got ${JSON.stringify(eps)})`);
  sameDevice(op, [["x", a.x], ["weight", a.weight], ["out", a.out], ["residual", a.residual]], a.stream);
  return { rows: rowsOf(op, a.rows, limits), dim, eps };
}

export function validateRope(a: RopeArgs<TensorDesc>, op = "rope") {
  const [xRows, stride] = matrix(a.x, op, "x");
  const positions = int32Vector(a.positions, op, "positions");
  const heads = int(op, "heads", a.heads, 1, 65536);
  const headDim = int(op, "headDim", a.headDim, 16, 4096);
  if (headDim % 16 !== 0) throw new ArgumentError(op, "headDim", `is ${headDim}, which must be a multiple of 16 (each half of a head moves as 16-byte vectors)`);
  const column = int(op, "column", a.column ?? 0, 0);
  multipleOf8(op, "column", column);
  multipleOf8(op, "x's row length", stride);
  if (column + heads * headDim > stride) {
    throw new ArgumentError(op, "heads", `x ${heads} heads of ${headDim} from column ${column} need ${column + heads * headDim} columns but x has ${stride}`);
  }
  const theta = a.theta ?? 10000;
  if (typeof theta !== "number" || !(theta > 1) || !Number.isFinite(theta)) throw new ArgumentError(op, "theta", `must be a finite number > 1 (got ${JSON.stringify(theta)})`);
  sameDevice(op, [["x", a.x], ["positions", a.positions]], a.stream);
  return { rows: rowsOf(op, a.rows, [["x", xRows], ["positions", positions]]), heads, headDim, column, stride, theta };
}

export function validateSwiglu(a: SwigluArgs<TensorDesc>, op = "swiglu") {
  const [xRows, xCols] = matrix(a.x, op, "x");
  const [outRows, dim] = matrix(a.out, op, "out");
  if (xCols !== 2 * dim) throw new ArgumentError(op, "x", `has ${xCols} columns but must have 2 x out's ${dim} (gate, then up)`);
  if (a.x === a.out) throw new ArgumentError(op, "out", "must not be x");
  multipleOf8(op, "dim (out's columns)", dim);
  sameDevice(op, [["x", a.x], ["out", a.out]], a.stream);
  return { rows: rowsOf(op, a.rows, [["x", xRows], ["out", outRows]]), dim };
}

export function validateCopyColumns(a: CopyColumnsArgs<TensorDesc>, op = "copyColumns") {
  const [srcRows, stride] = matrix(a.src, op, "src");
  const [outRows, width] = matrix(a.out, op, "out");
  const column = int(op, "column", a.column ?? 0, 0);
  if (column + width > stride) throw new ArgumentError(op, "column", `is ${column}: ${column} + out's width ${width} is past src's ${stride} columns`);
  if (a.out === a.src) throw new ArgumentError(op, "out", "must not be src");
  sameDevice(op, [["src", a.src], ["out", a.out]], a.stream);
  return { rows: rowsOf(op, a.rows, [["src", srcRows], ["out", outRows]]), stride, column, width };
}

function cacheShape(a: KvCacheTensors<TensorDesc>, op: string) {
  const [slots, maxSeq, width] = bf16(a.kCache, op, "kCache", 3) as [number, number, number];
  const v = bf16(a.vCache, op, "vCache", 3);
  if (v[0] !== slots || v[1] !== maxSeq || v[2] !== width) {
    throw new ArgumentError(op, "vCache", `is [${v.join(", ")}] but kCache is [${slots}, ${maxSeq}, ${width}]`);
  }
  if (a.kCache === a.vCache) throw new ArgumentError(op, "vCache", "must not be kCache");
  multipleOf8(op, "the caches' width", width);
  return { slots, maxSeq, width, slotIds: int32Vector(a.slotIds, op, "slotIds"), positions: int32Vector(a.positions, op, "positions") };
}

export function validateKvAppend(a: KvAppendArgs<TensorDesc>, op = "kvAppend") {
  const c = cacheShape(a, op);
  const [srcRows, stride] = matrix(a.src, op, "src");
  multipleOf8(op, "src's row length", stride);
  for (const name of ["kColumn", "vColumn"] as const) {
    const col = int(op, name, a[name], 0);
    multipleOf8(op, name, col);
    if (col + c.width > stride) throw new ArgumentError(op, name, `is ${col}: ${col} + width ${c.width} is past src's ${stride} columns`);
  }
  sameDevice(op, [["src", a.src], ["kCache", a.kCache], ["vCache", a.vCache], ["slotIds", a.slotIds], ["positions", a.positions]], a.stream);
  return { ...c, stride, rows: rowsOf(op, a.rows, [["src", srcRows], ["slotIds", c.slotIds], ["positions", c.positions]]) };
}

export function validateCacheAttention(a: CacheAttentionArgs<TensorDesc>, op = "cacheAttention") {
  const c = cacheShape(a, op);
  const heads = int(op, "heads", a.heads, 1, 65535);
  const kvHeads = int(op, "kvHeads", a.kvHeads, 1, heads);
  if (heads % kvHeads !== 0) throw new ArgumentError(op, "kvHeads", `is ${kvHeads}, which must divide heads (${heads})`);
  const headDim = int(op, "headDim", a.headDim, 8, 256);
  multipleOf8(op, "headDim", headDim);
  if (kvHeads * headDim !== c.width) throw new ArgumentError(op, "kCache", `has rows of ${c.width} but kvHeads x headDim is ${kvHeads * headDim}`);
  const [qRows, qStride] = matrix(a.q, op, "q");
  const qColumn = int(op, "qColumn", a.qColumn ?? 0, 0);
  multipleOf8(op, "qColumn", qColumn);
  multipleOf8(op, "q's row length", qStride);
  if (qColumn + heads * headDim > qStride) throw new ArgumentError(op, "q", `has ${qStride} columns but ${heads} heads of ${headDim} from column ${qColumn} need ${qColumn + heads * headDim}`);
  const [outRows, outStride] = matrix(a.out, op, "out");
  multipleOf8(op, "out's row length", outStride);
  if (outStride < heads * headDim) throw new ArgumentError(op, "out", `has ${outStride} columns but heads x headDim is ${heads * headDim}`);
  if (a.out === a.q) throw new ArgumentError(op, "out", "must not be q");
  const scale = a.scale ?? 1 / Math.sqrt(headDim);
  if (typeof scale !== "number" || !(scale > 0) || !Number.isFinite(scale)) throw new ArgumentError(op, "scale", `must be a finite number > 0 (got ${JSON.stringify(scale)})`);
  sameDevice(op, [["q", a.q], ["out", a.out], ["kCache", a.kCache], ["vCache", a.vCache], ["slotIds", a.slotIds], ["positions", a.positions]], a.stream);
  return {
    ...c, heads, kvHeads, headDim, qColumn, qStride, outStride, scale,
    rows: rowsOf(op, a.rows, [["q", qRows], ["out", outRows], ["slotIds", c.slotIds], ["positions", c.positions]]),
  };
}

// ---- launches --------------------------------------------------------------------------------------------

function requireTensors(op: string, tensors: Record<string, unknown>): void {
  for (const [name, t] of Object.entries(tensors)) {
    if (t === undefined) continue;
    if (!(t instanceof Tensor)) throw new ArgumentError(op, name, "must be a Tensor");
    t.guard(op);
  }
}

const streamOf = (s: Stream | null | undefined) => (s ? s.handle : 0);
const BF16_BYTES = 2;

// One params buffer per struct: the native call copies it into the launch before returning.
const buffers = {
  embedding: EmbeddingParams.alloc(),
  rmsNorm: RmsNormParams.alloc(),
  rope: RopeParams.alloc(),
  swiglu: SwigluParams.alloc(),
  kvAppend: KvAppendParams.alloc(),
  attention: CacheAttentionParams.alloc(),
};

/** out[r] = table[ids[r]] for the leading rows. */
export function embedding(a: EmbeddingArgs): void {
  const op = "embedding";
  requireTensors(op, { table: a?.table, ids: a?.ids, out: a?.out });
  const v = validateEmbedding(a, op);
  check(native().weft_nn_embedding(EmbeddingParams.write(buffers.embedding, {
    table: a.table.ptr, ids: a.ids.ptr, out: a.out.ptr, rows: v.rows, vocab: v.vocab, dim: v.dim, stream: streamOf(a.stream),
  })), op);
}

/** out = x / rms(x) * weight per row; with `residual`, residual += x first and the sum is normalized. */
export function rmsNorm(a: RmsNormArgs): void {
  const op = "rmsNorm";
  requireTensors(op, { x: a?.x, weight: a?.weight, out: a?.out, residual: a?.residual });
  const v = validateRmsNorm(a, op);
  check(native().weft_nn_rms_norm(RmsNormParams.write(buffers.rmsNorm, {
    x: a.x.ptr, residual: a.residual?.ptr ?? 0, weight: a.weight.ptr, out: a.out.ptr, rows: v.rows, dim: v.dim, eps: v.eps,
    stream: streamOf(a.stream),
  })), op);
}

/** Rotates `heads` heads of each row in place by the row's position (rotate-half convention). */
export function rope(a: RopeArgs): void {
  const op = "rope";
  requireTensors(op, { x: a?.x, positions: a?.positions });
  const v = validateRope(a, op);
  check(native().weft_nn_rope(RopeParams.write(buffers.rope, {
    x: a.x.ptr + v.column * BF16_BYTES, positions: a.positions.ptr, rows: v.rows, heads: v.heads, head_dim: v.headDim,
    row_stride: v.stride, theta: v.theta, stream: streamOf(a.stream),
  })), op);
}

/** out = silu(gate) * up, with x = [gate | up] per row. */
export function swiglu(a: SwigluArgs): void {
  const op = "swiglu";
  requireTensors(op, { x: a?.x, out: a?.out });
  const v = validateSwiglu(a, op);
  check(native().weft_nn_swiglu(SwigluParams.write(buffers.swiglu, {
    x: a.x.ptr, out: a.out.ptr, rows: v.rows, dim: v.dim, stream: streamOf(a.stream),
  })), op);
}

/** Writes each row's k and v into its slot at its position (rows with slot < 0 are skipped). */
export function kvAppend(a: KvAppendArgs): void {
  const op = "kvAppend";
  requireTensors(op, { src: a?.src, kCache: a?.kCache, vCache: a?.vCache, slotIds: a?.slotIds, positions: a?.positions });
  const v = validateKvAppend(a, op);
  check(native().weft_nn_kv_append(KvAppendParams.write(buffers.kvAppend, {
    k: a.src.ptr + a.kColumn * BF16_BYTES, v: a.src.ptr + a.vColumn * BF16_BYTES, k_cache: a.kCache.ptr, v_cache: a.vCache.ptr,
    slot_ids: a.slotIds.ptr, positions: a.positions.ptr, rows: v.rows, width: v.width, src_stride: v.stride, slots: v.slots,
    max_seq: v.maxSeq, stream: streamOf(a.stream),
  })), op);
}

/** Each query row attends to positions 0 ..= positions[r] of its slot (causal, grouped-query). */
export function cacheAttention(a: CacheAttentionArgs): void {
  const op = "cacheAttention";
  requireTensors(op, { q: a?.q, out: a?.out, kCache: a?.kCache, vCache: a?.vCache, slotIds: a?.slotIds, positions: a?.positions });
  const v = validateCacheAttention(a, op);
  check(native().weft_nn_cache_attention(CacheAttentionParams.write(buffers.attention, {
    q: a.q.ptr + v.qColumn * BF16_BYTES, k_cache: a.kCache.ptr, v_cache: a.vCache.ptr, slot_ids: a.slotIds.ptr,
    positions: a.positions.ptr, out: a.out.ptr, rows: v.rows, heads: v.heads, kv_heads: v.kvHeads, head_dim: v.headDim,
    q_stride: v.qStride, out_stride: v.outStride, slots: v.slots, max_seq: v.maxSeq, scale: v.scale, stream: streamOf(a.stream),
  })), op);
}

/** out[r] = src[r, column .. column + width) for the leading rows (one stream-ordered 2-D copy). */
export function copyColumns(a: CopyColumnsArgs): void {
  const op = "copyColumns";
  requireTensors(op, { src: a?.src, out: a?.out });
  const v = validateCopyColumns(a, op);
  check(native().weft_memcpy_2d(a.out.ptr, v.width * BF16_BYTES, a.src.ptr + v.column * BF16_BYTES, v.stride * BF16_BYTES,
    v.width * BF16_BYTES, v.rows, WeftCopyKind.WEFT_COPY_D2D, streamOf(a.stream)), op);
}
