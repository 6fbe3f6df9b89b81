// plot.ts — every bench/results/*.json as an SVG chart beside it (bench/results/NAME.svg), drawn by
// Vega-Lite and rendered by Vega's headless SVG renderer (no browser, no canvas):
//
//   bun bench/plot.ts                     # every results file with a chart below
//   bun bench/plot.ts --only tp,serve     # just those
//   bun bench/plot.ts --results DIR       # another results folder
//
// Charts: time or TFLOP/s against shape with one line per system (gemm, collectives, tp*, torch_tp*),
// bandwidth against message size (proxy), throughput and latency against clients (serve). A JSON
// whose layout has no chart here is listed and skipped. The charting packages (vega, vega-lite) are
// devDependencies, imported by name at run time.
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({ options: { results: { type: "string", default: "bench/results" }, only: { type: "string" } } });

type Row = Record<string, string | number>;
type Spec = Record<string, unknown>;
const WIDTH = 420, HEIGHT = 240;

/** A line chart: x ordinal in the data's order (a shape label) or quantitative, one line per `series`. */
const BYTES = "datum.value >= 1048576 ? datum.value / 1048576 + ' MiB' : datum.value >= 1024 ? datum.value / 1024 + ' KiB' : datum.value + ' B'";

function lines(title: string, data: Row[], x: { field: string; title: string; log?: boolean; ordinal?: boolean; bytes?: boolean },
  y: { field: string; title: string; log?: boolean }, series = "system", dash?: string): Spec {
  const order = [...new Set(data.map((d) => d[x.field]))];
  return {
    title, width: WIDTH, height: HEIGHT, data: { values: data },
    mark: { type: "line", point: true, strokeWidth: 2 },
    encoding: {
      x: x.ordinal
        ? { field: x.field, type: "ordinal", title: x.title, sort: order, axis: { labelAngle: -35 } }
        : { field: x.field, type: "quantitative", title: x.title, scale: x.log ? { type: "log", base: 2 } : {}, axis: x.bytes ? { labelExpr: BYTES } : {} },
      y: { field: y.field, type: "quantitative", title: y.title, scale: y.log ? { type: "log" } : { zero: true } },
      color: { field: series, type: "nominal", title: null, legend: { orient: "bottom", columns: 2, labelLimit: 320 } },
      ...(dash ? { strokeDash: { field: dash, type: "nominal", title: null, legend: { orient: "bottom" } }, detail: { field: dash } } : {}),
      tooltip: [{ field: series }, { field: x.field }, { field: y.field, format: ".4g" }],
    },
  };
}

const shapeLabel = (m: number, n: number, k: number) => `${m}x${n}x${k}`;
const sizeLabel = (b: number) => (b >= 1 << 20 ? `${b / (1 << 20)} MiB` : b >= 1024 ? `${b / 1024} KiB` : `${b} B`);

// ---- one chart builder per results layout -----------------------------------------------------------------

function gemm(j: any): Spec[] {
  const data: Row[] = [];
  for (const r of j.rows) {
    const label = shapeLabel(r.shape.m, r.shape.n, r.shape.k) + (r.shape.transB ? "" : " (b [K,N])");
    const weftConfigs = r.results.filter((x: any) => x.name.startsWith("weft {"));
    for (const x of r.results) if (x.name === "cublaslt" || x.name === "weft") data.push({ shape: label, system: x.name === "weft" ? "weft (heuristic)" : "cuBLASLt", tflops: x.tflops });
    if (weftConfigs.length) data.push({ shape: label, system: "weft (best config)", tflops: Math.max(...weftConfigs.map((x: any) => x.tflops)) });
  }
  return [lines(`GEMM on ${j.device}: TFLOP/s by shape (M x N x K, bf16)`, data, { field: "shape", title: "M x N x K", ordinal: true }, { field: "tflops", title: "TFLOP/s" })];
}

function collectives(j: any): Spec[] {
  const kinds = [...new Set(j.rows.map((r: any) => r.kind))] as string[];
  return kinds.map((kind) => {
    const data: Row[] = [];
    for (const r of j.rows.filter((r: any) => r.kind === kind)) {
      data.push({ bytes: r.bytes, system: "weft", us: r.weft.us });
      if (r.nccl) data.push({ bytes: r.bytes, system: `NCCL ${j.meta.nccl}`, us: r.nccl.us });
    }
    return lines(`${kind}, ${j.meta.gpus} x ${j.meta.gpu}: time by bytes per rank`, data, { field: "bytes", title: "bytes per rank", log: true, bytes: true },
      { field: "us", title: "µs (log)", log: true });
  });
}

const TP_TITLES: Record<string, string> = {
  allGatherGemm: "AllGather + GEMM", gemmReduceScatter: "GEMM + ReduceScatter", gemmAllReduce: "GEMM + AllReduce",
};

// The systems a reader compares: ours (the op as shipped), our own GEMM then our collective
// ("sequential"), the cuBLAS + NCCL sequence, torch's best, and our GEMM alone (the compute-only limit).
const TP_SYSTEMS: Record<string, string> = {
  ours: "weft (as shipped)", "ours sequential": "weft sequential", "cuBLAS+NCCL": "cuBLAS + NCCL",
  "own GEMM only": "our GEMM alone (limit)",
};

function tp(j: any, name: string): Spec[] {
  const ops = [...new Set(j.rows.map((r: any) => r.op))] as string[];
  const charts = ops.map((op) => {
    const data: Row[] = [];
    for (const r of j.rows.filter((r: any) => r.op === op)) {
      const label = shapeLabel(r.M, r.N, r.K);
      // Each rank's GEMM is 1/W of the 2 M N K flops.
      const tflops = (ms: number) => (2 * r.M * r.N * r.K) / j.world / (ms * 1e9);
      for (const [v, x] of Object.entries(r.variants as Record<string, { ms: number }>)) {
        if (TP_SYSTEMS[v]) data.push({ shape: label, system: TP_SYSTEMS[v]!, tflops: tflops(x.ms) });
      }
      if (r.torch?.ms) data.push({ shape: label, system: "torch (best)", tflops: tflops(r.torch.ms) });
    }
    return lines(`${TP_TITLES[op] ?? op} (${name}), ${j.world} x ${j.device}: TFLOP/s per GPU by shape`, data,
      { field: "shape", title: "M x N x K (whole problem)", ordinal: true }, { field: "tflops", title: "TFLOP/s per GPU" });
  });
  // Decode sizes are bound by reading the weights, not by math: their time, not their TFLOP/s.
  const decode = j.rows.filter((r: any) => r.op === "gemmAllReduce" && r.M <= 512);
  if (decode.length > 0) {
    const data: Row[] = [];
    for (const r of decode) {
      for (const [v, x] of Object.entries(r.variants as Record<string, { ms: number }>)) {
        if (TP_SYSTEMS[v]) data.push({ M: r.M, system: TP_SYSTEMS[v]!, us: x.ms * 1000 });
      }
      if (r.torch?.ms) data.push({ M: r.M, system: "torch (best)", us: r.torch.ms * 1000 });
    }
    charts.push(lines(`GEMM + AllReduce at decode sizes (${name}), N = ${decode[0].N}, K = ${decode[0].K}: time by M`, data,
      { field: "M", title: "M (tokens in the batch)", log: true }, { field: "us", title: "µs" }));
  }
  return charts;
}

function torchTp(j: any, name: string): Spec[] {
  const ops = [...new Set(j.rows.map((r: any) => r.op))] as string[];
  return ops.map((op) => lines(`torch ${op} (${name}), ${j.device}, torch ${j.torch}: TFLOP/s per GPU by shape`,
    j.rows.filter((r: any) => r.op === op).map((r: any) => ({ shape: shapeLabel(r.M, r.N, r.K), system: r.variant, tflops: r.tflops_per_gpu })),
    { field: "shape", title: "M x N x K (whole problem)", ordinal: true }, { field: "tflops", title: "TFLOP/s per GPU" }));
}

function proxy(j: any): Spec[] {
  const out: Spec[] = [];
  for (const [machine, m] of Object.entries(j as Record<string, any>)) {
    const data: Row[] = [];
    for (const [provider, r] of Object.entries(m.results as Record<string, any>)) {
      if (!r.bandwidth) continue;
      for (const [bytes, b] of Object.entries(r.bandwidth as Record<string, { median: number }>)) {
        data.push({ bytes: Number(bytes), size: sizeLabel(Number(bytes)), system: provider, gbps: b.median });
      }
    }
    if (data.length) {
      out.push(lines(`proxy puts on ${machine} (${m.machine.cpu}, libfabric ${m.machine.libfabric}): bandwidth by message size`, data,
        { field: "bytes", title: "bytes per put", log: true, bytes: true }, { field: "gbps", title: "GB/s" }));
    }
  }
  return out;
}

function serve(j: any): Spec[] {
  const levels = j.levels as any[];
  const row = (f: (l: any) => number, unit: string) => levels.map((l) => ({ clients: l.clients, system: `path ${l.path}`, [unit]: f(l) }));
  const where = `${j.fake ? "fake model" : `preset ${j.preset}`}, world ${j.world}${j.oneGpu ? " on one GPU" : ""}`;
  const quantiles = (f: (l: any) => { p50: number; p99: number }) => levels.flatMap((l) => [
    { clients: l.clients, system: `path ${l.path}`, quantile: "p50", ms: f(l).p50 }, { clients: l.clients, system: `path ${l.path}`, quantile: "p99", ms: f(l).p99 },
  ]);
  const latency = quantiles((l) => l.itlMs), ttft = quantiles((l) => l.ttftMs);
  return [
    lines(`serving (${where}): throughput by concurrent clients`, row((l) => l.tokensPerS, "tps"), { field: "clients", title: "streaming clients", log: true },
      { field: "tps", title: "generated tokens/s" }),
    lines("inter-token latency by concurrent clients (p50 solid, p99 dashed)", latency, { field: "clients", title: "streaming clients", log: true },
      { field: "ms", title: "ms (log)", log: true }, "system", "quantile"),
    lines("time to first token by concurrent clients (p50 solid, p99 dashed)", ttft, { field: "clients", title: "streaming clients", log: true },
      { field: "ms", title: "ms (log)", log: true }, "system", "quantile"),
  ];
}

/** Which builder fits a results file, by its layout. */
function chartsFor(name: string, j: any): Spec[] | null {
  if (j?.bench === "serve-load") return serve(j);
  if (Array.isArray(j?.rows) && j.rows[0]?.shape && j.rows[0]?.results) return gemm(j);
  if (Array.isArray(j?.rows) && j.rows[0]?.kind && j.rows[0]?.weft) return collectives(j);
  if (Array.isArray(j?.rows) && j.rows[0]?.variants && j.rows[0]?.op) return tp(j, name);
  if (Array.isArray(j?.rows) && j.rows[0]?.variant && j.rows[0]?.op) return torchTp(j, name);
  if (j && typeof j === "object" && Object.values(j).every((m: any) => m?.machine && m?.results)) return proxy(j);
  return null;
}

// ---- rendering --------------------------------------------------------------------------------------------

const [vega, vegaLite] = await Promise.all([import(["vega"][0]!), import(["vega-lite"][0]!)]).catch((e) => {
  console.error(`plot: the charting packages are missing (${(e as Error).message}); \`npm install\` adds vega and vega-lite (devDependencies)`);
  process.exit(1);
});

async function render(charts: Spec[]): Promise<string> {
  const spec = {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json", vconcat: charts, spacing: 40,
    config: { font: "Helvetica, Arial, sans-serif", title: { fontSize: 13, anchor: "start" }, axis: { labelFontSize: 10, titleFontSize: 11 } },
  };
  const compiled = vegaLite.compile(spec).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: "none" });
  const svg = await view.toSVG();
  view.finalize();
  return svg;
}

const only = args.only ? new Set(args.only.split(",")) : null;
const files = readdirSync(args.results!).filter((f) => f.endsWith(".json")).sort();
let written = 0;
for (const f of files) {
  const name = basename(f, ".json");
  if (only && !only.has(name)) continue;
  const charts = chartsFor(name, JSON.parse(readFileSync(join(args.results!, f), "utf8")));
  if (!charts || charts.length === 0) {
    console.log(`plot: ${f}: no chart for this layout, skipped`);
    continue;
  }
  const out = join(args.results!, `${name}.svg`);
  writeFileSync(out, await render(charts));
  written++;
  console.log(`plot: ${f} -> ${out} (${charts.length} chart${charts.length > 1 ? "s" : ""})`);
}
console.log(`plot: ${written} SVG file${written === 1 ? "" : "s"} written`);
