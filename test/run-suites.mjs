#!/usr/bin/env node
// run-suites.mjs — `npm test`: every test suite of the repository, one after the other, with each
// suite's output shown as it runs, then one line per suite and a last line
//
//   N passed, N failed, N skipped
//
// summed over the suites (.ci/run reads that line). Exits non-zero when any suite fails or cannot
// run. Node only, no dependencies.
//
// Suites (SUITES below):
//   bun     bun test --timeout 300000 (node_modules/.bin/bun)
//   deno    the same test files under Deno: deno test over test/ (node_modules/.bin/deno, else deno
//           on PATH), with the permissions of DENO_TEST_FLAGS and bunfig.toml's preload; the test
//           API is test/support/test-api.ts's, whose default per-test bound is bun's 300 s
//   pytest  ffi/python/tests, with the first of `python3 -m pytest`, `/usr/bin/python3 -m pytest`,
//           `pytest-3` that runs. When none does, the suite fails and says how to install pytest;
//           WEFT_SKIP_PYTEST=1 skips it instead (counted as one skipped test), for machines that
//           only work on the TypeScript side.
//
//   node test/run-suites.mjs                      every suite
//   node test/run-suites.mjs --suite=bun [args]   one suite; its extra arguments go to it
//                                                 (npm test -- --suite=bun test/abi.test.ts;
//                                                 for deno, files given replace test/)
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** Counts from the last summary a suite printed. */
function count(text, re) {
  const all = [...text.matchAll(re)];
  return all.length ? Number(all[all.length - 1][1]) : 0;
}

/** node_modules/NAME/NAME (npm's deno: the binary itself, not its Node shim in .bin), else
 * node_modules/.bin/NAME, else NAME on PATH, else the node_modules path (reported missing). */
function tool(name) {
  const binary = join(root, "node_modules", name, name);
  if (existsSync(binary)) return binary;
  const local = join(root, "node_modules", ".bin", name);
  if (existsSync(local)) return local;
  const found = (process.env.PATH ?? "").split(delimiter).map((d) => join(d, name)).find((p) => existsSync(p));
  return found ?? local;
}

// What the tests need under Deno: weft's own permissions (README "From Deno") plus starting
// workers and tools and writing scratch files.
const DENO_TEST_FLAGS = ["--no-check", "--allow-ffi", "--allow-env", "--allow-net", "--allow-read", "--allow-sys",
  "--allow-run", "--allow-write", "--preload", "test/support/preload.ts"];

const stripColor = (s) => s.replace(/\x1b\[[0-9;]*m/g, "");

const SUITES = [
  {
    name: "bun",
    command: () => [join(root, "node_modules", ".bin", "bun"), ["test", "--timeout", "300000"]],
    // bun's summary: lines " 142 pass", " 8 skip", " 0 fail".
    parse: (out) => ({ passed: count(out, /^\s*(\d+) pass$/gm), failed: count(out, /^\s*(\d+) fail$/gm), skipped: count(out, /^\s*(\d+) skip$/gm) }),
  },
  {
    name: "deno",
    command: (extra) => [tool("deno"), ["test", ...DENO_TEST_FLAGS, ...(extra.some((a) => !a.startsWith("-")) ? [] : ["test/"])]],
    // deno's summary: "ok | 325 passed | 0 failed | 175 ignored (49s)" ("FAILED | ..." when any
    // failed; "(N steps)" after a count when tests have steps).
    parse: (out) => {
      const line = stripColor(out).split("\n").reverse().find((l) => /^(ok|FAILED) \| \d+ passed/.test(l)) ?? "";
      const n = (word) => Number(line.match(new RegExp(`(\\d+) ${word}`))?.[1] ?? 0);
      return { passed: n("passed"), failed: n("failed"), skipped: n("ignored") };
    },
  },
  {
    name: "pytest",
    command: () => {
      const candidates = [["python3", ["-m", "pytest"]], ["/usr/bin/python3", ["-m", "pytest"]], ["pytest-3", []]];
      const found = candidates.find(([cmd, args]) => spawnSync(cmd, [...args, "--version"], { stdio: "ignore" }).status === 0);
      if (!found) {
        if (process.env.WEFT_SKIP_PYTEST === "1") return { skip: "WEFT_SKIP_PYTEST=1: ffi/python/tests not run" };
        return {
          error: "no pytest found (tried `python3 -m pytest`, `/usr/bin/python3 -m pytest`, `pytest-3`). Install it " +
            "(Debian: apt-get install python3-pytest; or pip install pytest), or set WEFT_SKIP_PYTEST=1 to skip the Python suite",
        };
      }
      return [found[0], [...found[1], join(root, "ffi", "python", "tests"), "-q", "-rs"]];
    },
    // pytest's last line: "== 60 passed, 2 skipped, 1 failed, 1 error in 4.99s ==" (any order, any subset).
    parse: (out) => {
      const line = out.trimEnd().split("\n").reverse().find((l) => / in [\d.]+s/.test(l) && /\d+ (passed|failed|skipped|error)/.test(l)) ?? "";
      const n = (word) => Number(line.match(new RegExp(`(\\d+) ${word}`))?.[1] ?? 0);
      return { passed: n("passed") + n("xpassed"), failed: n("failed") + n("errors?"), skipped: n("skipped") + n("xfailed") + n("deselected") };
    },
  },
];

function runSuite(suite, extra) {
  const cmd = suite.command(extra);
  if (!Array.isArray(cmd)) return Promise.resolve(cmd.skip ? { skipped: 1, passed: 0, failed: 0, note: cmd.skip } : { failed: 1, passed: 0, skipped: 0, note: cmd.error });
  const [file, args] = cmd;
  if (file.includes("/") && !existsSync(file)) return Promise.resolve({ failed: 1, passed: 0, skipped: 0, note: `${file} is missing (npm install)` });
  return new Promise((resolve) => {
    let out = "";
    const child = spawn(file, [...args, ...extra], { cwd: root, stdio: ["inherit", "pipe", "pipe"], env: process.env });
    const take = (stream, sink) => stream.on("data", (chunk) => {
      out += chunk;
      sink.write(chunk);
    });
    take(child.stdout, process.stdout);
    take(child.stderr, process.stderr);
    child.on("error", (e) => resolve({ failed: 1, passed: 0, skipped: 0, note: `could not start ${file}: ${e.message}` }));
    // The suite's end is its process's exit: a stray grandchild (a test's worker that outlived it)
    // may hold the output pipes open forever, so wait for them to drain only briefly after it.
    let finished = false;
    const finish = (code, signal) => {
      if (finished) return;
      finished = true;
      const counts = suite.parse(out);
      // A run that exits badly without reporting a failure (a crash, a collection error) still fails.
      if (code !== 0 && counts.failed === 0) resolve({ ...counts, failed: 1, note: `exited with ${signal ?? `status ${code}`}` });
      else resolve(counts);
    };
    child.on("close", finish);
    child.on("exit", (code, signal) => {
      setTimeout(() => {
        if (finished) return;
        child.stdout.destroy();
        child.stderr.destroy();
        console.error(`${suite.name}: a process it started still holds its output open after it exited; not waiting for it`);
        finish(code, signal);
      }, 2000).unref();
    });
  });
}

const args = process.argv.slice(2);
const chosen = args.filter((a) => a.startsWith("--suite=")).map((a) => a.slice("--suite=".length));
const extra = args.filter((a) => !a.startsWith("--suite="));
const unknown = chosen.filter((n) => !SUITES.some((s) => s.name === n));
if (unknown.length || (extra.length && chosen.length !== 1)) {
  console.error(unknown.length ? `unknown suite ${unknown.join(", ")} (suites: ${SUITES.map((s) => s.name).join(", ")})`
    : "extra arguments go to one suite: pick it with --suite=NAME");
  process.exit(2);
}

const results = [];
for (const suite of SUITES.filter((s) => !chosen.length || chosen.includes(s.name))) {
  results.push({ name: suite.name, ...(await runSuite(suite, extra)) });
}
console.log("");
for (const r of results) {
  console.log(`${r.name}: ${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped${r.note ? ` (${r.note})` : ""}`);
}
const sum = (k) => results.reduce((a, r) => a + r[k], 0);
console.log(`${sum("passed")} passed, ${sum("failed")} failed, ${sum("skipped")} skipped`);
process.exit(sum("failed") > 0 ? 1 : 0);
