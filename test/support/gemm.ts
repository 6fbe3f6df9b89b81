// gemm.ts (test support) — references and error norms for GEMM tests, computed on the device so
// that multi-gigabyte outputs never travel through JS.
import { DTYPES } from "../../lib/dtype.ts";
import { check, native } from "../../lib/native.ts";
import type { Stream } from "../../lib/stream.ts";
import { Tensor } from "../../lib/tensor.ts";

/** ref (f32 [m, ldc]) = a · op(b) on CUDA cores (weft_reference_gemm), stream-ordered. */
export function referenceGemm(a: Tensor, b: Tensor, ref: Tensor, dims: { m: number; n: number; k: number },
  transB: boolean, stream: Stream | null = null): void {
  check(native().weft_reference_gemm(a.ptr, b.ptr, ref.ptr, dims.m, dims.n, dims.k, a.shape[1]!, b.shape[1]!,
    ref.shape[1]!, transB ? 1 : 0, stream ? stream.handle : null), "referenceGemm");
}

/** Device-side ‖x − ref‖ / ‖ref‖ over all elements, and how many elements of x are not finite. */
export function deviceError(x: Tensor, ref: Tensor): { rel: number; nonFinite: number } {
  using scratch = Tensor.empty([6], "f32"); // 3 doubles
  const [rel, nonFinite] = deviceErrorInto(x, ref, scratch, 0);
  return { rel, nonFinite };
}

/** Like deviceError, but leaves the three doubles at slot `index` of `scratch` (f32 tensor used as
 * raw storage, 6 floats per slot) without a host round trip; read them with readErrors. */
export function deviceErrorAsync(x: Tensor, ref: Tensor, scratch: Tensor, index: number, stream: Stream | null = null): void {
  if (x.numel !== ref.numel) throw new Error(`element counts differ: ${x.numel} vs ${ref.numel}`);
  check(native().weft_diff_norms(x.ptr, dtypeCode(x), ref.ptr, dtypeCode(ref), x.numel, scratch.ptr + 24 * index,
    stream ? stream.handle : null), "deviceError");
}

export function readErrors(scratch: Tensor, count: number): { rel: number; nonFinite: number }[] {
  const raw = scratch.download() as Float32Array;
  const d = new Float64Array(raw.buffer, raw.byteOffset, (raw.length / 2) | 0);
  return Array.from({ length: count }, (_, i) => ({ rel: Math.sqrt(d[3 * i]!) / Math.sqrt(d[3 * i + 1]!), nonFinite: d[3 * i + 2]! }));
}

function deviceErrorInto(x: Tensor, ref: Tensor, scratch: Tensor, index: number): [number, number] {
  deviceErrorAsync(x, ref, scratch, index);
  const e = readErrors(scratch, index + 1)[index]!;
  return [e.rel, e.nonFinite];
}

function dtypeCode(t: Tensor): number {
  return DTYPES[t.dtype].code;
}

/** CPU fp64 reference for small problems: a [m, lda], b [n, ldb] (transB) or [k, ldb]. */
export function cpuGemm(a: Float32Array, lda: number, b: Float32Array, ldb: number, m: number, n: number, k: number,
  transB: boolean): Float64Array {
  const c = new Float64Array(m * n);
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let p = 0; p < k; p++) s += a[i * lda + p]! * (transB ? b[j * ldb + p]! : b[p * ldb + j]!);
      c[i * n + j] = s;
    }
  }
  return c;
}
