#!/usr/bin/env node
// Builds libweft.so into build/ through cmake-js (plain CMake underneath: `cmake -S ffi -B build
// -G Ninja && cmake --build build` gives the same library).
//
//   node ffi/build.mjs          npm's install hook: builds, or explains and exits 0 when this
//                               machine has no CUDA toolkit (the JS side then says how to build)
//   node ffi/build.mjs --force  `npm run build`: any failure is an error
//
// The build takes minutes (the CUDA kernels), so it prints one line per stage (configure, compile
// with a count every tenth of the way, link) and CMake's own `weft:` lines, such as whether the
// libfabric transport is in. Everything else goes to build/build.log.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const strict = process.argv.includes("--force") || process.env.WEFT_BUILD_STRICT === "1";

const nvcc = [process.env.CUDACXX, "/usr/local/cuda/bin/nvcc"].find((p) => p && existsSync(p)) ??
  (spawnSync("sh", ["-c", "command -v nvcc"], { encoding: "utf8" }).stdout.trim() || undefined);
if (!nvcc) {
  const msg = "weft: no CUDA toolkit (nvcc) found, so libweft.so was not built. " +
    "Install CUDA 12.8+ (nvcc in /usr/local/cuda/bin or on PATH), then run `npm run build`.";
  console.error(msg);
  process.exit(strict ? 1 : 0);
}

const out = join(root, "build");
mkdirSync(out, { recursive: true });
const cmakeJs = join(root, "node_modules", ".bin", "cmake-js");
const ninja = spawnSync("sh", ["-c", "command -v ninja"]).status === 0;
const args = ["compile", "-d", join(root, "ffi"), "-O", out, ...(ninja ? ["-G", "Ninja"] : [])];
const useCmakeJs = existsSync(cmakeJs);
const [cmd, cmdArgs] = useCmakeJs
  ? [cmakeJs, args]
  : ["sh", ["-c", `cmake -S ffi -B build ${ninja ? "-G Ninja" : ""} && cmake --build build`]];

const t0 = Date.now();
const elapsed = () => `${((Date.now() - t0) / 1000).toFixed(0)} s`;
const say = (line) => console.log(`weft: ${line}`);
say(`building libweft.so with ${useCmakeJs ? "cmake-js" : "cmake"} (the CUDA kernels take a few minutes; full log: build/build.log)`);
say("[1/3] configure");

/** Turns the build's output into the stage lines; returns nothing, keeps state across lines. */
const progress = (() => {
  let total = 0;
  let linking = false;
  let lastTenth = -1;
  let warning = null;
  return (line) => {
    // CMake's status and warning lines of ours start with "weft:" (ffi/CMakeLists.txt). A warning's
    // text follows "CMake Warning at ...", wrapped over indented lines, up to a blank line.
    const own = line.match(/^-- (weft: .*)$/);
    if (own) return console.log(own[1]);
    if (/^CMake Warning/.test(line)) {
      warning = [];
      return;
    }
    if (warning) {
      if (line.trim() !== "") return void warning.push(line.trim());
      const text = warning.join(" ").replace(/\s+/g, " ");
      warning = null;
      if (text.startsWith("weft:")) console.log(`${text} (warning)`);
      return;
    }
    // Ninja's "[done/total] what" lines (its first pass only re-checks CMake's globs), or make's
    // "[ 42%] what", read as 42/100.
    const pct = line.match(/^\[\s*(\d+)%\]\s+(.*)$/);
    const step = pct ? [line, pct[1], "100", pct[2]] : line.match(/^\[(\d+)\/(\d+)\]\s+(.*)$/);
    if (!step || /Re-checking globbed directories/.test(step[3])) return;
    const [done, steps, what] = [Number(step[1]), Number(step[2]), step[3]];
    if (/^Linking/.test(what)) {
      if (!linking) say(`[3/3] link (${elapsed()})`);
      linking = true;
      return;
    }
    if (steps !== total) {
      total = steps;
      lastTenth = -1;
      say(`[2/3] compile: ${total} steps`);
    }
    const tenth = Math.floor((done * 10) / total);
    if (tenth > lastTenth) {
      lastTenth = tenth;
      say(`      ${done}/${total} (${elapsed()})`);
    }
  };
})();

const child = spawn(cmd, cmdArgs, { cwd: root, env: { ...process.env, CUDACXX: nvcc } });
let log = "";
for (const stream of [child.stdout, child.stderr]) {
  let pending = "";
  stream.setEncoding("utf8");
  stream.on("data", (chunk) => {
    log += chunk;
    pending += chunk;
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const l of lines) progress(l);
  });
}
const status = await new Promise((resolve) => {
  child.on("error", (e) => {
    log += `\n${e.message}\n`;
    resolve(1);
  });
  child.on("close", (code) => resolve(code ?? 1));
});

writeFileSync(join(out, "build.log"), log);
// ptxas' resource report (registers, stack, spills per kernel) is what the GEMM decisions quote.
writeFileSync(join(out, "ptxas.log"),
  log.split("\n").filter((l) => l.includes("ptxas info") || l.includes("bytes stack frame")).join("\n") + "\n");
if (status !== 0) {
  console.error(log.split("\n").filter((l) => !l.includes("ptxas info") && !l.includes("bytes stack frame")).slice(-40).join("\n"));
  console.error(`weft: building libweft.so failed (full log: build/build.log)`);
  process.exit(1);
}
say(`built ${join(out, "libweft.so")} in ${elapsed()}`);
