// The README's newcomer path: every command it gives works right after `npm install` (Bun is a dev
// dependency, not on PATH, so commands go through npm scripts or node_modules/.bin/bun), and its
// API snippet is a complete program: it typechecks against lib/ on its own, and it is the same code
// as examples/quickstart.ts. CPU only.
import { describe, expect, test } from "./support/test-api.ts";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { runSync } from "./support/processes.ts";

const root = join(import.meta.dirname, "..");
const readme = readFileSync(join(root, "README.md"), "utf8");
const scripts: Record<string, string> = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).scripts;

/** Every ```sh line and every inline `code` span that is a command, with the line it is on. */
function commands(): { command: string; line: string }[] {
  const out: { command: string; line: string }[] = [];
  let inSh = false;
  for (const line of readme.split("\n")) {
    if (line.startsWith("```")) {
      inSh = !inSh && line.trim() === "```sh";
      continue;
    }
    if (inSh) {
      const command = line.replace(/#.*$/, "").trim();
      if (command) out.push({ command, line });
      continue;
    }
    for (const m of line.matchAll(/`([^`]+)`/g)) {
      if (/^(npm|npx|bun|bunx|node|node_modules\/\.bin\/\S+)\s/.test(m[1]!)) out.push({ command: m[1]!, line });
    }
  }
  return out;
}

describe("README commands", () => {
  test("every `npm run X` names a script of package.json", () => {
    const runs = commands().flatMap(({ command }) => [...command.matchAll(/npm run (\S+)/g)].map((m) => m[1]!));
    expect(runs.length).toBeGreaterThan(3);
    for (const name of runs) expect(Object.keys(scripts)).toContain(name);
    for (const name of ["demo", "quickstart", "info", "test", "build"]) expect(scripts[name]).toBeDefined();
  });

  test("no command needs bun on PATH, and none runs bunx or npx weft (a public package of that name)", () => {
    // The one sentence that warns against them names them on purpose.
    const bad = commands().filter(({ command, line }) => /^(bun|bunx)\s|(^|\s)npx\s+(bunx|weft)\b/.test(command) && !line.includes("Do not use"));
    expect(bad.map((b) => b.command)).toEqual([]);
  });
});

describe("README API snippet", () => {
  const block = readme.match(/## API in brief[\s\S]*?```ts\n([\s\S]*?)```/)?.[1] ?? "";

  test("is the code of examples/quickstart.ts, line for line in order", () => {
    const example = readFileSync(join(root, "examples", "quickstart.ts"), "utf8").split("\n").map((l) => l.trim());
    let at = 0;
    const lines = block.split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("import ") && !l.startsWith("const comms ="));
    expect(lines.length).toBeGreaterThan(10);
    for (const line of lines) {
      const found = example.indexOf(line, at);
      if (found < 0) throw new Error(`README line not in examples/quickstart.ts (in order): ${line}`);
      at = found + 1;
    }
  });

  // npm install provides tsc; a host given only the runtime (the GPU host's pack) has none.
  const tsc = join(root, "node_modules", ".bin", "tsc");
  const noTsc = existsSync(tsc) ? "" : " (skipped: no TypeScript compiler at node_modules/.bin/tsc; npm install provides it)";
  (noTsc ? test.skip : test)(`typechecks as a program on its own (every name it uses is defined)${noTsc}`, () => {
    const dir = mkdtempSync(join(tmpdir(), "weft-readme-"));
    const file = join(dir, "snippet.ts");
    writeFileSync(file, block.replace(/from "weft"/, `from ${JSON.stringify(join(root, "lib", "index.ts"))}`) + "\nexport {};\n");
    const r = runSync([tsc, "--noEmit", "--strict", "--target", "ESNext", "--module", "ESNext", "--moduleResolution", "bundler",
      "--lib", "ESNext", "--types", "bun", "--typeRoots", join(root, "node_modules", "@types"), "--allowImportingTsExtensions",
      "--skipLibCheck", "--noUncheckedIndexedAccess", file], { cwd: dir });
    const out = r.stdout + r.stderr;
    expect(out).toBe("");
    expect(r.exitCode).toBe(0);
  }, 120_000);
});
