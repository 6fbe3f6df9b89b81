#!/usr/bin/env node
// run-suites.mjs — `npm test`: every test suite of the repository, one after the other, with each
// suite's output shown as it runs, then one line per suite and a last line
//
//   N passed, N failed, N skipped
//
// summed over the suites (.ci/run reads that line). Exits non-zero when any suite fails or cannot
// run. Node only, no dependencies.
//
// Suites (SUITES below; a Deno suite is one more entry):
//   bun     bun test --timeout 300000 (node_modules/.bin/bun)
//   pytest  ffi/python/tests, with the first of `python3 -m pytest`, `/usr/bin/python3 -m pytest`,
//           `pytest-3` that runs. When none does, the suite fails and says how to install pytest;
//           WEFT_SKIP_PYTEST=1 skips it instead (counted as one skipped test), for machines that
//           only work on the TypeScript side.
//
//   node test/run-suites.mjs                      every suite
//   node test/run-suites.mjs --suite=bun [args]   one suite; its extra arguments go to it
//                                                 (npm test -- --suite=bun test/abi.test.ts)
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** Counts from the last summary a suite printed. */
function count(text, re) {
  const all = [...text.matchAll(re)];
  return all.length ? Number(all[all.length - 1][1]) : 0;
}

const SUITES = [
  {
    name: "bun",
    command: () => [join(root, "node_modules", ".bin", "bun"), ["test", "--timeout", "300000"]],
    // bun's summary: lines " 142 pass", " 8 skip", " 0 fail".
    parse: (out) => ({ passed: count(out, /^\s*(\d+) pass$/gm), failed: count(out, /^\s*(\d+) fail$/gm), skipped: count(out, /^\s*(\d+) skip$/gm) }),
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
  const cmd = suite.command();
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
    child.on("close", (code, signal) => {
      const counts = suite.parse(out);
      // A run that exits badly without reporting a failure (a crash, a collection error) still fails.
      if (code !== 0 && counts.failed === 0) resolve({ ...counts, failed: 1, note: `exited with ${signal ?? `status ${code}`}` });
      else resolve(counts);
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
