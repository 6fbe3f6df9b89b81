// cublaslt.ts — cuBLASLt's GEMM (dlopen'ed by libweft at run time) with gemm()'s signature, the
// baseline every GEMM benchmark compares against in the same run.
import { check, native, readCString } from "../native.ts";
import { packGemmParams, planGemm, requireTensors, type GemmOptions } from "../ops/gemm.ts";
import type { Tensor } from "../tensor.ts";

/** Whether cuBLASLt can be loaded here, and the file it came from (or why it could not). */
export function cublasLtAvailable(): { available: boolean; detail: string } {
  const out = new Int32Array(1);
  const path = new BigUint64Array(1);
  check(native().weft_cublaslt_available(out, path), "cublasLtAvailable");
  const addr = Number(path[0]);
  return { available: out[0] === 1, detail: addr ? readCString(addr) : "" };
}

/** out = a · op(b) through cuBLASLt (heuristic algorithm); enqueues on the stream and returns `out`.
 * Config overrides in opts are ignored. Throws UnsupportedError without cuBLASLt. */
export function cublasLtGemmSync(a: Tensor, b: Tensor, out: Tensor, opts: GemmOptions = {}): Tensor {
  const op = "cublasLtGemmSync";
  requireTensors(op, a, b, out);
  const plan = planGemm(a, b, out, opts, op);
  check(native().weft_cublaslt_gemm(packGemmParams(plan, a, b, out, opts.stream)), op);
  return out;
}
