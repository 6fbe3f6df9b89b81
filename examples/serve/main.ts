#!/usr/bin/env bun
// main.ts — starts the inference server: `bun examples/serve/main.ts` (see --help).
//
// With a GPU: a tensor-parallel decoder over every local GPU (or --world N ranks sharing GPU 0 with
// --one-gpu), random weights from --seed or a safetensors file (--model), byte-level tokenizer.
// Without one: the server still starts and answers 503 "no GPU" (and /metrics), so that a
// deployment can tell the difference between "down" and "no accelerator here". --fake serves the
// CPU echo model instead (tests, demos). SIGTERM and SIGINT shut down gracefully: in-flight
// requests finish, new ones get 503, then the process exits 0.
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";

import { FakeModel } from "./fake-model.ts";
import type { Model } from "./model.ts";
import { InferenceServer } from "./server.ts";

const HELP = `weft serve — an OpenAI-style completions server on a tensor-parallel decoder

  --port N            listen port (default 8000; 0 = any free port)
  --host ADDR         listen address (default 127.0.0.1)
  --preset NAME       model shape: tiny, small (default), llama-1b, llama-8b (random weights)
  --config FILE       model shape from a JSON file (Hugging Face config.json, or weft's own fields)
  --model FILE        weights from a safetensors file (Hugging Face Llama names); the shape from
                      --config, the file's "weft.config" metadata, or config.json beside it
  --seed N            random weights' seed (default 0)
  --world N           tensor-parallel ranks (default: every local GPU)
  --one-gpu           put every rank on GPU 0, each with 1/N of its SMs
  --path P            tensor-parallel ops: auto (default: fused where the cost model predicts
                      faster), fused, or sequential (our GEMM, then our collective)
  --slots N           KV-cache slots = sequences in flight (default 64)
  --context N         positions per sequence, prompt and completion (default 1024)
  --max-waiting N     requests that may queue for a slot (default: --slots); beyond: 429
  --heap-mib N        symmetric heap per rank (default 2048)
  --no-warmup         make plans on first use instead of before listening
  --fake              serve the CPU echo model (no GPU needed)
  --step-ms N         the fake model's step time (default 2)
`;

const { values: a } = parseArgs({
  options: {
    port: { type: "string", default: "8000" }, host: { type: "string", default: "127.0.0.1" },
    preset: { type: "string", default: "small" }, config: { type: "string" }, model: { type: "string" },
    seed: { type: "string", default: "0" }, world: { type: "string" }, "one-gpu": { type: "boolean", default: false },
    path: { type: "string", default: "auto" }, slots: { type: "string", default: "64" }, context: { type: "string", default: "1024" },
    "max-waiting": { type: "string" }, "heap-mib": { type: "string", default: "2048" }, "no-warmup": { type: "boolean", default: false },
    fake: { type: "boolean", default: false }, "step-ms": { type: "string", default: "2" }, help: { type: "boolean", default: false },
  },
});
if (a.help) {
  console.log(HELP);
  process.exit(0);
}

function int(name: string, v: string | undefined, min = 0): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) {
    console.error(`weft serve: --${name} must be an integer >= ${min} (got ${v})`);
    process.exit(2);
  }
  return n;
}

const log = (line: string) => console.log(`weft serve: ${line}`);
const slots = int("slots", a.slots, 1), context = int("context", a.context, 2);

async function gpuModel(): Promise<{ model: Model | null; reason?: string }> {
  let count = 0;
  try {
    const { deviceCount } = await import("../../lib/device.ts");
    count = deviceCount();
  } catch (e) {
    return { model: null, reason: `no GPU: the weft library could not be used (${(e as Error).message})` };
  }
  if (count === 0) return { model: null, reason: "no GPU: this machine has no CUDA device (or no driver)" };
  const { Decoder } = await import("./decoder.ts");
  const { PRESETS, fromHuggingFace } = await import("./config.ts");
  const { SafetensorsFile } = await import("./safetensors.ts");
  const world = a.world ? int("world", a.world, 1) : count;
  const devices = a["one-gpu"] ? new Array(world).fill(0) : Array.from({ length: world }, (_, i) => i);
  if (!a["one-gpu"] && world > count) throw new Error(`--world ${world} needs ${world} GPUs; this machine has ${count} (or add --one-gpu)`);
  if (!["auto", "fused", "sequential"].includes(a.path!)) throw new Error(`--path must be auto, fused or sequential (got ${a.path})`);
  const readConfig = (text: string) => {
    const j = JSON.parse(text);
    return "hidden_size" in j ? fromHuggingFace(j) : j;
  };
  let config = a.config ? readConfig(readFileSync(a.config, "utf8")) : PRESETS[a.preset!];
  if (!config) throw new Error(`--preset must be one of ${Object.keys(PRESETS).join(", ")} (got ${a.preset})`);
  let weights;
  if (a.model) {
    const file = await SafetensorsFile.open(a.model);
    if (!a.config) {
      const beside = join(dirname(a.model), "config.json");
      if (file.metadata["weft.config"]) config = readConfig(file.metadata["weft.config"]);
      else if (existsSync(beside)) config = readConfig(readFileSync(beside, "utf8"));
      else throw new Error(`${a.model}: no model shape (give --config, or put config.json beside it)`);
    }
    weights = { kind: "safetensors" as const, file };
  } else {
    weights = { kind: "random" as const, seed: int("seed", a.seed) };
  }
  log(`building ${world} rank${world > 1 ? "s" : ""} on GPU${a["one-gpu"] ? " 0 (shared)" : "s " + devices.join(", ")}: ` +
    `${config.layers} layers x ${config.hidden}, ${config.heads} heads (${config.kvHeads} KV), intermediate ${config.intermediate}, ` +
    `vocab ${config.vocab}; ${slots} slots x ${context} positions; path ${a.path}`);
  const t0 = performance.now();
  const model = await Decoder.create({
    config, devices, weights, slots, contextLength: context, path: a.path as "auto", heapBytes: int("heap-mib", a["heap-mib"], 64) * 2 ** 20,
    name: a.model ?? `${a.preset}-random-${a.seed}`,
  });
  log(`weights and caches ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  if (!a["no-warmup"]) {
    await model.warm((line) => log(`warm-up: ${line}`));
    log(`plans: ${[...model.planSummary()].map(([k, n]) => `${n} x ${k}`).join(", ")}`);
  }
  return { model };
}

let model: Model | null = null;
let reason: string | undefined;
try {
  ({ model, reason } = a.fake ? { model: new FakeModel({ slots, contextLength: context, stepMs: int("step-ms", a["step-ms"]) }) } : await gpuModel());
} catch (e) {
  console.error(`weft serve: ${(e as Error).message}`);
  process.exit(1);
}
const server = InferenceServer.start({
  model, noModelReason: reason, hostname: a.host, port: int("port", a.port),
  maxWaiting: a["max-waiting"] === undefined ? undefined : int("max-waiting", a["max-waiting"]),
});
log(`listening on ${server.url} (${model ? model.info.description : reason})`);

let stopping = false;
for (const sig of ["SIGTERM", "SIGINT"] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    log(`${sig}: finishing in-flight requests, refusing new ones`);
    server.shutdown().then(() => {
      log("stopped");
      process.exit(0);
    }, (e) => {
      console.error(`weft serve: shutdown failed: ${(e as Error).message}`);
      process.exit(1);
    });
  });
}
