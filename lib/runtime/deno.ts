// deno.ts — the Runtime adapter for Deno (Deno.dlopen, Deno.UnsafePointer, Deno.UnsafePointerView).
//
// lib/ passes addresses as plain numbers and out-parameters as small typed arrays. Deno's
// "pointer" type takes neither (it wants pointer objects), so a "ptr" argument is declared "usize":
// a number passes as is, and only a typed array or null is converted, to the address of its bytes
// or 0. A symbol with no "ptr" argument and no string result is Deno's own function, unwrapped.
// Symbols marked offThread are opened a second time with `nonblocking: true`: Deno runs those
// calls on a worker thread and returns a Promise, so a blocking native wait leaves the event loop
// free.
import { pointerArgs, type NativeLibrary, type NativeType, type Runtime, type SymbolSpec, type SymbolTable } from "./runtime.ts";

// The part of Deno's API used here (tsconfig loads Bun's types, not Deno's).
type PointerObject = object;
interface DenoApi {
  version: { deno: string };
  dlopen(path: string, symbols: Record<string, DenoSymbol>): { symbols: Record<string, (...a: unknown[]) => unknown>; close(): void };
  UnsafePointer: {
    of(view: ArrayBufferView): PointerObject | null;
    value(p: PointerObject | null): number | bigint;
    create(address: bigint): PointerObject | null;
  };
  UnsafePointerView: {
    getCString(p: PointerObject): string;
    getArrayBuffer(p: PointerObject, bytes: number): ArrayBuffer;
  };
}
interface DenoSymbol {
  name?: string;
  parameters: string[];
  result: string;
  nonblocking?: boolean;
}

// Read when the adapter is created: under Bun this module is loaded but never used.
let Deno: DenoApi;

const TYPES: Record<NativeType, string> = {
  i32: "i32", u32: "u32", i64: "i64", u64: "u64", f32: "f32", f64: "f64", ptr: "usize", cstring: "pointer",
};

const OFF_THREAD = ":offThread";

function denoSymbol(spec: SymbolSpec, name?: string): DenoSymbol {
  return { name, parameters: spec.args.map((t) => TYPES[t]), result: TYPES[spec.returns], nonblocking: name !== undefined };
}

function address(a: unknown): number | bigint {
  if (a === null || a === undefined) return 0;
  if (typeof a === "bigint") return a;
  if (ArrayBuffer.isView(a)) return Deno.UnsafePointer.value(Deno.UnsafePointer.of(a));
  throw new TypeError(`a pointer argument must be an address, a typed array or null (got ${typeof a})`);
}

const cstring = (p: unknown): string | null => (p === null ? null : Deno.UnsafePointerView.getCString(p as PointerObject));

function bind(fn: (...a: unknown[]) => unknown, spec: SymbolSpec): (...a: unknown[]) => unknown {
  const pointers = pointerArgs(spec);
  const text = spec.returns === "cstring";
  if (pointers.length === 0 && !text) return fn;
  return (...args: unknown[]) => {
    for (const i of pointers) if (typeof args[i] !== "number") args[i] = address(args[i]);
    const r = fn(...args);
    return text ? cstring(r) : r;
  };
}

/** The worker-thread form: the typed arrays passed in stay referenced until the call returns,
 * since native code writes into them from the worker. */
function bindOffThread(fn: (...a: unknown[]) => unknown, spec: SymbolSpec): (...a: unknown[]) => Promise<unknown> {
  const pointers = pointerArgs(spec);
  return (...args: unknown[]) => {
    const held = args.slice();
    for (const i of pointers) if (typeof args[i] !== "number") args[i] = address(args[i]);
    return (fn(...args) as Promise<unknown>).then((r) => {
      held.length = 0;
      return spec.returns === "cstring" ? cstring(r) : r;
    });
  };
}

function open<T extends SymbolTable>(path: string, table: T): NativeLibrary<T> {
  const defs: Record<string, DenoSymbol> = {};
  for (const [name, spec] of Object.entries(table)) {
    defs[name] = denoSymbol(spec);
    if (spec.offThread) defs[name + OFF_THREAD] = denoSymbol(spec, name);
  }
  const lib = Deno.dlopen(path, defs);
  const symbols: Record<string, unknown> = {};
  const offThread: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(table)) {
    symbols[name] = bind(lib.symbols[name]!, spec);
    if (spec.offThread) offThread[name] = bindOffThread(lib.symbols[name + OFF_THREAD]!, spec);
  }
  return { symbols: symbols as NativeLibrary<T>["symbols"], offThread: offThread as NativeLibrary<T>["offThread"], close: () => lib.close() };
}

function at(address: number): PointerObject {
  const p = Deno.UnsafePointer.create(BigInt(address));
  if (p === null) throw new TypeError("a native view or string needs a non-null address");
  return p;
}

export function createDenoRuntime(): Runtime {
  Deno = (globalThis as unknown as { Deno: DenoApi }).Deno;
  return {
    name: "deno",
    version: Deno.version.deno,
    open,
    addressOf: (view) => Number(Deno.UnsafePointer.value(Deno.UnsafePointer.of(view))),
    viewNative: (address, bytes) => Deno.UnsafePointerView.getArrayBuffer(at(address), bytes),
    readCString: (address) => Deno.UnsafePointerView.getCString(at(address)),
    collectGarbage: () => {
      const gc = (globalThis as { gc?: () => void }).gc;
      if (!gc) throw new Error("collectGarbage under Deno needs --v8-flags=--expose-gc");
      gc();
    },
  };
}
