// test-api.ts — where every test file takes its test API from, so that the same files run under
// `bun test` and `deno test`:
//
//   import { afterAll, beforeAll, describe, expect, test } from "./support/test-api.ts";
//
// Under Bun these are bun:test's own. Under Deno they are test-api-deno.ts's describe/test/hooks
// over Deno.test and expect.ts's matchers, with bun:test's meaning (mock.module is bun:test's alone:
// under Deno it throws, and the one script that needs it runs under Bun only). Types are bun:test's
// in both.
// bun:test is required, not imported, for the reason lib/runtime/bun.ts gives for bun:ffi.
import type * as BunTest from "bun:test";
import { createRequire } from "node:module";

import { runtime } from "../../lib/runtime/index.ts";
import * as denoTest from "./test-api-deno.ts";

const api = (runtime.name === "deno" ? denoTest : createRequire(import.meta.url)("bun:test")) as typeof BunTest;

export const { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, mock, test } = api;

/** The tests this file registers after the call run under Bun only; under Deno each is skipped,
 * `why` in its name (a test of something that needs Bun: examples/serve is a Bun.serve server).
 * Call it before the file's first test. */
export function onlyUnderBun(why: string): void {
  if (runtime.name === "deno") denoTest.skipTheRest(`(skipped under Deno: ${why})`);
}
