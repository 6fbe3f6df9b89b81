// check-suites.ts (test support) — the two ways a GPU suite runs its named checks
// (collective-checks.ts, tp-checks.ts, moe-checks.ts, ...): in this process, one test per check on
// the suite's communicators, or in one worker process per rank (report-channel.ts), where the
// parent's one test passes only if every rank passed every check.
import { expect, test } from "./test-api.ts";

import type { NamedCheck } from "./report-channel.ts";

/** One test per check, run on `ctx()` (made by the suite's beforeAll), its detail logged. */
export function testChecks<C>(checks: readonly NamedCheck<C>[], ctx: () => C, timeoutMs: number): void {
  for (const check of checks) {
    test(check.name, async () => {
      const detail = await check.run(ctx());
      console.log(`  [local] ${check.name}: ${detail}`);
    }, timeoutMs);
  }
}

/** What runCheckWorkers returned passes: no check failed, every worker exited 0, and every rank
 * reported `checks` results (under CHECK_FILTER, which runs a subset, the same count on every rank). */
export function expectWorkersPassed(run: { failed: string[]; exits: number[]; reported: number[] }, checks: number): void {
  expect(run.failed).toEqual([]);
  expect(run.exits).toEqual(run.exits.map(() => 0));
  const expected = process.env.CHECK_FILTER ? run.reported[0]! : checks;
  expect(run.reported).toEqual(run.reported.map(() => expected));
}
