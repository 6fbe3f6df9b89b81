// processes.ts — how tests and benches start child processes, in whichever runtime runs them
// (node:child_process, which Bun and Deno both implement). A script runs under this process's own
// runtime unless a caller names the other one (a job with a Bun rank and a Deno rank).
//
//   const r = runSync(evalArgv(`import ...; console.log(...)`), { cwd: root });
//   const child = start(scriptArgv(worker), { env });  await child.exited;
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { constants } from "node:os";
import { delimiter, join } from "node:path";
import type { Readable } from "node:stream";

import { runtime, type Runtime } from "../../lib/runtime/index.ts";

export type RuntimeName = Runtime["name"];

const root = join(import.meta.dirname, "..", "..");

/** What weft needs under Deno (README "From Deno", deno.json): FFI for libweft.so, the
 * environment (RANK, WEFT_*), the network (the rendezvous store), reading and writing (finding the
 * library; the store's token file under the temporary directory), the host name (grouping ranks
 * by host) and the user id (the token file's directory is the user's). */
export const DENO_PERMISSIONS = ["--allow-ffi", "--allow-env", "--allow-net", "--allow-read", "--allow-write", "--allow-sys=hostname,uid"];
/** What test workers add: starting tools. */
const DENO_TEST_PERMISSIONS = [...DENO_PERMISSIONS, "--allow-run"];

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const p = join(dir, name);
    if (dir && existsSync(p)) return p;
  }
  return undefined;
}

/** The binary of runtime `name`: this process's own, else node_modules/.bin/<name> (the pinned
 * devDependency), else `name` on PATH; undefined when there is none. */
export function runtimeBinary(name: RuntimeName): string | undefined {
  if (name === runtime.name) return process.execPath;
  // npm's deno package puts the binary at node_modules/deno/deno and a Node shim at .bin/deno that
  // runs it as a child: a signal to the shim never reaches the runtime, whose server then outlives
  // the test (and holds the test runner's output pipe open). Spawn the binary itself.
  const binary = join(root, "node_modules", name, name);
  if (name === "deno" && existsSync(binary)) return binary;
  const local = join(root, "node_modules", ".bin", name);
  return existsSync(local) ? local : onPath(name);
}

function binaryOf(name: RuntimeName): string {
  const bin = runtimeBinary(name);
  if (!bin) throw new Error(`no ${name} binary (looked in node_modules/.bin and on PATH): npm install provides it`);
  return bin;
}

// V8 flags (e.g. --expose-gc for runtime.collectGarbage) matter under Deno only: Bun runs
// JavaScriptCore and has Bun.gc.
const v8 = (flags: string[]) => (flags.length ? [`--v8-flags=${flags.join(",")}`] : []);

export interface ArgvOptions {
  /** Default: this process's runtime. */
  runtime?: RuntimeName;
  /** V8 flags, used under Deno only. */
  v8Flags?: string[];
  /** Under Deno, grant only DENO_PERMISSIONS (what the README tells users), not the workers' extras. */
  userPermissions?: boolean;
}

/** argv that runs `script`, with the test permissions under Deno. */
export function scriptArgv(script: string, opts: ArgvOptions = {}): string[] {
  const name = opts.runtime ?? runtime.name;
  const bin = binaryOf(name);
  if (name === "bun") return [bin, script];
  return [bin, "run", ...(opts.userPermissions ? DENO_PERMISSIONS : DENO_TEST_PERMISSIONS), ...v8(opts.v8Flags ?? []), script];
}

/** argv that runs TypeScript source `code` (relative imports resolve from the child's cwd; deno
 * eval grants every permission). */
export function evalArgv(code: string, opts: ArgvOptions = {}): string[] {
  const name = opts.runtime ?? runtime.name;
  const bin = binaryOf(name);
  return name === "deno" ? [bin, "eval", "--ext=ts", ...v8(opts.v8Flags ?? []), code] : [bin, "-e", code];
}

export interface SyncResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

/** Runs argv to completion; a binary that cannot start gives exitCode null and the reason in stderr. */
export function runSync(argv: readonly string[], opts: { cwd?: string; env?: Record<string, string | undefined> } = {}): SyncResult {
  const r = spawnSync(argv[0]!, argv.slice(1), { cwd: opts.cwd, env: opts.env ?? process.env, encoding: "utf8", maxBuffer: 256 << 20 });
  return { exitCode: r.status, stdout: r.stdout ?? "", stderr: (r.stderr ?? "") + (r.error ? String(r.error) : "") };
}

export interface Child {
  readonly pid: number;
  /** stdout, piped (stderr goes to this process's stderr). */
  readonly stdout: Readable;
  /** The exit status; 128 + the signal's number when a signal ended it (as a shell reports it). */
  readonly exited: Promise<number>;
  kill(signal?: NodeJS.Signals): void;
}

/** Starts argv with `env` as its whole environment, stdout piped. */
export function start(argv: readonly string[], env: Record<string, string | undefined>): Child {
  const proc = spawn(argv[0]!, argv.slice(1), { env, stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise<number>((resolve) => {
    proc.on("error", () => resolve(127));
    proc.on("exit", (code, signal) => resolve(code ?? 128 + (signal ? constants.signals[signal] ?? 0 : 0)));
  });
  return { pid: proc.pid ?? -1, stdout: proc.stdout!, exited, kill: (s) => void proc.kill(s) };
}

/** Everything a child prints on stdout, once it closes. */
export async function readAll(stream: AsyncIterable<Uint8Array | string>): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  for await (const chunk of stream) text += typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true });
  return text + decoder.decode();
}
