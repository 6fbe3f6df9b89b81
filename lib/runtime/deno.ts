// deno.ts — the Runtime adapter for Deno (Deno.dlopen, Deno.UnsafePointer, Deno.UnsafePointerView).
//
// lib/ passes a "ptr" argument as a plain number (an address) or as a typed array (an out-parameter,
// a packed struct). Deno's types take one or the other: "usize" a number, "buffer" a typed array,
// each at full speed; turning a typed array into a number (UnsafePointer.of, then value) costs
// about 0.8 µs a call, ten times the call itself (bench/DECISIONS.md "Deno binds each pointer
// argument by what is passed"). So each symbol is bound once per combination of kinds its callers
// pass (a bit per "ptr" argument, looked up per call; a symbol sees one to three combinations),
// all-"usize" at open() and the others on first use. null passes as 0. A symbol with no 64-bit
// argument and no string result is Deno's own function, unwrapped.
//
// Symbols marked offThread are also bound with `nonblocking: true`: Deno runs those calls on a
// worker thread and returns a Promise, so a blocking native wait leaves the event loop free. Their
// typed-array arguments are turned into addresses (their buffers never move once Deno has taken
// an address) and held until the call returns.
import { denoSockets } from "./deno-sockets.ts";
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

type Fn = (...a: unknown[]) => unknown;

/** Deno's definition of `spec`; bit j of `buffers` set: the j-th "ptr" argument is a "buffer". */
function denoSymbol(spec: SymbolSpec, buffers = 0, nonblocking = false, name?: string): DenoSymbol {
  let j = 0;
  const parameters = spec.args.map((t): string => (t === "ptr" ? ((buffers >> j++) & 1 ? "buffer" : "usize") : TYPES[t]));
  return { name, parameters, result: TYPES[spec.returns], nonblocking };
}

function address(a: unknown): number | bigint {
  if (a === null || a === undefined) return 0;
  if (typeof a === "number" || typeof a === "bigint") return a;
  if (ArrayBuffer.isView(a)) return Deno.UnsafePointer.value(Deno.UnsafePointer.of(a));
  throw new TypeError(`a pointer argument must be an address, a typed array or null (got ${typeof a})`);
}

const cstring = (p: unknown): string | null => (p === null ? null : Deno.UnsafePointerView.getCString(p as PointerObject));

// Numbers for 64-bit arguments ("usize", "u64", "i64") are passed as BigInts: Deno's fast call
// takes those (8 ns), and a Number there falls back to its slow path (150 ns); BigInt(n) itself
// costs about as much as the slow path, so the last BigInt made for each of 1024 slots (hashed from
// the number: a launch passes the same handles and sizes every time) is kept and reused.
const cachedKeys = new Float64Array(1024).fill(NaN);
const cachedBigs: bigint[] = new Array<bigint>(1024).fill(0n);

function big(n: number): bigint {
  const slot = ((n >>> 8) ^ (n >>> 18) ^ (n / 4294967296)) & 1023;
  if (cachedKeys[slot] === n) return cachedBigs[slot]!;
  const b = BigInt(n);
  cachedKeys[slot] = n;
  cachedBigs[slot] = b;
  return b;
}

/** The synchronous form: converts what it must, then calls the variant for the kinds passed
 * (binding it on first use). The wrapper is generated with the symbol's own arity: a rest-args
 * wrapper that spreads into the call defeats Deno's fast call (about 90 ns against 7 ns). Its
 * source is built from the table's types, argument indices and the symbol's name only. */
function bind(path: string, name: string, spec: SymbolSpec, allNumbers: Fn): Fn {
  const text = spec.returns === "cstring";
  const params = spec.args.map((_, i) => `a${i}`);
  // x<i>: what goes to Deno for argument i (a new binding, not a reassigned parameter: a parameter
  // that changes from number to bigint makes the JIT give up on the fast call).
  const passed = [...params];
  const steps: string[] = [];
  let bit = 1;
  spec.args.forEach((t, i) => {
    const a = `a${i}`, x = `x${i}`;
    if (t === "ptr") {
      steps.push(`const ${x} = typeof ${a} === "number" ? big(${a}) : ${a} === null || ${a} === undefined ? 0n : ` +
        `ArrayBuffer.isView(${a}) ? (m |= ${bit}, ${a}) : typeof ${a} === "bigint" ? ${a} : bad(${a});`);
      bit <<= 1;
    } else if (t === "u64" || t === "i64") {
      steps.push(`const ${x} = typeof ${a} === "number" ? big(${a}) : ${a};`);
    } else {
      return;
    }
    passed[i] = x;
  });
  if (steps.length === 0) return text ? () => cstring(allNumbers()) : allNumbers;
  const variants: Fn[] = [allNumbers];
  const variant = (buffers: number): Fn => (variants[buffers] = Deno.dlopen(path, { [name]: denoSymbol(spec, buffers) }).symbols[name]!);
  const bad = (a: unknown): never => {
    throw new TypeError(`${name}: a pointer argument must be an address, a typed array or null (got ${typeof a})`);
  };
  const call = `(m === 0 ? raw : variants[m] ?? variant(m))(${passed.join(", ")})`;
  if (!/^\w+$/.test(name)) throw new TypeError(`symbol name '${name}' is not an identifier`);
  // Named after the symbol: identical source for two symbols would share one compiled function,
  // whose call to `raw` would then see every symbol's target and stop being a fast call.
  const source = `return function ${name}(${params.join(", ")}) {\n  let m = 0;\n  ${steps.join("\n  ")}\n  return ${text ? `cstring(${call})` : call};\n};`;
  return new Function("raw", "variants", "variant", "big", "cstring", "bad", source)(allNumbers, variants, variant, big, cstring, bad) as Fn;
}

/** The worker-thread form: the typed arrays passed in stay referenced until the call returns,
 * since native code may write into them from the worker. */
function bindOffThread(fn: Fn, spec: SymbolSpec): (...a: unknown[]) => Promise<unknown> {
  const pointers = pointerArgs(spec);
  return (...args: unknown[]) => {
    const held = args.slice();
    for (const i of pointers) args[i] = address(args[i]);
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
    if (spec.offThread) defs[name + OFF_THREAD] = denoSymbol(spec, 0, true, name);
  }
  // Every symbol, all-"usize", at once: a missing symbol fails here, not at its first call.
  const lib = Deno.dlopen(path, defs);
  const symbols: Record<string, unknown> = {};
  const offThread: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(table)) {
    symbols[name] = bind(path, name, spec, lib.symbols[name]!);
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
    sockets: denoSockets(Deno as unknown as Parameters<typeof denoSockets>[0]),
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
