// store-gate.ts — gating for tests that run the TCP rendezvous store in a runtime, like gpu.ts for
// GPUs: where the store cannot run in that runtime here, the tests skip and say why. It probes
// what is true, once per runtime and process: a one-rank store started in a child process of that
// runtime. (A store that calls Bun.listen itself cannot run under Deno; one that takes its sockets
// from the runtime adapter, lib/bootstrap/socket.ts, runs in both.)
import { describe } from "./test-api.ts";

import { evalArgv, runSync, runtimeBinary, type RuntimeName } from "./processes.ts";

const probed = new Map<RuntimeName, string | undefined>();

const PROBE = `
  import { Store } from "./lib/bootstrap.ts";
  const s = await Store.connect({ rank: 0, worldSize: 1, addr: "127.0.0.1", port: 0, timeoutMs: 5000 });
  await s.set("probe", "ok");
  await s.close();
  console.log("store ok");`;

/** Why the TCP store cannot run under `name` here, or undefined when it can. */
export function storeMissing(name: RuntimeName): string | undefined {
  if (!probed.has(name)) {
    let why: string | undefined;
    if (!runtimeBinary(name)) {
      why = `no ${name} binary here (node_modules/.bin or PATH; npm install provides it)`;
    } else {
      const r = runSync(evalArgv(PROBE, { runtime: name }), { cwd: `${import.meta.dirname}/../..` });
      if (!r.stdout.includes("store ok")) {
        const cause = (r.stderr.match(/(ReferenceError|TypeError|Error)[^\n]*/)?.[0] ?? r.stderr.trim().split("\n").at(-1) ?? "").slice(0, 200);
        why = `the store does not start under ${name} here (${cause || `exit ${r.exitCode}`})`;
      }
    }
    probed.set(name, why);
  }
  return probed.get(name);
}

/** describe() that runs only where the TCP store runs under every runtime in `runtimes`. */
export function describeStore(name: string, runtimes: readonly RuntimeName[], body: () => void): void {
  const why = runtimes.map(storeMissing).find((w) => w !== undefined);
  if (why === undefined) describe(name, body);
  else describe.skip(`${name} (skipped: ${why})`, body);
}

