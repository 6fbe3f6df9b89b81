// caught.ts (test support) — what a call threw, for tests that check several things about one
// error (its class, the argument it names, its message) rather than toThrow's one pattern.

/** What `fn` throws; undefined when it returns. */
export function caught(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  return undefined;
}
