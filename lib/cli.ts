#!/usr/bin/env bun
// cli.ts — the `weft` command (package.json "bin"): `weft info [--json]`.
import { WeftError } from "./errors.ts";
import { formatInfo, runtimeInfo } from "./info.ts";

const USAGE = `usage: weft info [--json]    runtime, GPUs, peer links and transports`;

function main(argv: string[]): number {
  const [cmd = "info", ...rest] = argv;
  if (cmd === "-h" || cmd === "--help" || cmd === "help") {
    console.log(USAGE);
    return 0;
  }
  if (cmd !== "info") {
    console.error(`weft: unknown command '${cmd}'\n${USAGE}`);
    return 2;
  }
  try {
    const info = runtimeInfo();
    console.log(rest.includes("--json") ? JSON.stringify(info, null, 2) : formatInfo(info));
    return 0;
  } catch (e) {
    if (e instanceof WeftError) {
      console.error(`weft: ${e.message}`);
      return 1;
    }
    throw e;
  }
}

process.exitCode = main(process.argv.slice(2));
