// gpu.ts — gating for GPU tests. Without enough GPUs a GPU suite is skipped and says why. REQUIRE_GPU=N
// says the run expects N GPUs: a suite that needs at most N and cannot run is a failing test instead,
// so a GPU run cannot pass vacuously; a suite that needs more than N still skips, saying why (on a
// one-GPU host REQUIRE_GPU=1 fails a missing GPU, and the two-GPU suites say they need two).
import { describe, test } from "./test-api.ts";

import { deviceCount } from "../../lib/device.ts";

let cached: number | undefined;

/** GPUs visible to this process, 0 when the library cannot tell (no driver, no GPU). */
export function gpuCount(): number {
  if (cached === undefined) {
    try {
      cached = deviceCount();
    } catch {
      cached = 0;
    }
  }
  return cached;
}

/** The GPUs this run requires (REQUIRE_GPU=N), 0 when unset. */
export const requiredGpus = Math.max(0, Math.floor(Number(process.env.REQUIRE_GPU ?? 0)) || 0);

/** describe() that runs only with at least `minGpus` GPUs. */
export function describeGpu(name: string, minGpus: number, body: () => void): void {
  const have = gpuCount();
  if (have >= minGpus) {
    describe(name, body);
    return;
  }
  const why = `needs ${minGpus} GPU${minGpus > 1 ? "s" : ""}, this machine has ${have}`;
  if (minGpus <= requiredGpus) {
    describe(name, () => {
      test(`REQUIRE_GPU=${requiredGpus} but ${why}`, () => {
        throw new Error(`REQUIRE_GPU=${requiredGpus}: ${name} ${why}`);
      });
    });
  } else {
    describe.skip(`${name} (skipped: ${why}; REQUIRE_GPU=${minGpus} turns this into a failure)`, body);
  }
}

/** ‖a − b‖ / ‖b‖ over two equal-length arrays, in fp64; NaN anywhere in `a` gives NaN. */
export function relError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} != ${b.length}`);
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    const d = a[i]! - b[i]!;
    num += d * d;
    den += b[i]! * b[i]!;
  }
  return Math.sqrt(num) / Math.sqrt(den);
}

/** Fresh random values in [-1, 1), seeded, never all zero. */
export function randomArray(n: number, seed: number): Float32Array {
  let s = (seed * 2654435761) >>> 0 || 1;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    out[i] = (s / 4294967296) * 2 - 1;
  }
  return out;
}
