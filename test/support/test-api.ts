// test-api.ts — where every test file takes its test API from, so that the same files run under
// `bun test` and `deno test`:
//
//   import { afterAll, beforeAll, describe, expect, test } from "./support/test-api.ts";
//
// Under Bun these are bun:test's own. Under Deno they are test-api-deno.ts's describe/test/hooks
// over Deno.test and expect.ts's matchers, with bun:test's meaning. Types are bun:test's in both.
// bun:test is required, not imported, for the reason lib/runtime/bun.ts gives for bun:ffi.
import type * as BunTest from "bun:test";
import { createRequire } from "node:module";

import { runtime } from "../../lib/runtime/index.ts";
import * as denoTest from "./test-api-deno.ts";

const api = (runtime.name === "deno" ? denoTest : createRequire(import.meta.url)("bun:test")) as typeof BunTest;

export const { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, test } = api;
