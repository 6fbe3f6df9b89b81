// The npm package as a user's project sees it: package.json "exports" gives Bun lib/ (TypeScript,
// which Bun runs from node_modules) and every other runtime dist/ (the JavaScript build of
// tsconfig.dist.json: Deno, like Node, does not strip types under node_modules). A scratch project
// gets the package in its node_modules, built here, and both runtimes import "weft" from it. Runs
// in the Bun suite only: it starts both runtimes itself.
import { expect, test } from "../support/test-api.ts";
import { cpSync, mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { runtime } from "../../lib/runtime/index.ts";
import { runSync, runtimeBinary, scriptArgv } from "../support/processes.ts";

const root = join(import.meta.dirname, "..", "..");
const missing = runtime.name !== "bun" ? "runs once, from the Bun suite (it starts both runtimes itself)"
  : !runtimeBinary("deno") ? "no deno binary (node_modules/.bin or PATH; npm install provides it)" : undefined;

(missing ? test.skip : test)(`import "weft" from node_modules: Bun gets lib/, Deno gets dist/, both load the library${missing ? ` (skipped: ${missing})` : ""}`, () => {
  const project = mkdtempSync(join(tmpdir(), "weft-package-"));
  const pkg = join(project, "node_modules", "weft");
  mkdirSync(pkg, { recursive: true });
  cpSync(join(root, "package.json"), join(pkg, "package.json"));
  cpSync(join(root, "lib"), join(pkg, "lib"), { recursive: true });
  symlinkSync(join(root, "build"), join(pkg, "build"));
  const tsc = runSync([join(root, "node_modules", ".bin", "tsc"), "-p", join(root, "tsconfig.dist.json"), "--outDir", join(pkg, "dist")], { cwd: root });
  expect(tsc.stdout + tsc.stderr).toBe("");
  writeFileSync(join(project, "package.json"), JSON.stringify({ type: "module", dependencies: { weft: "0.1.0" } }));
  writeFileSync(join(project, "main.ts"), `
    import { runtimeInfo } from "weft";
    const info = runtimeInfo();
    console.log(JSON.stringify({ entry: import.meta.resolve("weft"), runtime: info.runtime, library: info.library }));`);
  for (const name of ["bun", "deno"] as const) {
    const r = runSync(scriptArgv(join(project, "main.ts"), { runtime: name, userPermissions: true }), { cwd: project });
    expect(r.stderr).not.toContain("rror");
    const got = JSON.parse(r.stdout.trim().split("\n").at(-1) ?? "{}");
    expect(got.entry).toBe(`file://${join(pkg, name === "bun" ? "lib/index.ts" : "dist/index.js")}`);
    expect(got.runtime).toStartWith(`${name} `);
    expect(got.library).toBe(join(pkg, "build", "libweft.so"));
  }
}, 180_000);
