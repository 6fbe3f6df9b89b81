// gpu.ts — gating for GPU tests. Without enough GPUs a GPU suite is skipped and says why; with
// REQUIRE_GPU=1 the same condition is a failing test instead, so a GPU run cannot pass vacuously.
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

export const requireGpu = process.env.REQUIRE_GPU === "1";

/** describe() that runs only with at least `minGpus` GPUs. */
export function describeGpu(name: string, minGpus: number, body: () => void): void {
  const have = gpuCount();
  if (have >= minGpus) {
    describe(name, body);
    return;
  }
  const why = `needs ${minGpus} GPU${minGpus > 1 ? "s" : ""}, this machine has ${have}`;
  if (requireGpu) {
    describe(name, () => {
      test(`REQUIRE_GPU=1 but ${why}`, () => {
        throw new Error(`REQUIRE_GPU=1: ${name} ${why}`);
      });
    });
  } else {
    describe.skip(`${name} (skipped: ${why}; REQUIRE_GPU=1 turns this into a failure)`, body);
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
