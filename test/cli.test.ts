import { expect, test } from "./support/test-api.ts";
import { join } from "node:path";

import { ABI_VERSION, runtimeLabel } from "../lib/native.ts";
import { gpuCount } from "./support/gpu.ts";
import { runSync, scriptArgv } from "./support/processes.ts";

const cli = join(import.meta.dirname, "..", "lib", "cli.ts");

// Under Deno, with exactly the permissions the README gives users.
function run(args: string[], env: Record<string, string | undefined> = process.env) {
  const r = runSync([...scriptArgv(cli, { userPermissions: true }), ...args], { env });
  return { code: r.exitCode, out: r.stdout, err: r.stderr };
}

test("weft info exits 0 and describes the runtime, GPUs and transports", () => {
  const r = run(["info"]);
  expect(r.code).toBe(0);
  expect(r.out).toContain(`weft 0.1.0 (ABI ${ABI_VERSION})`);
  expect(r.out).toContain(`under ${runtimeLabel()}`);
  expect(r.out).toContain("CUDA runtime");
  expect(r.out).toContain("libfabric");
  if (gpuCount() === 0) expect(r.out).toContain("GPUs: none found");
  else expect(r.out).toContain(`GPUs: ${gpuCount()}`);
});

test("weft info --json is machine-readable", () => {
  const r = run(["info", "--json"]);
  expect(r.code).toBe(0);
  const info = JSON.parse(r.out);
  expect(info.abi).toBe(ABI_VERSION);
  expect(info.runtime).toBe(runtimeLabel());
  expect(info.topology.devices.length).toBe(gpuCount());
  expect(Array.isArray(info.fabric.providers)).toBe(true);
});

test("unknown commands exit 2 with usage", () => {
  const r = run(["frobnicate"]);
  expect(r.code).toBe(2);
  expect(r.err).toContain("usage: weft info");
});

test("a missing library is reported with how to build it, exit 1", () => {
  const r = run(["info"], { ...process.env, WEFT_LIBRARY: "/nope/libweft.so" });
  expect(r.code).toBe(1);
  expect(r.err).toContain("WEFT_LIBRARY");
});
