// The README's first command ends here: `npm install && npm run demo`.
// It prints what weft sees on this machine, then runs a check on every local GPU.
import { deviceCount, formatInfo, runtimeInfo, Tensor, WeftError } from "../lib/index.ts";

function main(): number {
  let info;
  try {
    info = runtimeInfo();
  } catch (e) {
    if (e instanceof WeftError) {
      console.error(`weft: ${e.message}`);
      return 1;
    }
    throw e;
  }
  console.log(formatInfo(info));
  console.log();
  const n = deviceCount();
  if (n === 0) {
    console.log("demo: no GPU on this machine, so there is nothing to run. The same command on a GPU host runs the checks.");
    return 0;
  }
  for (let d = 0; d < n; d++) {
    const count = 1 << 24;
    using t = Tensor.empty([count], "bf16", { device: d }).fillRandom(d + 1);
    using u = Tensor.empty([count], "bf16", { device: d }).fill(NaN);
    const t0 = performance.now();
    u.copyFrom(t);
    const ms = performance.now() - t0;
    const a = t.download({ raw: true }) as Uint16Array;
    const b = u.download({ raw: true }) as Uint16Array;
    const same = Buffer.from(a.buffer).equals(Buffer.from(b.buffer));
    console.log(`GPU${d}: 32 MiB bf16 device copy ${same ? "exact" : "MISMATCH"} in ${ms.toFixed(2)} ms`);
    if (!same) return 1;
  }
  return 0;
}

process.exitCode = main();
