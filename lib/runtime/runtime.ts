// runtime.ts — what weft needs from a JavaScript runtime (its FFI, and TCP for the rendezvous store:
// sockets.ts), in one runtime-neutral shape. The adapters beside this file (bun.ts, deno.ts)
// implement it; index.ts picks one at load. Nothing here touches a runtime: the symbol table in
// lib/native.ts is written in these type names, and its TypeScript signatures are derived from them.
import type { Sockets } from "./sockets.ts";

/** C types of arguments and results. "ptr" is any address (void*, T*, a handle); "cstring" is a
 * result only: a NUL-terminated string owned by native code, returned as a JS string. */
export type NativeType = "i32" | "u32" | "i64" | "u64" | "f32" | "f64" | "ptr" | "cstring";

/** The type names as constants, for tables: `{ args: [T.ptr, T.u64], returns: T.i32 }`. */
export const T = {
  i32: "i32", u32: "u32", i64: "i64", u64: "u64", f32: "f32", f64: "f64", ptr: "ptr", cstring: "cstring",
} as const satisfies { [K in NativeType]: K };

export interface SymbolSpec {
  readonly args: readonly NativeType[];
  readonly returns: NativeType;
  /** Also offer this symbol as a call that runs on a worker thread and returns a Promise (Deno's
   * `nonblocking`), for calls that block in native code (a stream synchronize). */
  readonly offThread?: boolean;
}

export type SymbolTable = { readonly [name: string]: SymbolSpec };

/** What a "ptr" argument takes: an address, a typed array (passed by the address of its bytes for
 * the duration of the call), or null. */
export type PointerArg = number | ArrayBufferView | null;

type ArgOf<T> = T extends "ptr" ? PointerArg : T extends "i64" | "u64" ? number | bigint : number;
type ResultOf<T> = T extends "cstring" ? string | null : T extends "i64" | "u64" ? number | bigint : number;
// A mapped type over a type parameter keeps the tuple a tuple (one over S["args"] would not).
type MapArgs<A extends readonly NativeType[]> = { -readonly [K in keyof A]: ArgOf<A[K]> };
type ArgsOf<S extends SymbolSpec> = MapArgs<S["args"]>;

/** The JS signature of one symbol. */
export type NativeFunction<S extends SymbolSpec> = (...args: ArgsOf<S>) => ResultOf<S["returns"]>;
/** The same symbol, run on a worker thread. */
export type OffThreadFunction<S extends SymbolSpec> = (...args: ArgsOf<S>) => Promise<ResultOf<S["returns"]>>;

export type BoundSymbols<T extends SymbolTable> = { [K in keyof T]: NativeFunction<T[K]> };
export type OffThreadSymbols<T extends SymbolTable> = {
  [K in keyof T as T[K] extends { offThread: true } ? K : never]: OffThreadFunction<T[K]>;
};

export interface NativeLibrary<T extends SymbolTable> {
  readonly symbols: BoundSymbols<T>;
  /** The offThread symbols as worker-thread calls, or undefined where the runtime has none (Bun):
   * the caller then waits another way (polling a query) so that the event loop stays free. */
  readonly offThread: OffThreadSymbols<T> | undefined;
  close(): void;
}

export interface Runtime {
  readonly name: "bun" | "deno";
  readonly version: string;
  /** dlopen: throws the runtime's own error when `path` cannot be loaded or lacks a symbol. */
  open<T extends SymbolTable>(path: string, table: T): NativeLibrary<T>;
  /** Address of a typed array's bytes, valid only while the array is referenced and not resized. */
  addressOf(view: ArrayBufferView): number;
  /** A zero-copy ArrayBuffer over `bytes` bytes of native memory at `address`, with no
   * deallocator: detaching it (ArrayBuffer.prototype.transfer(0)) frees nothing. */
  viewNative(address: number, bytes: number): ArrayBuffer;
  /** The NUL-terminated string at `address`. */
  readCString(address: number): string;
  /** A full garbage collection now (tests of the leak warnings). Deno needs --v8-flags=--expose-gc. */
  collectGarbage(): void;
  /** TCP for the rendezvous store, over the runtime's own sockets. */
  readonly sockets: Sockets;
}

/** Indices of a symbol's "ptr" arguments, for adapters that convert them. */
export function pointerArgs(spec: SymbolSpec): number[] {
  return spec.args.flatMap((t, i) => (t === "ptr" ? [i] : []));
}
