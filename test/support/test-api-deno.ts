// test-api-deno.ts — bun:test's describe/test/hooks over Deno.test, for test-api.ts under Deno.
//
// Each test is one Deno.test, named "suite > sub-suite > test" as bun prints it, registered while
// the file loads (Deno runs each test file in its own isolate, in registration order). Hooks run
// when the tests run, once everything is registered: a suite's beforeAll before its first test,
// its afterAll after its last one (every suite's test count is final by then), beforeEach and
// afterEach around each test, outermost first and last. Deno's sanitizers are off: bun:test has
// none, and the tests leave child processes, sockets and timers to their own teardown.
//
// A test's time bound is bun's: the third argument (ms, or { timeout }), else 300 000 ms (the
// --timeout that test/run-suites.mjs passes to bun).
import { expect } from "./expect.ts";

type Fn = () => unknown;
type Timeout = number | { timeout?: number } | undefined;

const DEFAULT_TIMEOUT_MS = 300_000;

const Deno = (globalThis as unknown as {
  Deno: { test(t: { name: string; ignore: boolean; fn: () => Promise<void>; sanitizeOps: false; sanitizeResources: false; sanitizeExit: false }): void };
}).Deno;

interface Suite {
  name: string;
  parent: Suite | undefined;
  skip: boolean;
  beforeAll: Fn[];
  afterAll: Fn[];
  beforeEach: Fn[];
  afterEach: Fn[];
  /** Runnable tests below this suite not yet finished. */
  remaining: number;
  started: boolean;
  /** What its beforeAll threw: every test below it fails with it. */
  failed?: unknown;
}

const suite = (name: string, parent: Suite | undefined, skip: boolean): Suite =>
  ({ name, parent, skip, beforeAll: [], afterAll: [], beforeEach: [], afterEach: [], remaining: 0, started: false });

const root = suite("", undefined, false);
let current = root;
/** Set by skipTheRest: every test registered from then on in this file is skipped with this note. */
let skippedWith: string | undefined;

/** Skips every test this file registers from now on, `note` appended to its name (test-api.ts,
 * onlyUnderBun). Each test file has its own isolate, so the note ends with the file. */
export function skipTheRest(note: string): void {
  skippedWith = note;
}

function chain(s: Suite): Suite[] {
  const out: Suite[] = [];
  for (let x: Suite | undefined = s; x; x = x.parent) out.unshift(x);
  return out;
}

async function withTimeout(fn: Fn, ms: number, name: string): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${name}: timed out after ${ms} ms`)), ms);
  });
  try {
    await Promise.race([Promise.resolve().then(fn), bound]);
  } finally {
    clearTimeout(timer);
  }
}

async function run(owner: Suite, name: string, fn: Fn, ms: number): Promise<void> {
  const suites = chain(owner);
  const errors: unknown[] = [];
  try {
    for (const s of suites) {
      if (!s.started) {
        s.started = true;
        try {
          for (const h of s.beforeAll) await withTimeout(h, ms, `beforeAll of '${s.name}'`);
        } catch (e) {
          s.failed = e;
        }
      }
      if (s.failed !== undefined) throw s.failed;
    }
    for (const s of suites) for (const h of s.beforeEach) await withTimeout(h, ms, "beforeEach");
    await withTimeout(fn, ms, name);
  } catch (e) {
    errors.push(e);
  }
  for (const s of [...suites].reverse()) {
    for (const h of s.afterEach) {
      try { await withTimeout(h, ms, "afterEach"); } catch (e) { errors.push(e); }
    }
  }
  for (const s of [...suites].reverse()) {
    if (--s.remaining > 0) continue;
    for (const h of s.afterAll) {
      try { await withTimeout(h, ms, `afterAll of '${s.name || "the file"}'`); } catch (e) { errors.push(e); }
    }
  }
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) throw new AggregateError(errors, `${name}: ${errors.length} failures`);
}

function timeoutOf(t: Timeout): number {
  return (typeof t === "number" ? t : t?.timeout) ?? DEFAULT_TIMEOUT_MS;
}

function register(name: string, fn: Fn | undefined, t: Timeout, skip: boolean): void {
  const owner = current;
  const full = [...chain(owner).map((s) => s.name).filter(Boolean), name].join(" > ") + (skippedWith ? ` ${skippedWith}` : "");
  const ignore = skip || !fn || skippedWith !== undefined || chain(owner).some((s) => s.skip);
  if (!ignore) for (const s of chain(owner)) s.remaining++;
  const ms = timeoutOf(t);
  Deno.test({ name: full, ignore, fn: () => run(owner, full, fn!, ms), sanitizeOps: false, sanitizeResources: false, sanitizeExit: false });
}

function group(name: string, body: () => void, skip: boolean): void {
  const parent = current;
  current = suite(name, parent, skip);
  try {
    const r = body() as unknown;
    if (r instanceof Promise) throw new Error(`describe('${name}'): the body must be synchronous (register tests, do the work in them)`);
  } finally {
    current = parent;
  }
}

type TestFn = ((name: string, fn?: Fn, t?: Timeout) => void) & {
  skip: (name: string, fn?: Fn, t?: Timeout) => void;
  todo: (name: string, fn?: Fn, t?: Timeout) => void;
  if: (cond: boolean) => (name: string, fn?: Fn, t?: Timeout) => void;
  skipIf: (cond: boolean) => (name: string, fn?: Fn, t?: Timeout) => void;
};

export const test: TestFn = Object.assign((name: string, fn?: Fn, t?: Timeout) => register(name, fn, t, false), {
  skip: (name: string, fn?: Fn, t?: Timeout) => register(name, fn, t, true),
  todo: (name: string, fn?: Fn, t?: Timeout) => register(`${name} (todo)`, fn, t, true),
  if: (cond: boolean) => (name: string, fn?: Fn, t?: Timeout) => register(name, fn, t, !cond),
  skipIf: (cond: boolean) => (name: string, fn?: Fn, t?: Timeout) => register(name, fn, t, cond),
});
export const it = test;

export const describe = Object.assign((name: string, body: () => void) => group(name, body, false), {
  skip: (name: string, body: () => void) => group(name, body, true),
  todo: (name: string, body: () => void = () => {}) => group(`${name} (todo)`, body, true),
  if: (cond: boolean) => (name: string, body: () => void) => group(name, body, !cond),
  skipIf: (cond: boolean) => (name: string, body: () => void) => group(name, body, cond),
});

export const beforeAll = (fn: Fn) => void current.beforeAll.push(fn);
export const afterAll = (fn: Fn) => void current.afterAll.push(fn);
export const beforeEach = (fn: Fn) => void current.beforeEach.push(fn);
export const afterEach = (fn: Fn) => void current.afterEach.push(fn);

export { expect };

/** bun:test's module mocks have no Deno counterpart here: what needs them runs under Bun. */
export const mock = Object.assign(() => {
  throw new Error("mock() is bun:test's: run this under Bun");
}, {
  module: (specifier: string) => {
    throw new Error(`mock.module('${specifier}') is bun:test's: run this under Bun`);
  },
});
