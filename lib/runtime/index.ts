// index.ts — picks the runtime adapter once, at load: Deno's when the Deno namespace is there,
// Bun's when Bun's is. Both adapter modules load in both runtimes, but only the chosen one's
// factory runs, so neither runtime ever resolves the other's built-ins (bun:ffi does not exist in
// Deno). Anything else (Node has no FFI) is refused with a message that says so.
import { createBunRuntime } from "./bun.ts";
import { createDenoRuntime } from "./deno.ts";
import type { Runtime } from "./runtime.ts";

export { T, type NativeLibrary, type NativeType, type PointerArg, type Runtime, type SymbolSpec, type SymbolTable } from "./runtime.ts";

const g = globalThis as { Deno?: { version?: { deno?: string } }; Bun?: { version?: string } };

function pick(): Runtime {
  if (typeof g.Deno?.version?.deno === "string") return createDenoRuntime();
  if (typeof g.Bun?.version === "string") return createBunRuntime();
  throw new Error(`weft runs under Bun or Deno, whose FFI it uses; this runtime (${typeof process === "object" ? `node ${process.versions?.node}` : "unknown"}) ` +
    "has neither. Run it with `bun` or `deno run --allow-ffi --allow-env --allow-net --allow-read --allow-write --allow-sys=hostname,uid`.");
}

export const runtime: Runtime = pick();
