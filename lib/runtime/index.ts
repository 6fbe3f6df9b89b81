// index.ts — picks the runtime adapter once, at load: Deno's when the Deno namespace is there,
// otherwise Bun's. Both adapter modules load in both runtimes, but only the chosen one's factory
// runs, so neither runtime ever resolves the other's built-ins (bun:ffi does not exist in Deno).
import { createBunRuntime } from "./bun.ts";
import { createDenoRuntime } from "./deno.ts";
import type { Runtime } from "./runtime.ts";

export type { NativeLibrary, NativeType, PointerArg, Runtime, SymbolSpec, SymbolTable } from "./runtime.ts";

const isDeno = typeof (globalThis as { Deno?: { version?: { deno?: string } } }).Deno?.version?.deno === "string";

export const runtime: Runtime = isDeno ? createDenoRuntime() : createBunRuntime();
