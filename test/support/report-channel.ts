// report-channel.ts — how the multi-process tests talk to their rank processes: a worker prints
// one JSON object per line on stdout (report), the parent spawns it and reads those objects in
// order (spawnWorker, nextReport), skipping any other output. Used by the bootstrap, transport,
// comm and TP tests and by bench/proxy.ts. No test-api import: workers load this too. Workers run
// under this process's runtime unless `runtime` names the other (processes.ts).
import { createServer } from "node:net";

import { Store } from "../../lib/bootstrap.ts";
import { readAll, scriptArgv, start, type Child, type RuntimeName } from "./processes.ts";

/** Worker side: one result line. */
export function report(x: unknown): void {
  process.stdout.write(JSON.stringify(x) + "\n");
}

/** Worker side: the fields of an error that a parent test asserts on. */
export function describeError(e: unknown): { error: string; code?: string; message: string } {
  const err = e as Error & { code?: string };
  return { error: err.name, code: err.code, message: err.message };
}

/** Worker side: joins the TCP store of the parent test (rank 0 hosts it on a free port and reports
 * {"port": n}); a failed connect is reported as {rank, connect: true, error...} and ends the worker. */
export async function connectWorkerStore(rank: number, worldSize: number, timeoutMs: number): Promise<Store> {
  try {
    const store = await Store.connect({ rank, worldSize, addr: "127.0.0.1", port: Number(process.env.MASTER_PORT ?? 0), timeoutMs });
    if (rank === 0) report({ port: store.port });
    return store;
  } catch (e) {
    report({ rank, connect: true, ...describeError(e) });
    process.exit(0);
  }
}

/** Parent side: the JSON objects a child prints one per line. */
export async function* jsonLines(stream: AsyncIterable<Uint8Array | string>): AsyncGenerator<any> {
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of stream) {
    buf += typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line.startsWith("{")) yield JSON.parse(line);
    }
  }
}

export interface Worker {
  proc: Child;
  lines: AsyncGenerator<any>;
}

/** Parent side: starts `script` (under this runtime, or `runtime`) with `env` added to the
 * environment. */
export function spawnWorker(script: string, env: Record<string, string>, runtime?: RuntimeName): Worker {
  const proc = start(scriptArgv(script, { runtime }), { ...process.env, ...env });
  return { proc, lines: jsonLines(proc.stdout) };
}

/** Parent side: the worker's next report; throws if it ended without one. */
export async function nextReport(w: Worker): Promise<any> {
  const { value, done } = await w.lines.next();
  if (done) throw new Error(`worker process ${w.proc.pid} ended without a result (exit ${await w.proc.exited})`);
  return value;
}

/** A named GPU check run by every rank (collective-checks.ts, tp-checks.ts). */
export interface NamedCheck<C> {
  name: string;
  run(ctx: C): Promise<string>;
}

/** Worker side: runs the checks whose names match CHECK_FILTER, one report line each; returns how
 * many failed. */
export async function runChecks<C>(checks: readonly NamedCheck<C>[], ctx: C): Promise<number> {
  const filter = new RegExp(process.env.CHECK_FILTER ?? ".");
  let failures = 0;
  for (const check of checks) {
    if (!filter.test(check.name)) continue;
    const t0 = performance.now();
    try {
      const detail = await check.run(ctx);
      report({ name: check.name, ok: true, detail, ms: performance.now() - t0 });
    } catch (e) {
      failures++;
      report({ name: check.name, ok: false, error: String((e as Error).stack ?? e), ms: performance.now() - t0 });
    }
  }
  return failures;
}

/** `n` distinct free TCP ports on 127.0.0.1 (all held open together, then released). */
export async function freePorts(n: number): Promise<number[]> {
  const held = await Promise.all(Array.from({ length: n }, () => new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(server));
  })));
  const ports = held.map((s) => (s.address() as { port: number }).port);
  await Promise.all(held.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

/** Parent side: one worker per rank on this host (torchrun-style environment, store on `port`,
 * `env` added: the same for every rank, or per rank), every report printed; returns the failures,
 * exit codes and report counts per rank. */
export async function runCheckWorkers(script: string, world: number,
  env: Record<string, string> | ((rank: number) => Record<string, string>) = {},
  port?: number): Promise<{ failed: string[]; exits: number[]; reported: number[] }> {
  port ??= (await freePorts(1))[0]!;
  const procs = Array.from({ length: world }, (_, rank) => start(scriptArgv(script), {
    ...process.env, RANK: String(rank), WORLD_SIZE: String(world), LOCAL_RANK: String(rank), LOCAL_WORLD_SIZE: String(world),
    MASTER_ADDR: "127.0.0.1", MASTER_PORT: String(port), ...(typeof env === "function" ? env(rank) : env),
  }));
  const outputs = await Promise.all(procs.map((p) => readAll(p.stdout)));
  const exits = await Promise.all(procs.map((p) => p.exited));
  const failed: string[] = [];
  const reported = outputs.map((text, rank) => {
    const lines = text.split("\n").filter((l) => l.startsWith("{"));
    for (const line of lines) {
      const r = JSON.parse(line);
      console.log(`  [rank ${rank}] ${r.ok ? "ok  " : "FAIL"} ${r.name}${r.ms ? ` (${r.ms.toFixed(0)} ms)` : ""}: ${r.ok ? r.detail : r.error}`);
      if (!r.ok) failed.push(`rank ${rank}: ${r.name}: ${r.error}`);
    }
    return lines.length;
  });
  return { failed, exits, reported };
}
