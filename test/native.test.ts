// Loader, ABI and native error plumbing. Loader failures are checked in child processes because a
// process loads libweft.so once.
import { describe, expect, test } from "./support/test-api.ts";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { DeviceError, LibraryError, WeftError } from "../lib/errors.ts";
import { ABI_VERSION, check, native, symbols } from "../lib/native.ts";
import { caught } from "./support/caught.ts";
import { evalArgv, runSync } from "./support/processes.ts";

const root = join(import.meta.dirname, "..");

/** Loads the library in a fresh process of this runtime with `env` and reports the error it threw, if any. */
function loadIn(env: Record<string, string>): { name?: string; code?: string; message?: string; ok?: boolean } {
  const script = `
    import { deviceCount } from "./lib/device.ts";
    try { deviceCount(); console.log(JSON.stringify({ ok: true })); }
    catch (e) { console.log(JSON.stringify({ name: e.name, code: e.code, message: e.message })); }`;
  const r = runSync(evalArgv(script), { cwd: root, env: { ...process.env, ...env } });
  const out = r.stdout.trim().split("\n").at(-1) ?? "";
  return JSON.parse(out);
}

describe("loader", () => {
  test("WEFT_LIBRARY pointing at a missing file says so and how to fix it", () => {
    const r = loadIn({ WEFT_LIBRARY: "/nonexistent/libweft.so" });
    expect(r.name).toBe("LibraryError");
    expect(r.code).toBe("E_LIBRARY_MISSING");
    expect(r.message).toContain("/nonexistent/libweft.so");
    expect(r.message).toContain("WEFT_LIBRARY");
  });

  test("WEFT_LIBRARY pointing at a file that is not a library is a load error", () => {
    const r = loadIn({ WEFT_LIBRARY: join(root, "package.json") });
    expect(r.name).toBe("LibraryError");
    expect(r.code).toBe("E_LIBRARY_LOAD");
    expect(r.message).toContain("npm run build");
  });

  test("a library with another ABI version is refused", () => {
    const dir = mkdtempSync(join(tmpdir(), "weft-abi-"));
    // A stand-in exporting every symbol of the table, whose weft_abi_version reports 999.
    const body = Object.keys(symbols).map((name) => name === "weft_abi_version"
      ? `int ${name}(int* v) { *v = 999; return 0; }`
      : name === "weft_last_error" ? `const char* ${name}(void) { return ""; }` : `int ${name}(void) { return 0; }`).join("\n");
    writeFileSync(join(dir, "stub.c"), body);
    const cc = runSync(["cc", "-shared", "-fPIC", "-o", join(dir, "libstub.so"), join(dir, "stub.c")]);
    expect(cc.exitCode).toBe(0);
    const r = loadIn({ WEFT_LIBRARY: join(dir, "libstub.so") });
    expect(r.code).toBe("E_ABI_MISMATCH");
    expect(r.message).toContain("999");
    expect(r.message).toContain(String(ABI_VERSION));
  });

  test("the built library loads and matches this package's ABI", () => {
    const v = new Int32Array(1);
    check(native().weft_abi_version(v), "test");
    expect(v[0]).toBe(ABI_VERSION);
  });
});

describe("native errors", () => {
  test("a failing call becomes the matching WeftError with the native file:line message", () => {
    const out = new BigUint64Array(1);
    const err = caught(() => check(native().weft_malloc(1 << 20, 16, out), "weft_malloc"));
    expect(err).toBeInstanceOf(DeviceError);
    expect(err).toBeInstanceOf(WeftError);
    const e = err as WeftError;
    expect(e.code).toBe("E_NO_DEVICE");
    expect(e.op).toBe("weft_malloc");
    expect(e.nativeMessage).toMatch(/\.cpp:\d+: device 1048576 is out of range/);
  });

  test("NULL out-pointers are rejected, not dereferenced", () => {
    expect(() => check(native().weft_device_count(null), "weft_device_count")).toThrow(/out_count must not be NULL/);
  });

  test("LibraryError is a WeftError", () => {
    expect(new LibraryError("x", { code: "E_LIBRARY_LOAD", op: "load" })).toBeInstanceOf(WeftError);
  });
});
