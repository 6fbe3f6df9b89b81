// gemm.ts — bad input to the GEMM engine's validation (planGemm, gemm, gemmSync, gemmConfigFor,
// the cuBLASLt baseline): operands given as tensor descriptions, so every case runs without a GPU.
import { cublasLtGemmSync } from "../../../lib/baselines/cublaslt.ts";
import type { DType } from "../../../lib/dtype.ts";
import { ArgumentError } from "../../../lib/errors.ts";
import { gemm, gemmConfigFor, gemmSync, planGemm, type GemmConfig, type GemmOptions, type TensorDesc } from "../../../lib/ops/gemm.ts";
import type { BadInputCase } from "./case.ts";

const A = ArgumentError;
const any = (v: unknown) => v as never;
const d = (shape: number[], dtype: DType = "bf16", device = 0): TensorDesc => ({ shape, dtype, device });
/** a [64, 32] · b [32, 48] = out [64, 48], with one operand or option replaced. */
const plan = (over: { a?: TensorDesc; b?: TensorDesc; out?: TensorDesc; opts?: GemmOptions }) =>
  planGemm("a" in over ? over.a! : d([64, 32]), "b" in over ? over.b! : d([32, 48]), "out" in over ? over.out! : d([64, 48]),
    "opts" in over ? over.opts : {});
const config = (c: unknown) => plan({ opts: { config: c as GemmConfig } });

export const cases: BadInputCase[] = [
  // dimensions of a description (a Tensor always has valid ones)
  { name: "planGemm with m = -128 (was accepted)", run: () => plan({ a: d([-128, 32]), out: d([-128, 48]) }), error: A, names: "a.shape[0]" },
  { name: "planGemm with m = 0 (was accepted)", run: () => plan({ a: d([0, 32]), out: d([0, 48]) }), error: A, names: "a.shape[0]" },
  { name: "planGemm with m = 1.5 (was accepted)", run: () => plan({ a: d([1.5, 32]), out: d([1.5, 48]) }), error: A, names: "a.shape[0]" },
  { name: "planGemm with b's N negative", run: () => plan({ b: d([32, -8]) }), error: A, names: "b.shape[1]" },
  { name: "planGemm with out's rows NaN", run: () => plan({ out: d([NaN, 48]) }), error: A, names: "out.shape[0]" },
  { name: "planGemm with a on device -1", run: () => plan({ a: d([64, 32], "bf16", -1) }), error: A, names: "a.device" },
  // ranks, dtypes, devices
  { name: "planGemm with a 1-D", run: () => plan({ a: d([64]) }), error: A, names: "a" },
  { name: "planGemm with a 3-D b", run: () => plan({ b: d([32, 48, 1]) }), error: A, names: "b" },
  { name: "planGemm with a null", run: () => plan({ a: any(null) }), error: A, names: "a" },
  { name: "planGemm with out a string", run: () => plan({ out: any("out") }), error: A, names: "out" },
  { name: "planGemm with a f32", run: () => plan({ a: d([64, 32], "f32") }), error: A, names: "a" },
  { name: "planGemm with b f16", run: () => plan({ b: d([32, 48], "f16") }), error: A, names: "b" },
  { name: "planGemm with out i32", run: () => plan({ out: d([64, 48], "i32") }), error: A, names: "out" },
  { name: "planGemm with b on another device", run: () => plan({ b: d([32, 48], "bf16", 1) }), error: A, names: "b" },
  { name: "planGemm with out on another device", run: () => plan({ out: d([64, 48], "bf16", 1) }), error: A, names: "out" },
  // shapes that disagree
  { name: "planGemm with K of b not a's K", run: () => plan({ b: d([24, 48]) }), error: A, names: "b" },
  { name: "planGemm with b laid out [N, K] without transB", run: () => plan({ b: d([48, 32]) }), error: A, names: "b" },
  { name: "planGemm with out of the wrong shape", run: () => plan({ out: d([64, 40]) }), error: A, names: "out" },
  { name: "planGemm with transB and out of the wrong shape", run: () => plan({ b: d([48, 32]), out: d([64, 32]), opts: { transB: true } }), error: A, names: "out" },
  // 16-byte rows (TMA)
  { name: "planGemm with K = 65 (rows not 16-byte multiples)", run: () => plan({ a: d([64, 65]), b: d([65, 48]) }), error: A, names: "a" },
  { name: "planGemm with N = 255 for b [K, N]", run: () => plan({ b: d([32, 255]), out: d([64, 255]) }), error: A, names: "b" },
  { name: "planGemm with a bf16 out of 255 columns under transB", run: () => plan({ b: d([255, 32]), out: d([64, 255]), opts: { transB: true } }), error: A, names: "out" },
  { name: "planGemm with a [1, 1] problem", run: () => planGemm(d([1, 1]), d([1, 1]), d([1, 1])), error: A, names: "a" },
  // options
  { name: "planGemm with null options", run: () => plan({ opts: any(null) }), error: A, names: "opts" },
  { name: "planGemm with transB 1", run: () => plan({ opts: { transB: any(1) } }), error: A, names: "opts.transB" },
  { name: "planGemm with shape.m 0", run: () => plan({ opts: { shape: { m: 0, n: 48, k: 32 } } }), error: A, names: "opts.shape.m" },
  { name: "planGemm with shape.m -128", run: () => plan({ opts: { shape: { m: -128, n: 48, k: 32 } } }), error: A, names: "opts.shape.m" },
  { name: "planGemm with shape.n 1.5", run: () => plan({ opts: { shape: { m: 64, n: 1.5, k: 32 } } }), error: A, names: "opts.shape.n" },
  { name: "planGemm with shape.k missing", run: () => plan({ opts: { shape: any({ m: 64, n: 48 }) } }), error: A, names: "opts.shape.k" },
  { name: "planGemm with a null shape", run: () => plan({ opts: { shape: any(null) } }), error: A, names: "opts.shape" },
  { name: "planGemm with shape.m beyond a's rows", run: () => plan({ opts: { shape: { m: 65, n: 48, k: 32 } } }), error: A, names: "a" },
  { name: "planGemm with shape.n beyond b's columns", run: () => plan({ opts: { shape: { m: 64, n: 49, k: 32 } } }), error: A, names: "b" },
  { name: "planGemm with a negative timeout", run: () => plan({ opts: { timeoutMs: -1 } }), error: A, names: "opts.timeoutMs" },
  { name: "planGemm with a string timeout", run: () => plan({ opts: { timeoutMs: any("5") } }), error: A, names: "opts.timeoutMs" },
  { name: "planGemm with a stream that is not a Stream", run: () => plan({ opts: { stream: any({}) } }), error: A, names: "opts.stream" },
  // engine config
  { name: "GEMM config tileN 96", run: () => config({ tileN: 96 }), error: A, names: "config.tileN" },
  { name: "GEMM config clusterM 3", run: () => config({ clusterM: 3 }), error: A, names: "config.clusterM" },
  { name: "GEMM config clusterN 0", run: () => config({ clusterN: 0 }), error: A, names: "config.clusterN" },
  { name: "GEMM config groupM 0", run: () => config({ groupM: 0 }), error: A, names: "config.groupM" },
  { name: "GEMM config maxCtas -1", run: () => config({ maxCtas: -1 }), error: A, names: "config.maxCtas" },
  { name: "GEMM config maxCtas 1.5", run: () => config({ maxCtas: 1.5 }), error: A, names: "config.maxCtas" },
  { name: "GEMM config with both clusters 2", run: () => config({ clusterM: 2, clusterN: 2 }), error: A, names: "config.clusterN" },
  { name: "GEMM config tileN 64 with clusterM 2", run: () => config({ tileN: 64, clusterM: 2 }), error: A, names: "config.clusterM" },
  { name: "GEMM config tileN 128 with clusterN 2", run: () => config({ tileN: 128, clusterN: 2 }), error: A, names: "config.clusterN" },
  { name: "GEMM config with an unknown field", run: () => config({ stages: 4 }), error: A, names: "config.stages" },
  { name: "GEMM config a string", run: () => config("fast"), error: A, names: "config" },
  // the entry points take Tensors only (checked before any device work)
  { name: "gemm with a null a", run: () => gemm(any(null), any(null), any(null)), error: A, names: "a" },
  { name: "gemmSync with a description for a", run: () => gemmSync(any(d([64, 32])), any(d([32, 48])), any(d([64, 48]))), error: A, names: "a" },
  { name: "gemmConfigFor with a number for b", run: () => gemmConfigFor(any({}), any(7), any({})), error: A, names: "a" },
  { name: "cublasLtGemmSync with nothing", run: () => cublasLtGemmSync(any(undefined), any(undefined), any(undefined)), error: A, names: "a" },
];
