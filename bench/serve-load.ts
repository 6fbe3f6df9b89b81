// serve-load.ts — the inference server under load: N concurrent streaming clients over loopback, each
// sending one request after another for a bounded time, against the server with the cost model's
// tensor-parallel paths ("auto": fused where it predicts faster) and with path "sequential"
// everywhere. Reports throughput, time to first token and inter-token latency p50/p99 per client
// count, and writes bench/results/serve.{json,md}.
//
//   bun bench/serve-load.ts --world 2 --one-gpu --preset small            # one GPU, two ranks
//   bun bench/serve-load.ts --clients 1,8,64 --duration 20 --duration-max 60
//   bun bench/serve-load.ts --fake --duration 3 --out /tmp/serve          # the harness itself, no GPU
//
// Every level is bounded: clients stop starting requests after its duration and the stragglers get
// --drain seconds; a request that fails, returns non-200 or ends without [DONE] counts as an error.
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";

import { metricsOf, stream } from "../examples/serve/client.ts";
import { startServer } from "../examples/serve/process.ts";

const { values: a } = parseArgs({
  options: {
    world: { type: "string" }, "one-gpu": { type: "boolean", default: false }, preset: { type: "string", default: "small" },
    clients: { type: "string", default: "1,8,64" }, duration: { type: "string", default: "20" },
    "duration-max": { type: "string", default: "60" }, "max-tokens": { type: "string", default: "64" },
    "prompt-bytes": { type: "string", default: "48" }, paths: { type: "string", default: "auto,sequential" },
    slots: { type: "string", default: "64" }, context: { type: "string", default: "1024" }, drain: { type: "string", default: "30" },
    fake: { type: "boolean", default: false }, out: { type: "string", default: "bench/results/serve" },
  },
});

const clientsList = a.clients!.split(",").map(Number);
const duration = Number(a.duration), durationMax = Number(a["duration-max"]), maxTokens = Number(a["max-tokens"]);
const promptBytes = Number(a["prompt-bytes"]), drainS = Number(a.drain);
const paths = a.paths!.split(",");
const say = (line: string) => console.log(`[serve-load] ${line}`);

function percentile(xs: number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
}

interface Level {
  path: string;
  clients: number;
  durationS: number;
  wallS: number;
  requests: number;
  errors: number;
  errorSamples: string[];
  tokens: number;
  tokensPerS: number;
  ttftMs: { p50: number; p99: number };
  itlMs: { p50: number; p99: number };
  /** Server-side means over this level (deltas of the summaries' sums and counts). */
  serverItlMeanMs: number;
  batchMean: number;
}

function prompt(client: number, n: number): string {
  const head = `client ${client} request ${n}: `;
  return (head + "the quick brown fox jumps over the lazy dog ".repeat(Math.ceil(promptBytes / 44))).slice(0, Math.max(promptBytes, head.length));
}

async function level(url: string, path: string, clients: number, seconds: number): Promise<Level> {
  const ttft: number[] = [], itl: number[] = [], errors: string[] = [];
  let requests = 0, tokens = 0;
  const before = await metricsOf(url);
  const t0 = performance.now(), stopAt = t0 + seconds * 1000;
  let lastLine = t0;
  const client = async (c: number) => {
    for (let n = 0; performance.now() < stopAt; n++) {
      requests++;
      try {
        const r = await stream(url, { prompt: prompt(c, n), max_tokens: maxTokens, temperature: 0.8, seed: c * 100_000 + n },
          { signal: AbortSignal.timeout((seconds + drainS) * 1000) });
        if (r.status !== 200 || !r.done || r.error) {
          errors.push(`${r.status}${r.error ? `: ${r.error.slice(0, 200)}` : r.done ? "" : ": no [DONE]"}`);
          continue;
        }
        const events = r.arrivals.slice(0, -1);  // the last event is the finish event
        if (events.length > 0) ttft.push(events[0]!);
        for (let i = 1; i < events.length; i++) itl.push(events[i]! - events[i - 1]!);
        tokens += r.usage?.completion_tokens ?? events.length;
      } catch (e) {
        errors.push(String(e).slice(0, 200));
      }
      const now = performance.now();
      if (now - lastLine > 5000) {
        lastLine = now;
        say(`  ${path}, ${clients} clients: ${((now - t0) / 1000).toFixed(0)} / ${seconds} s, ${requests} requests, ${tokens} tokens, ${errors.length} errors`);
      }
    }
  };
  await Promise.all(Array.from({ length: clients }, (_, c) => client(c)));
  const wallS = (performance.now() - t0) / 1000;
  const m = await metricsOf(url);
  const mean = (name: string) => ((m.get(`${name}_sum`) ?? NaN) - (before.get(`${name}_sum`) ?? 0)) /
    ((m.get(`${name}_count`) ?? NaN) - (before.get(`${name}_count`) ?? 0));
  return {
    path, clients, durationS: seconds, wallS, requests, errors: errors.length, errorSamples: errors.slice(0, 5), tokens,
    tokensPerS: tokens / wallS,
    ttftMs: { p50: percentile(ttft, 0.5), p99: percentile(ttft, 0.99) },
    itlMs: { p50: percentile(itl, 0.5), p99: percentile(itl, 0.99) },
    serverItlMeanMs: mean("weft_serve_inter_token_latency_seconds") * 1000,
    batchMean: mean("weft_serve_decode_batch_size"),
  };
}

const serverArgs = a.fake
  ? ["--fake", "--slots", a.slots!, "--context", a.context!]
  : ["--preset", a.preset!, "--slots", a.slots!, "--context", a.context!, ...(a.world ? ["--world", a.world] : []), ...(a["one-gpu"] ? ["--one-gpu"] : [])];

const levels: Level[] = [];
const servers: Record<string, { description: string; plans: string; startS: number }> = {};
for (const path of paths) {
  say(`path ${path}: starting the server (${serverArgs.join(" ")} --path ${path}); weights and plan warm-up first`);
  const t0 = performance.now();
  const { proc, url, output } = await startServer([...serverArgs, "--path", path], 600_000);
  try {
    const description = output().match(/listening on \S+ \((.*)\)/)?.[1] ?? "";
    servers[path] = { description, plans: output().match(/plans: (.*)/)?.[1] ?? "", startS: (performance.now() - t0) / 1000 };
    say(`path ${path}: listening after ${servers[path]!.startS.toFixed(1)} s: ${description}`);
    for (const clients of clientsList) {
      await level(url, path, clients, 2);  // warm-up at this concurrency (new buckets' plans), not counted
      const seconds = clients === Math.max(...clientsList) ? durationMax : duration;
      say(`path ${path}: ${clients} client${clients > 1 ? "s" : ""} for ${seconds} s`);
      const r = await level(url, path, clients, seconds);
      levels.push(r);
      say(`path ${path}, ${clients} clients: ${r.tokensPerS.toFixed(1)} tokens/s, TTFT p50 ${r.ttftMs.p50.toFixed(1)} ms p99 ${r.ttftMs.p99.toFixed(1)} ms, ` +
        `inter-token p50 ${r.itlMs.p50.toFixed(2)} ms p99 ${r.itlMs.p99.toFixed(2)} ms, mean decode batch ${r.batchMean.toFixed(1)}, ${r.requests} requests, ${r.errors} errors`);
    }
  } finally {
    proc.kill("SIGTERM");
    await Promise.race([proc.exited, Bun.sleep(30_000)]);
    proc.kill("SIGKILL");
  }
}

const meta = {
  bench: "serve-load", date: new Date().toISOString(), fake: a.fake, preset: a.preset, world: a.world ?? "all GPUs", oneGpu: a["one-gpu"],
  slots: Number(a.slots), context: Number(a.context), maxTokens, promptBytes, servers,
};
writeFileSync(`${a.out}.json`, JSON.stringify({ ...meta, levels }, null, 2) + "\n");

const fmt = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : "-");
const rows = levels.map((l) => `| ${l.path} | ${l.clients} | ${fmt(l.tokensPerS, 1)} | ${fmt(l.ttftMs.p50, 1)} | ${fmt(l.ttftMs.p99, 1)} | ` +
  `${fmt(l.itlMs.p50)} | ${fmt(l.itlMs.p99)} | ${fmt(l.batchMean, 1)} | ${l.requests} | ${l.errors} |`);
const ratios = clientsList.map((c) => {
  const f = levels.find((l) => l.path === paths[0] && l.clients === c), s = levels.find((l) => l.path === paths[1] && l.clients === c);
  return f && s ? `| ${c} | ${fmt(f.tokensPerS / s.tokensPerS, 3)} | ${fmt(f.itlMs.p50 / s.itlMs.p50, 3)} | ${fmt(f.ttftMs.p50 / s.ttftMs.p50, 3)} |` : "";
}).filter(Boolean);
const md = `# Inference server under load (${a.fake ? "fake model" : `preset ${a.preset}`}, ${meta.world} rank(s)${a["one-gpu"] ? " on one GPU" : ""})

${Object.entries(servers).map(([p, s]) => `- path ${p}: ${s.description}; plans: ${s.plans || "-"}`).join("\n")}
- ${meta.slots} KV-cache slots x ${meta.context} positions; prompts of ${promptBytes} bytes, ${maxTokens} tokens each, temperature 0.8; streaming clients over loopback, each sending its next request when the last ends; ${duration} s per level (${durationMax} s at ${Math.max(...clientsList)} clients) after a 2 s warm-up. Generated by \`bun bench/serve-load.ts ${process.argv.slice(2).join(" ")}\`, ${meta.date}.

| path | clients | tokens/s | TTFT p50 ms | TTFT p99 ms | inter-token p50 ms | inter-token p99 ms | mean decode batch | requests | errors |
|---|---|---|---|---|---|---|---|---|---|
${rows.join("\n")}

${paths.length === 2 ? `${paths[0]} / ${paths[1]} (below 1: ${paths[0]} is faster for latency; above 1: more throughput):

| clients | tokens/s ratio | inter-token p50 ratio | TTFT p50 ratio |
|---|---|---|---|
${ratios.join("\n")}
` : ""}`;
writeFileSync(`${a.out}.md`, md);
say(`wrote ${a.out}.json and ${a.out}.md`);
const errs = levels.reduce((s, l) => s + l.errors, 0);
if (errs > 0) say(`${errs} errors; first: ${levels.flatMap((l) => l.errorSamples)[0]}`);
// Exits explicitly: on the GPU host the process stayed alive after writing its tables until the
// step's bound (a client socket or timer still referenced); the servers are already stopped.
process.exit(errs > 0 ? 1 : 0);
