// expect.ts — the matchers the tests use, with bun:test's meaning, for runtimes without bun:test
// (test-api.ts uses it under Deno). Plain TypeScript, no runtime API. A matcher not written here
// fails with a message that says so, instead of "is not a function".
//
// Equality follows bun:test (and Jest): toBe is Object.is; toEqual compares recursively, ignores
// properties that are undefined and does not compare prototypes; toStrictEqual does both;
// toMatchObject checks that the received value has at least the expected properties.
import { inspect } from "node:util";

type Matcher = (received: unknown, ...expected: unknown[]) => { pass: boolean; message: string };

const show = (v: unknown) => inspect(v, { depth: 6, breakLength: 120, maxArrayLength: 20, maxStringLength: 400 });

function equals(a: unknown, b: unknown, strict: boolean, seen = new Map<object, object>()): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (seen.get(a) === b) return true;
  seen.set(a, b);
  if (strict && Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  if (a instanceof Date || b instanceof Date) return a instanceof Date && b instanceof Date && a.getTime() === b.getTime();
  if (a instanceof RegExp || b instanceof RegExp) return String(a) === String(b);
  if (a instanceof Error && b instanceof Error && (a.message !== b.message || a.name !== b.name)) return false;
  if (ArrayBuffer.isView(a) || ArrayBuffer.isView(b)) {
    if (!ArrayBuffer.isView(a) || !ArrayBuffer.isView(b) || a.constructor !== b.constructor) return false;
    const x = a as unknown as ArrayLike<unknown>, y = b as unknown as ArrayLike<unknown>;
    if (x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (!Object.is(x[i], y[i])) return false;
    return true;
  }
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && a.length !== (b as unknown[]).length) return false;
  if (a instanceof Map || b instanceof Map) {
    if (!(a instanceof Map) || !(b instanceof Map) || a.size !== b.size) return false;
    for (const [k, v] of a) if (!b.has(k) || !equals(v, b.get(k), strict, seen)) return false;
    return true;
  }
  if (a instanceof Set || b instanceof Set) {
    if (!(a instanceof Set) || !(b instanceof Set) || a.size !== b.size) return false;
    for (const v of a) if (!b.has(v) && ![...b].some((w) => equals(v, w, strict, seen))) return false;
    return true;
  }
  const keys = (o: object) => Object.keys(o).filter((k) => strict || (o as Record<string, unknown>)[k] !== undefined);
  const ka = keys(a), kb = keys(b);
  if (ka.length !== kb.length) return false;
  for (const k of ka) {
    if (strict && !Object.prototype.hasOwnProperty.call(b, k)) return false;
    if (!equals((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], strict, seen)) return false;
  }
  return true;
}

/** toMatchObject: every property of `expected` matches in `received`, recursively. */
function matches(received: unknown, expected: unknown): boolean {
  if (typeof expected !== "object" || expected === null || expected instanceof Date || expected instanceof RegExp) return equals(received, expected, false);
  if (typeof received !== "object" || received === null) return false;
  if (Array.isArray(expected)) {
    return Array.isArray(received) && received.length === expected.length && expected.every((e, i) => matches(received[i], e));
  }
  return Object.keys(expected).every((k) => k in (received as object) && matches((received as Record<string, unknown>)[k], (expected as Record<string, unknown>)[k]));
}

function thrownMatches(thrown: unknown, expected: unknown): boolean {
  if (expected === undefined) return true;
  const message = thrown instanceof Error ? thrown.message : String(thrown);
  if (typeof expected === "string") return message.includes(expected);
  if (expected instanceof RegExp) return expected.test(message);
  if (typeof expected === "function") return thrown instanceof expected;
  if (expected instanceof Error) return message === expected.message;
  if (typeof expected === "object" && expected !== null) return matches(thrown, expected);
  return false;
}

function throwsOf(received: unknown): { threw: boolean; thrown?: unknown } {
  if (typeof received !== "function") throw new TypeError(`toThrow needs a function (got ${show(received)})`);
  try {
    (received as () => unknown)();
    return { threw: false };
  } catch (e) {
    return { threw: true, thrown: e };
  }
}

const number = (name: string, v: unknown) => {
  if (typeof v !== "number" && typeof v !== "bigint") throw new TypeError(`${name} needs a number (got ${show(v)})`);
  return v as number;
};

function getPath(o: unknown, path: string | readonly (string | number)[]): { found: boolean; value?: unknown } {
  const parts = typeof path === "string" ? path.split(".") : path;
  let cur: unknown = o;
  for (const p of parts) {
    if (cur === null || cur === undefined || !(p in Object(cur))) return { found: false };
    cur = (cur as Record<string | number, unknown>)[p];
  }
  return { found: true, value: cur };
}

const MATCHERS: Record<string, Matcher> = {
  toBe: (r, e) => ({ pass: Object.is(r, e), message: `Expected: ${show(e)}\nReceived: ${show(r)}` }),
  toEqual: (r, e) => ({ pass: equals(r, e, false), message: `Expected: ${show(e)}\nReceived: ${show(r)}` }),
  toStrictEqual: (r, e) => ({ pass: equals(r, e, true), message: `Expected: ${show(e)}\nReceived: ${show(r)}` }),
  toMatchObject: (r, e) => ({ pass: matches(r, e), message: `Expected to contain: ${show(e)}\nReceived: ${show(r)}` }),
  toContain: (r, e) => ({
    pass: typeof r === "string" ? r.includes(String(e)) : r !== null && typeof r === "object" && Symbol.iterator in r && [...(r as Iterable<unknown>)].some((x) => Object.is(x, e) || x === e),
    message: `Expected to contain: ${show(e)}\nReceived: ${show(r)}`,
  }),
  toContainEqual: (r, e) => ({ pass: [...(r as Iterable<unknown>)].some((x) => equals(x, e, false)), message: `Expected to contain equal: ${show(e)}\nReceived: ${show(r)}` }),
  toHaveLength: (r, n) => ({ pass: (r as { length?: unknown })?.length === n, message: `Expected length: ${n}\nReceived length: ${(r as { length?: unknown })?.length}` }),
  toHaveProperty: (r, path, ...value) => {
    const got = getPath(r, path as string);
    const pass = got.found && (value.length === 0 || equals(got.value, value[0], false));
    return { pass, message: `Expected property ${show(path)}${value.length ? ` = ${show(value[0])}` : ""}\nReceived: ${show(r)}` };
  },
  toBeTruthy: (r) => ({ pass: !!r, message: `Received: ${show(r)}` }),
  toBeFalsy: (r) => ({ pass: !r, message: `Received: ${show(r)}` }),
  toBeNull: (r) => ({ pass: r === null, message: `Received: ${show(r)}` }),
  toBeUndefined: (r) => ({ pass: r === undefined, message: `Received: ${show(r)}` }),
  toBeDefined: (r) => ({ pass: r !== undefined, message: `Received: ${show(r)}` }),
  toBeNaN: (r) => ({ pass: Number.isNaN(r), message: `Received: ${show(r)}` }),
  toBeTypeOf: (r, t) => ({ pass: typeof r === t, message: `Expected type: ${t}\nReceived: ${typeof r} ${show(r)}` }),
  toBeInstanceOf: (r, c) => ({ pass: r instanceof (c as new () => unknown), message: `Expected instance of: ${(c as { name?: string }).name}\nReceived: ${show(r)}` }),
  toBeGreaterThan: (r, n) => ({ pass: number("toBeGreaterThan", r) > number("toBeGreaterThan", n), message: `Expected: > ${show(n)}\nReceived: ${show(r)}` }),
  toBeGreaterThanOrEqual: (r, n) => ({ pass: number("toBeGreaterThanOrEqual", r) >= number("toBeGreaterThanOrEqual", n), message: `Expected: >= ${show(n)}\nReceived: ${show(r)}` }),
  toBeLessThan: (r, n) => ({ pass: number("toBeLessThan", r) < number("toBeLessThan", n), message: `Expected: < ${show(n)}\nReceived: ${show(r)}` }),
  toBeLessThanOrEqual: (r, n) => ({ pass: number("toBeLessThanOrEqual", r) <= number("toBeLessThanOrEqual", n), message: `Expected: <= ${show(n)}\nReceived: ${show(r)}` }),
  toBeCloseTo: (r, n, digits = 2) => {
    const bound = 10 ** -(digits as number) / 2;
    return { pass: Math.abs(number("toBeCloseTo", r) - number("toBeCloseTo", n)) < bound, message: `Expected: ${show(n)} (± ${bound})\nReceived: ${show(r)}` };
  },
  toMatch: (r, e) => ({
    pass: typeof r === "string" && (e instanceof RegExp ? e.test(r) : r.includes(String(e))),
    message: `Expected to match: ${show(e)}\nReceived: ${show(r)}`,
  }),
  toStartWith: (r, e) => ({ pass: typeof r === "string" && r.startsWith(String(e)), message: `Expected to start with: ${show(e)}\nReceived: ${show(r)}` }),
  toEndWith: (r, e) => ({ pass: typeof r === "string" && r.endsWith(String(e)), message: `Expected to end with: ${show(e)}\nReceived: ${show(r)}` }),
  toThrow: (r, e) => {
    const t = throwsOf(r);
    return { pass: t.threw && thrownMatches(t.thrown, e), message: `Expected to throw: ${e === undefined ? "anything" : show(e)}\n${t.threw ? `Thrown: ${show(t.thrown)}` : "Nothing was thrown"}` };
  },
};
MATCHERS.toThrowError = MATCHERS.toThrow!;

export class ExpectationError extends Error {
  override name = "ExpectationError";
}

type Mode = { not: boolean; promise?: "resolves" | "rejects" };

function settle(name: string, mode: Mode, matcher: Matcher, received: unknown, args: unknown[]): void {
  // A rejected promise's reason is what toThrow-like matchers look at: wrap it as a thrower.
  const value = mode.promise === "rejects" && (name === "toThrow" || name === "toThrowError") ? () => { throw received; } : received;
  const { pass, message } = matcher(value, ...args);
  if (pass === mode.not) {
    const call = `expect(received)${mode.promise ? `.${mode.promise}` : ""}${mode.not ? ".not" : ""}.${name}()`;
    throw new ExpectationError(`${call}\n\n${mode.not ? "Expected the opposite of:\n" : ""}${message}`);
  }
}

function matchers(received: unknown, mode: Mode): Record<string, unknown> {
  return new Proxy({}, {
    get(_, prop) {
      if (prop === "not") return matchers(received, { ...mode, not: !mode.not });
      if (prop === "resolves" || prop === "rejects") return matchers(received, { ...mode, promise: prop });
      if (typeof prop !== "string" || prop === "then") return undefined;
      const matcher = MATCHERS[prop];
      if (!matcher) {
        return () => {
          throw new Error(`expect(...).${prop} is not implemented by test/support/expect.ts (the bun:test matchers for other runtimes): add it there`);
        };
      }
      return (...args: unknown[]) => {
        if (!mode.promise) return settle(prop, mode, matcher, received, args);
        return Promise.resolve(received).then(
          (v) => {
            if (mode.promise === "rejects") throw new ExpectationError(`expect(received).rejects.${prop}(): the promise resolved with ${show(v)}`);
            settle(prop, mode, matcher, v, args);
          },
          (e) => {
            if (mode.promise === "resolves") throw new ExpectationError(`expect(received).resolves.${prop}(): the promise rejected with ${show(e)}`);
            settle(prop, mode, matcher, e, args);
          },
        );
      };
    },
  });
}

/** expect(value).matcher(...), as in bun:test. */
export function expect(received: unknown): Record<string, unknown> {
  return matchers(received, { not: false });
}
