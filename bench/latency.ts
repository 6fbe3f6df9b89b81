// bench/latency.ts — the awaited 8 KiB allReduce with one rank per process (the way torchrun runs):
// spawns bench/support/latency-worker.ts once per GPU and collects each rank's variants.
//
//   bun bench/latency.ts                      (2 GPUs; prints p50 / p99 / min per variant and rank)
//   LAT_VARIANTS=run,runSync ROUNDS=4 bun bench/latency.ts
// bench/collectives.ts runs it too, after its NCCL comparison.
import { join } from "node:path";

export type LatencyStats = { p50: number; p99: number; min: number; samples: number };

/** Runs one worker per rank (world `W`) with `env` added; per rank, variant -> stats. */
export async function latencyPair(W = 2, env: Record<string, string> = {}): Promise<Record<string, LatencyStats>[]> {
  const l = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = l.port;
  l.stop(true);
  const worker = join(import.meta.dirname, "support", "latency-worker.ts");
  const procs = Array.from({ length: W }, (_, rank) => Bun.spawn([process.execPath, worker], {
    env: {
      ...process.env, ...env, RANK: String(rank), WORLD_SIZE: String(W), LOCAL_RANK: String(rank), LOCAL_WORLD_SIZE: String(W),
      MASTER_ADDR: "127.0.0.1", MASTER_PORT: String(port),
    },
    stdout: "pipe", stderr: "inherit",
  }));
  const outs = await Promise.all(procs.map(async (p) => (await new Response(p.stdout).text()).trim().split("\n").at(-1) ?? "{}"));
  return outs.map((o, rank) => {
    try {
      return JSON.parse(o) as Record<string, LatencyStats>;
    } catch {
      console.error(`latency worker ${rank} printed: ${o}`);
      return {};
    }
  });
}

if (import.meta.main) {
  const ranks = await latencyPair(2);
  for (const [rank, vs] of ranks.entries()) {
    for (const [k, v] of Object.entries(vs)) {
      console.log(`rank ${rank} ${k.padEnd(14)} p50 ${v.p50.toFixed(2).padStart(6)} us  p99 ${v.p99.toFixed(2).padStart(6)} us  min ${v.min.toFixed(2).padStart(6)} us  (${v.samples})`);
    }
  }
  console.log(JSON.stringify(ranks));
  process.exit(0);
}
