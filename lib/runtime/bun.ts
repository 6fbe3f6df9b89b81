// bun.ts — the Runtime adapter for Bun (bun:ffi). Bun takes the table's type names as they are,
// passes numbers and typed arrays to "ptr" arguments itself and returns "cstring" results as JS
// strings, so the symbols are Bun's own functions, unwrapped: an FFI call costs what bun:ffi
// costs. Bun has no worker-thread FFI call, so `offThread` is undefined and callers poll instead.
//
// bun:ffi is required, not imported: a static import would make Deno resolve it when it loads
// lib/runtime/index.ts, and a dynamic one would need a top-level await, which makes every module
// above it asynchronous (a Worker importing lib/ would then miss messages posted before its
// handler is set).
import type { FFIFunction, Pointer } from "bun:ffi";
import { createRequire } from "node:module";

import { bunSockets } from "./bun-sockets.ts";
import type { BoundSymbols, NativeLibrary, Runtime, SymbolTable } from "./runtime.ts";

export function createBunRuntime(): Runtime {
  const { CString, dlopen, ptr, toArrayBuffer } = createRequire(import.meta.url)("bun:ffi") as typeof import("bun:ffi");
  return {
    name: "bun",
    version: Bun.version,
    sockets: bunSockets,
    open<T extends SymbolTable>(path: string, table: T): NativeLibrary<T> {
      const lib = dlopen(path, table as unknown as Record<string, FFIFunction>);
      return { symbols: lib.symbols as unknown as BoundSymbols<T>, offThread: undefined, close: () => lib.close() };
    },
    addressOf: (view) => ptr(view as Uint8Array) as number,
    viewNative: (address, bytes) => toArrayBuffer(address as Pointer, 0, bytes),
    readCString: (address) => new CString(address as Pointer).toString(),
    collectGarbage: () => Bun.gc(true),
  };
}
