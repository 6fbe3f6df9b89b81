#!/usr/bin/env node
// Builds libweft.so into build/ through cmake-js (plain CMake underneath: `cmake -S ffi -B build
// -G Ninja && cmake --build build` gives the same library).
//
//   node ffi/build.mjs          npm's install hook: builds, or explains and exits 0 when this
//                               machine has no CUDA toolkit (the JS side then says how to build)
//   node ffi/build.mjs --force  `npm run build`: any failure is an error
import { spawnSync } from "node:child_process";
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
const run = useCmakeJs
  ? spawnSync(cmakeJs, args, { cwd: root, encoding: "utf8", env: { ...process.env, CUDACXX: nvcc } })
  : spawnSync("sh", ["-c", `cmake -S ffi -B build ${ninja ? "-G Ninja" : ""} && cmake --build build`],
    { cwd: root, encoding: "utf8", env: { ...process.env, CUDACXX: nvcc } });
const log = (run.stdout ?? "") + (run.stderr ?? "");
writeFileSync(join(out, "build.log"), log);
// ptxas' resource report (registers, stack, spills per kernel) is what the GEMM notes quote.
writeFileSync(join(out, "ptxas.log"),
  log.split("\n").filter((l) => l.includes("ptxas info") || l.includes("bytes stack frame")).join("\n") + "\n");
if (run.status !== 0) {
  console.error(log.split("\n").filter((l) => !l.includes("ptxas info") && !l.includes("bytes stack frame")).slice(-40).join("\n"));
  console.error(`weft: building libweft.so failed (full log: build/build.log)`);
  process.exit(1);
}
console.log(`weft: built ${join(out, "libweft.so")} (${useCmakeJs ? "cmake-js" : "cmake"})`);
