// Runs the store and environment tables of the shared bad-input sweep (test/support/bad-input/)
// until test/bad-input.test.ts picks them up; then this file can go. CPU only.
import { describe, expect, test } from "bun:test";

import type { BadInputCase } from "../support/bad-input/case.ts";
import { cases as envCases } from "../support/bad-input/env.ts";
import { cases as storeCases } from "../support/bad-input/store.ts";

async function thrown(c: BadInputCase): Promise<unknown> {
  try {
    await c.run();
  } catch (e) {
    return e;
  }
  return undefined;
}

for (const [table, cases] of [["store", storeCases], ["env", envCases]] as const) {
  describe(`bad input: ${table}`, () => {
    for (const c of cases) {
      test(c.name, async () => {
        const err = (await thrown(c)) as Error & { argument?: string };
        expect(err).toBeInstanceOf(c.error);
        if (err.argument !== undefined) expect(err.argument).toBe(c.names);
        expect(err.message).toContain(c.names);
      });
    }
  });
}
