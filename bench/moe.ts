// moe.ts — the MoE ops against torch's path, all timed in this process (DESIGN.md "Benchmarks"):
//
//   bun bench/moe.ts [--configs A,B,decode] [--worlds 1,2] [--devices 0,1] [--routing uniform,skewed]
//                    [--samples N] [--rest-ms R] [--name moe]   (TORCH_MOE_JSON=a.json[,b.json] adds torch's numbers)
//   bash bench/moe-host.sh      (torch's peer, then this, then bench/model-moe.ts: one device call)
//
// Configs (per rank): A T 4096, k 8, H 7168, I 2048, 32 local experts; B T 16384, k 4, H 4096, I 1536,
// 16 local experts; decode: A at T 128. E = local experts x W. Worlds: W ranks sharing GPU 0 (each a
// 1/W share of its SMs), or with --devices one rank per listed GPU (issue 31's two-GPU run).
// Per (config, world, routing), every rank's plans launched together, the slower rank counting:
//   route             moeRouteSync on [T, E] f32 logits (world 1 only: one GPU's kernel)
//   dispatch          comm.moeDispatch with topkIds given
//   dispatch+route    the same routing from logits inside the dispatch kernel
//   combine           comm.moeCombine (the experts' outputs random, in the dispatch's layout)
//   grouped up        groupedGemm, the up-projection alone: a [rows, H] x w1 [E/W, I, H] (a Linear's
//                     layout, as torch stores it), the groups the dispatch's expert counts (unpadded,
//                     like torch's offsets), on the rank's share of the SMs (comm.maxCtas): the
//                     compute-only limit of dispatch + up
//   grouped up (KN)   the same with w1 [E/W, H, I]
//   grouped gate+up   groupedGemm with w13 [E/W, 2I, H]; grouped down: [rows, I] x w2 [E/W, H, I]
//   dispatch+up       comm.moeDispatchGemm (no activation, w1 as above), the mover the cost model picks
//   dispatch+up other the same with the other mover (push where the cost model picks pull, and the
//                     reverse), for the choice; the table's last column names the one picked
//   layer             comm.moeLayer (SwiGLU, w13 and w2 as above): against grouped gate+up + grouped
//                     down (the structure cost) and torch's one-GPU layer
//   layer up, layer down  its two plans alone (dispatch + gate|up + SwiGLU; down-projection + combine),
//                     each against its grouped GEMM, so the layer's structure cost has an address
//   dispatch+gate|up  comm.moeDispatchGemm with w13 and no activation (2I columns stored): the layer
//                     up's work without the paired SwiGLU tiles
//   our all-to-all    comm.allToAll of T·k rows per rank, even splits (world > 1): the unfused sequence's
//                     communication
// Timing: CUDA-event time of back-to-back loops (~1 ms) behind one untimed launch, after REST_MS of
// idle GPU, variants alternating sample by sample, the median of SAMPLES (bench/support/rank-timing.ts).
// Every plan's result was checked by test/ops/moe*.test.ts; here one tracked run per plan first says
// it did not fail. Writes bench/results/{NAME}.json and .md (and copies them to $OUT when set).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import { LocalStore } from "../lib/bootstrap.ts";
import { Communicator } from "../lib/comm.ts";
import { deviceCount, deviceInfo } from "../lib/device.ts";
import { groupedGemmSync } from "../lib/ops/grouped-gemm.ts";
import type { MoeDispatchGemmPlan } from "../lib/ops/moe-gemm.ts";
import type { MoeLayerPlan } from "../lib/ops/moe-layer.ts";
import { moeRouteSync } from "../lib/ops/moe-route.ts";
import type { MoeCombinePlan, MoeDispatchPlan } from "../lib/ops/moe.ts";
import { Tensor } from "../lib/tensor.ts";
import { makeRouting, rowsOf, type RoutingKind } from "../test/support/moe-reference.ts";
import { RankTiming } from "./support/rank-timing.ts";

const args = process.argv.slice(2);
const opt = (name: string, dflt: string) => (args.includes(name) ? args[args.indexOf(name) + 1]! : dflt);
const CONFIGS = opt("--configs", "A,B,decode").split(",");
const WORLDS = opt("--worlds", "1,2").split(",").map(Number);
const DEVICES = args.includes("--devices") ? opt("--devices", "").split(",").map(Number) : undefined;
const ROUTINGS = opt("--routing", "uniform,skewed").split(",") as RoutingKind[];
const SAMPLES = Number(opt("--samples", "20"));
const REST_MS = Number(opt("--rest-ms", "2"));
const NAME = opt("--name", "moe");
const LOOP_MS = 1;

const SHAPES: Record<string, { T: number; k: number; H: number; I: number; local: number }> = {
  A: { T: 4096, k: 8, H: 7168, I: 2048, local: 32 },
  B: { T: 16384, k: 4, H: 4096, I: 1536, local: 16 },
  decode: { T: 128, k: 8, H: 7168, I: 2048, local: 32 },
};

if (deviceCount() < 1) {
  console.error("bench/moe.ts needs a GPU");
  process.exit(1);
}

interface Row {
  config: string;
  world: number;
  gpus: number;
  routing: RoutingKind;
  T: number;
  k: number;
  H: number;
  I: number;
  E: number;
  capacity: number;
  ctas: number;
  /** ms per variant (median; slower rank). */
  ms: Record<string, number>;
  /** Bytes of rows one rank pushes per dispatch (T·k·H·2). */
  rowBytes: number;
  upTflop: number;
  downTflop: number;
  /** What the cost model chose for comm.moeDispatchGemm. */
  fused: { ctas: number; tileN: number; mover: string };
}

const rows: Row[] = [];

async function communicators(world: number): Promise<Communicator[]> {
  // Config B at world 2: six receive layouts of ~1.1 GB (dispatch, routed dispatch, dispatch+up, its
  // other-mover twin, dispatch+gate|up, the layer's), two combines' returned rows (0.54 GB each) and
  // the all-to-all's output.
  const heapBytes = 12 * 2 ** 30;
  if (DEVICES) return Communicator.local({ devices: DEVICES.slice(0, world), heapBytes });
  const stores = LocalStore.group(world, { timeoutMs: 60_000 });
  const smBudget = world > 1 ? Math.floor(deviceInfo(0).smCount / world) : undefined;
  return Promise.all(stores.map((store, rank) => Communicator.create(store,
    { rank, worldSize: world, localRank: rank, localWorldSize: world, nodeId: "bench" }, 0, { heapBytes, smBudget })));
}

async function runCase(config: string, world: number, routing: RoutingKind): Promise<void> {
  const s = SHAPES[config]!;
  const E = s.local * world;
  const comms = await communicators(world);
  const made: Tensor[] = [];
  const keep = <T extends Tensor>(t: T) => (made.push(t), t);
  const dispatches: MoeDispatchPlan[] = [], routed: MoeDispatchPlan[] = [], combines: MoeCombinePlan[] = [];
  const fused: (MoeDispatchGemmPlan | MoeLayerPlan)[] = [];
  const xs: Tensor[] = [];
  try {
    for (const c of comms) {
      const dev = c.device;
      const x = keep(Tensor.empty([s.T, s.H], "bf16", { device: dev }).fillRandom(c.rank + 1));
      xs.push(x);
      const ids = keep(Tensor.from(makeRouting(routing, s.T, E, s.k, 17 + c.rank), [s.T, s.k], "i32", { device: dev }));
      const weights = keep(Tensor.empty([s.T, s.k], "f32", { device: dev }).fillRandom(3 + c.rank, 0.05, 1));
      const logits = keep(Tensor.empty([s.T, E], "f32", { device: dev }).fillRandom(5 + c.rank, -4, 4));
      const d = c.moeDispatch({ x, topkIds: ids, topkWeights: weights, experts: E });
      dispatches.push(d);
      routed.push(c.moeDispatch({ x, logits, topk: s.k }));
      const hidden = keep(Tensor.empty([d.layout.capacity, s.H], "bf16", { device: dev }).fillRandom(7 + c.rank));
      const out = keep(Tensor.empty([s.T, s.H], "bf16", { device: dev }));
      combines.push(c.moeCombine({ dispatch: d, hidden, out }));
    }
    // One tracked run of each (a failure throws here), which also leaves a valid layout for the combine.
    await Promise.all(routed.map((p) => p.run()));
    await Promise.all(dispatches.map((p) => p.run()));
    await Promise.all(combines.map((p) => p.run()));
    const streams = comms.map((c) => c.stream);
    const timing = new RankTiming(streams);
    timing.restMs = REST_MS;
    const issues: Record<string, () => void> = {
      dispatch: () => dispatches.forEach((p) => p.enqueue()),
      "dispatch+route": () => routed.forEach((p) => p.enqueue()),
      combine: () => combines.forEach((p) => p.enqueue()),
    };
    // Our grouped GEMMs over rank r's group sizes (the dispatch's expert counts, read back once: the
    // bench only), and the fused ops over the same routing and weights.
    let upFlop = 0, downFlop = 0;
    const gemms = comms.map((c, r) => {
      const L = dispatches[r]!.layout, dev = c.device, x = xs[r]!;
      const counts = L.expertCounts.download() as Int32Array;
      const offsets = new Int32Array(s.local + 1);
      counts.forEach((n, le) => (offsets[le + 1] = offsets[le]! + n));
      const rows = Math.max(1, offsets[s.local]!);
      if (r === 0) { upFlop = 2 * rows * s.H * s.I; downFlop = 2 * rows * s.I * s.H; }
      const groupOffsets = keep(Tensor.from(offsets, [s.local + 1], "i32", { device: dev }));
      const a = keep(Tensor.empty([rows, s.H], "bf16", { device: dev }).fillRandom(21 + r));
      const w1 = keep(Tensor.empty([s.local, s.I, s.H], "bf16", { device: dev }).fillRandom(11, -0.02, 0.02));
      const w1kn = keep(Tensor.empty([s.local, s.H, s.I], "bf16", { device: dev }).fillRandom(12, -0.02, 0.02));
      const w13 = keep(Tensor.empty([s.local, 2 * s.I, s.H], "bf16", { device: dev }).fillRandom(13, -0.02, 0.02));
      const w2 = keep(Tensor.empty([s.local, s.H, s.I], "bf16", { device: dev }).fillRandom(14, -0.02, 0.02));
      const h = keep(Tensor.empty([rows, s.I], "bf16", { device: dev }));
      const h2 = keep(Tensor.empty([rows, 2 * s.I], "bf16", { device: dev }));
      const y = keep(Tensor.empty([rows, s.H], "bf16", { device: dev }));
      const out = keep(Tensor.empty([s.T, s.H], "bf16", { device: dev }));
      const ids = dispatches[r]!.topkIds, weights = dispatches[r]!.topkWeights!;
      const up = c.moeDispatchGemm({ x, topkIds: ids, topkWeights: weights, experts: E, w1, transW: true });
      const other = up.mover === "push" ? "pull" : "push";
      const upOther = c.moeDispatchGemm({ x, topkIds: ids, topkWeights: weights, experts: E, w1, transW: true, config: { mover: other } });
      const layer = c.moeLayer({ x, topkIds: ids, topkWeights: weights, experts: E, w1: w13, w2, out, transW: true, activation: "swiglu" });
      const gateUp = c.moeDispatchGemm({ x, topkIds: ids, topkWeights: weights, experts: E, w1: w13, transW: true });
      fused.push(up, upOther, layer, gateUp);
      const stream = c.stream;
      // The grouped GEMMs on the rank's own share of the SMs (all of them at world 1), as the fused
      // ops run: with W ranks on one GPU each gets 1/W.
      const config = { maxCtas: c.maxCtas };
      return {
        up: () => groupedGemmSync({ a, b: w1, groupOffsets, out: h, transB: true, stream, config }),
        upKn: () => groupedGemmSync({ a, b: w1kn, groupOffsets, out: h, stream, config }),
        gateUp: () => groupedGemmSync({ a, b: w13, groupOffsets, out: h2, transB: true, stream, config }),
        down: () => groupedGemmSync({ a: h, b: w2, groupOffsets, out: y, transB: true, stream, config }),
        fusedUp: () => up.enqueue(),
        fusedUpOther: () => upOther.enqueue(),
        layer: () => layer.enqueue(),
        layerUp: () => layer.up.enqueue(),
        layerDown: () => layer.down.enqueue(),
        fusedGateUp: () => gateUp.enqueue(),
        plans: { up, upOther, layer, gateUp },
      };
    });
    // One tracked run of each fused plan, every rank's together (a failure throws here).
    for (const key of ["up", "upOther", "layer", "gateUp"] as const) await Promise.all(gemms.map((g) => g.plans[key].run()));
    const choice = gemms[0]!.plans.up;
    issues["grouped up"] = () => gemms.forEach((g) => g.up());
    issues["grouped up (KN)"] = () => gemms.forEach((g) => g.upKn());
    issues["grouped gate+up"] = () => gemms.forEach((g) => g.gateUp());
    issues["grouped down"] = () => gemms.forEach((g) => g.down());
    issues["dispatch+up"] = () => gemms.forEach((g) => g.fusedUp());
    issues["dispatch+up other"] = () => gemms.forEach((g) => g.fusedUpOther());
    issues.layer = () => gemms.forEach((g) => g.layer());
    // The down plan reads the hidden rows and layout the up plan left (the tracked run above), so it
    // repeats alone like any reusable plan.
    issues["layer up"] = () => gemms.forEach((g) => g.layerUp());
    issues["layer down"] = () => gemms.forEach((g) => g.layerDown());
    issues["dispatch+gate|up"] = () => gemms.forEach((g) => g.fusedGateUp());
    if (world === 1) {
      const logits = made.find((t) => t.shape[1] === E && t.dtype === "f32")!;
      const ids = keep(Tensor.empty([s.T, s.k], "i32")), w = keep(Tensor.empty([s.T, s.k], "f32"));
      issues.route = () => moeRouteSync({ logits, topk: s.k, ids, weights: w, stream: comms[0]!.stream });
    } else {
      const bytes = s.T * s.k * s.H;
      const a2a = comms.map((c) => c.prepare.allToAll(keep(Tensor.empty([bytes], "bf16", { device: c.device })), keep(c.empty([bytes], "bf16"))));
      issues["our all-to-all"] = () => a2a.forEach((p) => p.launch());
    }
    const names = Object.keys(issues);
    const iters = names.map((n) => {
      const once = timing.loopMs(issues[n]!, 1);
      return Math.max(1, Math.min(200, Math.ceil(LOOP_MS / Math.max(once, 1e-3))));
    });
    const samples = names.map(() => [] as number[]);
    for (let i = 0; i < SAMPLES; i++) names.forEach((n, j) => samples[j]!.push(timing.loopMs(issues[n]!, iters[j]!)));
    const ms: Record<string, number> = {};
    names.forEach((n, j) => (ms[n] = [...samples[j]!].sort((a, b) => a - b)[Math.floor(SAMPLES / 2)]!));
    timing.dispose();
    rows.push({
      config, world, gpus: DEVICES ? world : 1, routing, T: s.T, k: s.k, H: s.H, I: s.I, E,
      capacity: dispatches[0]!.layout.capacity, ctas: dispatches[0]!.ctas, ms, rowBytes: s.T * s.k * s.H * 2,
      upTflop: upFlop / 1e12, downTflop: downFlop / 1e12,
      fused: { ctas: choice.ctas, tileN: choice.tileN, mover: choice.mover },
    });
    console.log(JSON.stringify(rows.at(-1)));
  } finally {
    for (const p of fused.reverse()) p.dispose();
    for (const p of [...combines, ...routed, ...dispatches]) p.dispose();
    for (const t of made.reverse()) t.dispose();
    await Communicator.disposeAll(comms);
  }
}

/** torch's rows from TORCH_MOE_JSON: one or more files (comma-separated), e.g. the one-GPU and the two-GPU runs. */
function torchRows(): any[] {
  const paths = (process.env.TORCH_MOE_JSON ?? "").split(",").filter((p) => p && existsSync(p));
  return paths.flatMap((p) => JSON.parse(readFileSync(p, "utf8")).results ?? []);
}

function cell(v: number | undefined, digits = 3): string {
  return v === undefined || !Number.isFinite(v) ? "-" : v.toFixed(digits);
}

function emit(): void {
  const torch = torchRows();
  const meta = { device: deviceInfo(0).name, sms: deviceInfo(0).smCount, date: new Date().toISOString(), samples: SAMPLES, restMs: REST_MS, torch: process.env.TORCH_MOE_JSON ?? null };
  const dir = join(import.meta.dirname, "results");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${NAME}.json`), JSON.stringify({ meta, rows, torch }, null, 1));
  const tf = (flop: number, ms: number | undefined) => (ms ? ` (${(flop / ms * 1e3).toFixed(0)})` : "");
  const ratio = (a: number | undefined, b: number | undefined) => (a && b ? (a / b).toFixed(3) : "-");
  const lines = [
    `# MoE ops (${meta.device}, ${meta.sms} SMs)`, "",
    `Per rank, bf16; ms = median of ${SAMPLES} CUDA-event loops (~1 ms each, behind one untimed launch, ${REST_MS} ms rest), slower rank. ` +
    "W ranks share one GPU (1/W of its SMs each) unless gpus > 1. GB/s = T·k·H·2 bytes of rows per rank / ms; TFLOP/s = 2·rows·H·I / ms " +
    `(gate+up twice that). Generated by bench/moe.ts on ${meta.date}.`, "",
    "## Kernels", "",
    "| config | W | gpus | routing | E | capacity | route | dispatch (GB/s) | dispatch+route | combine (GB/s) | grouped up (TFLOP/s) | grouped up KN | grouped gate+up | grouped down | dispatch+up | dispatch+up other mover | layer | our all-to-all | fused: CTAs, tile, mover |",
    "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
  ];
  for (const r of rows) {
    const gbs = (ms: number | undefined) => (ms ? ` (${(r.rowBytes / (ms * 1e6)).toFixed(0)})` : "");
    const up = r.upTflop;
    lines.push(`| ${r.config} | ${r.world} | ${r.gpus} | ${r.routing} | ${r.E} | ${r.capacity} | ${cell(r.ms.route)} | ` +
      `${cell(r.ms.dispatch)}${gbs(r.ms.dispatch)} | ${cell(r.ms["dispatch+route"])} | ${cell(r.ms.combine)}${gbs(r.ms.combine)} | ` +
      `${cell(r.ms["grouped up"])}${tf(up, r.ms["grouped up"])} | ${cell(r.ms["grouped up (KN)"])}${tf(up, r.ms["grouped up (KN)"])} | ` +
      `${cell(r.ms["grouped gate+up"])}${tf(2 * up, r.ms["grouped gate+up"])} | ${cell(r.ms["grouped down"])}${tf(r.downTflop, r.ms["grouped down"])} | ` +
      `${cell(r.ms["dispatch+up"])}${tf(up, r.ms["dispatch+up"])} | ${cell(r.ms["dispatch+up other"])} | ${cell(r.ms.layer)} | ` +
      `${cell(r.ms["our all-to-all"])} | ${r.fused ? `${r.fused.ctas}, ${r.fused.tileN}, ${r.fused.mover}` : "-"} |`);
  }
  lines.push("", "## The issue's ratios (same device call)", "",
    "| config | W | routing | grouped up: torch _grouped_mm ms / ours (bar >= 0.95, aim 1.0) | the same, [G, K, N] weights | " +
    "dispatch+up / grouped up (bar <= 1.05) | dispatch+up / (dispatch + grouped up): fused against unfused | " +
    "layer / (grouped gate+up + down) (bar <= 1.05) | layer up / grouped gate+up | dispatch+gate|up (no SwiGLU) / grouped gate+up | layer down / grouped down | " +
    "layer / torch layer (bar <= 0.8) | torch dispatch+up ms | torch layer ms |",
    "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    const t = torch.find((x) => x.config === r.config && x.routing === r.routing && x.world === r.world);
    const pair = (r.ms["grouped gate+up"] ?? NaN) + (r.ms["grouped down"] ?? NaN);
    lines.push(`| ${r.config} | ${r.world} | ${r.routing} | ${ratio(t?.up_gemm?.ms, r.ms["grouped up"])} | ` +
      `${ratio(t?.up_gemm_kn?.ms, r.ms["grouped up (KN)"])} | ${ratio(r.ms["dispatch+up"], r.ms["grouped up"])} | ` +
      `${ratio(r.ms["dispatch+up"], (r.ms.dispatch ?? NaN) + (r.ms["grouped up"] ?? NaN))} | ` +
      `${ratio(r.ms.layer, pair)} | ${ratio(r.ms["layer up"], r.ms["grouped gate+up"])} | ` +
      `${ratio(r.ms["dispatch+gate|up"], r.ms["grouped gate+up"])} | ${ratio(r.ms["layer down"], r.ms["grouped down"])} | ` +
      `${ratio(r.ms.layer, t?.layer?.ms)} | ${cell(t?.dispatch_up?.ms)} | ${cell(t?.layer?.ms)} |`);
  }
  writeFileSync(join(dir, `${NAME}.md`), lines.join("\n") + "\n");
  if (process.env.OUT) {
    mkdirSync(process.env.OUT, { recursive: true });
    for (const ext of ["json", "md"]) writeFileSync(join(process.env.OUT, `${NAME}.${ext}`), readFileSync(join(dir, `${NAME}.${ext}`)));
  }
}

for (const config of CONFIGS) {
  for (const world of WORLDS) {
    if (DEVICES && world > DEVICES.length) continue;
    for (const routing of ROUTINGS) {
      try {
        await runCase(config, world, routing);
      } catch (e) {
        console.error(`${config} W ${world} ${routing}: ${(e as Error).stack ?? e}`);
      }
      emit();  // after every case, so a call cut short keeps what ran
    }
  }
}
