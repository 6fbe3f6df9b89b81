// Bad input across the public API: each case calls weft wrongly and must get the documented
// WeftError subclass, naming the argument it is about (ArgumentError's `argument`, and the
// message). The cases are tables in test/support/bad-input/*.ts (the case type: case.ts); every
// table there is picked up. A table's `cases` run anywhere: each is refused before any device or
// network work. Its `gpuCases`, which need a live tensor or communicator, run on a GPU and skip
// without one, saying why (REQUIRE_GPU=1 makes that a failure); its `release()` frees what they used.
import { afterAll, describe, expect, test } from "./support/test-api.ts";
import { readdirSync } from "node:fs";
import { join } from "node:path";

import type { BadInputCase } from "./support/bad-input/case.ts";
import { describeGpu } from "./support/gpu.ts";

interface Table {
  cases?: BadInputCase[];
  gpuCases?: BadInputCase[];
  release?: () => unknown;
}

const dir = join(import.meta.dirname, "support", "bad-input");
const files = readdirSync(dir).filter((f) => f.endsWith(".ts") && f !== "case.ts").sort();
const tables: [string, Table][] = await Promise.all(files.map(async (f) => [f.replace(/\.ts$/, ""), (await import(join(dir, f))) as Table] as [string, Table]));

async function expectRefused(c: BadInputCase): Promise<void> {
  let err: unknown;
  let returned: unknown;
  try {
    returned = await c.run();
  } catch (e) {
    err = e;
  }
  if (err === undefined) {
    (returned as { dispose?: () => unknown } | undefined)?.dispose?.();
    throw new Error(`${c.name}: no error was thrown (expected ${c.error.name} naming '${c.names}')`);
  }
  if (!(err instanceof c.error)) throw new Error(`${c.name}: expected ${c.error.name}, got ${(err as Error)?.name}: ${(err as Error)?.message}`);
  const argument = (err as { argument?: unknown }).argument;
  if (typeof argument === "string") expect(argument).toBe(c.names);
  expect((err as Error).message).toContain(c.names);
}

test("the tables hold at least 100 cases that need no GPU, with distinct names", () => {
  const all = tables.flatMap(([, t]) => [...(t.cases ?? []), ...(t.gpuCases ?? [])]);
  const cpu = tables.flatMap(([, t]) => t.cases ?? []);
  console.log(`  ${cpu.length} cases without a GPU, ${all.length - cpu.length} on a GPU, in ${tables.map(([n]) => n).join(", ")}`);
  expect(cpu.length).toBeGreaterThanOrEqual(100);
  expect(new Set(all.map((c) => c.name)).size).toBe(all.length);
});

for (const [name, table] of tables) {
  describe(`bad input: ${name}`, () => {
    for (const c of table.cases ?? []) test(c.name, () => expectRefused(c));
  });
  if (table.gpuCases?.length) {
    describeGpu(`bad input on a GPU: ${name}`, 1, () => {
      afterAll(async () => {
        await table.release?.();
      }, 60_000);
      for (const c of table.gpuCases!) test(c.name, () => expectRefused(c), 60_000);
    });
  }
}
