// NativeHandle, the base of every class that owns a native object (lib/handle.ts), exercised with
// a stand-in subclass: no native library, no GPU.
import { describe, expect, test } from "./support/test-api.ts";
import { join } from "node:path";

import { DisposedError, UnsupportedError } from "../lib/errors.ts";
import { NativeHandle, teardown, teardownAsync } from "../lib/handle.ts";
import { evalArgv, runSync } from "./support/processes.ts";

class Thing extends NativeHandle {
  destroyed: number[] = [];
  fail: Error | undefined;
  constructor(pointer: number) {
    super(pointer, `Thing ${pointer}`, null);
  }
  get pointer(): number {
    return this.pointerFor("Thing.pointer");
  }
  protected destroy(pointer: number): void {
    this.destroyed.push(pointer);
    if (this.fail) throw this.fail;
  }
}

class Collective extends NativeHandle<Promise<void>> {
  steps = 0;
  constructor(readonly fail?: Error) {
    super(7, "Collective 7", null);
  }
  protected async destroy(): Promise<void> {
    this.steps++;
    await new Promise((r) => setTimeout(r, 5));
    if (this.fail) throw this.fail;
  }
  override [Symbol.dispose](): void {
    this.refuseSyncDispose("Collective[Symbol.dispose]");
  }
}

describe("NativeHandle", () => {
  test("guard and the pointer throw DisposedError after dispose(); destroy runs once with the pointer", () => {
    const t = new Thing(42);
    expect(t.pointer).toBe(42);
    t.dispose();
    t.dispose();
    expect(t.destroyed).toEqual([42]);
    expect(t.disposed).toBe(true);
    expect(() => t.pointer).toThrow(DisposedError);
    expect(() => t.guard("Thing.use")).toThrow(/Thing.use: Thing 42 was used after dispose\(\)/);
  });

  test("an error in destroy reaches the first caller; the object is disposed either way", () => {
    const t = new Thing(1);
    t.fail = new Error("native free failed");
    expect(() => t.dispose()).toThrow("native free failed");
    expect(t.disposed).toBe(true);
    expect(() => t.dispose()).not.toThrow();
    expect(t.destroyed).toEqual([1]);
  });

  test("`using` disposes at the end of the scope", () => {
    let kept: Thing;
    {
      using t = new Thing(3);
      kept = t;
    }
    expect(kept.destroyed).toEqual([3]);
  });

  test("an async teardown returns the same Promise to every caller and rejects with its error", async () => {
    const c = new Collective(new Error("barrier timed out"));
    const a = c.dispose();
    const b = c.dispose();
    expect(a).toBe(b);
    await expect(a).rejects.toThrow("barrier timed out");
    expect(c.steps).toBe(1);
    const ok = new Collective();
    {
      await using x = ok;
      expect(x.disposed).toBe(false);
    }
    expect(ok.disposed).toBe(true);
  });

  test("`using` on a handle with a collective teardown is refused before anything is torn down", () => {
    const c = new Collective();
    expect(() => c[Symbol.dispose]()).toThrow(UnsupportedError);
    expect(() => c[Symbol.dispose]()).toThrow(/await using/);
    expect(c.disposed).toBe(false);
    expect(c.steps).toBe(0);
  });

  test("a handle garbage-collected without dispose() gets one warning (in a child process)", () => {
    const script = `
      import { NativeHandle } from "./lib/handle.ts";
      import { runtime } from "./lib/runtime/index.ts";
      class Leaky extends NativeHandle { constructor() { super(9, "Leaky 9", "its memory stays"); } destroy() {} }
      const warnings = [];
      console.warn = (m) => warnings.push(String(m));
      (() => { new Leaky(); })();
      const disposed = new Leaky(); disposed.dispose();
      for (let i = 0; i < 20 && warnings.length === 0; i++) { runtime.collectGarbage(); await new Promise((r) => setTimeout(r, 10)); }
      console.log(JSON.stringify(warnings));`;
    const r = runSync(evalArgv(script, { v8Flags: ["--expose-gc"] }), { cwd: join(import.meta.dirname, "..") });
    expect(r.exitCode).toBe(0);
    const warnings = JSON.parse(r.stdout.trim().split("\n").at(-1)!);
    expect(warnings).toEqual(["weft: Leaky 9 was garbage-collected without dispose(): its memory stays. Call dispose() or declare it with `using`."]);
  });
});

describe("teardown", () => {
  test("runs every step after a failure and reports one failure as itself", () => {
    const ran: number[] = [];
    const boom = new Error("step 2");
    expect(() => teardown("op", [() => ran.push(1), () => { throw boom; }, () => ran.push(3)])).toThrow(boom);
    expect(ran).toEqual([1, 3]);
  });

  test("reports several failures together, none dropped", async () => {
    let err: unknown;
    try {
      await teardownAsync("Thing.dispose", [async () => { throw new Error("a"); }, () => 1, () => { throw new Error("b"); }]);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AggregateError);
    expect((err as AggregateError).errors.map((e: Error) => e.message)).toEqual(["a", "b"]);
    expect((err as Error).message).toContain("Thing.dispose: 2 teardown steps failed: a; b");
  });
});
