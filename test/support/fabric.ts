// fabric.ts — gating for transport tests, like gpu.ts for GPU tests. A build without libfabric
// headers, or a machine without libfabric.so.1 or without the provider a test needs, skips those
// tests and says why; REQUIRE_FABRIC=1 (set by .ci/run, whose machine installs libfabric-dev) turns
// the same condition into a failing test, so CI cannot pass by skipping the transport.
import { describe, test } from "./test-api.ts";

import { fabricProviders, type FabricProviders } from "../../lib/info.ts";

export const requireFabric = process.env.REQUIRE_FABRIC === "1";

let cached: FabricProviders | undefined;

/** What this build and machine offer (libfabric version and providers, or why there are none). */
export function fabric(): FabricProviders {
  if (cached === undefined) {
    try {
      cached = fabricProviders();
    } catch (e) {
      cached = { libfabric: null, reason: `the library did not load (${(e as Error).message})`, providers: [] };
    }
  }
  return cached;
}

/** Why `provider` cannot run here, or undefined when it can. */
export function fabricMissing(provider: string): string | undefined {
  const f = fabric();
  if (f.libfabric === null) return `no libfabric: ${f.reason ?? "unknown reason"}`;
  if (!f.providers.some((p) => p.name === provider)) {
    return `libfabric ${f.libfabric} has no ${provider} provider here (it has: ${f.providers.map((p) => p.name).join(", ") || "none"})`;
  }
  return undefined;
}

/** describe() that runs only where libfabric offers `provider`. */
export function describeFabric(name: string, provider: string, body: () => void): void {
  const why = fabricMissing(provider);
  if (why === undefined) {
    describe(name, body);
  } else if (requireFabric) {
    describe(name, () => {
      test(`REQUIRE_FABRIC=1 but ${why}`, () => {
        throw new Error(`REQUIRE_FABRIC=1: ${name}: ${why}`);
      });
    });
  } else {
    describe.skip(`${name} (skipped: ${why}; REQUIRE_FABRIC=1 turns this into a failure)`, body);
  }
}

/** test() that runs only where libfabric offers `provider`. */
export function testFabric(name: string, provider: string, fn: () => unknown, timeoutMs?: number): void {
  const why = fabricMissing(provider);
  if (why === undefined) test(name, fn as () => void, timeoutMs);
  else if (requireFabric) test(`${name}: REQUIRE_FABRIC=1 but ${why}`, () => { throw new Error(`REQUIRE_FABRIC=1: ${why}`); });
  else test.skip(`${name} (skipped: ${why}; REQUIRE_FABRIC=1 turns this into a failure)`, fn as () => void);
}
