// model-internode.ts — the performance model of bench/MODEL-internode.md: predicted AG+GEMM and
// GEMM+RS times on 2 nodes x 8 H200 (W = 16), for 8x400 Gb/s ConnectX-7 and 16x200 Gb/s EFA per
// node. Every input is a named constant with its source; `bun bench/model-internode.ts` prints the
// tables that MODEL-internode.md quotes.

// ---- inputs ----------------------------------------------------------------------------------------

/** bf16 GEMM rate, FLOP/s. cuBLAS on the project's H200, measured (task brief). The weft engine
 * measured 0.97-1.01x cuBLASLt on large shapes (gemm branch 352ba0b, bench/results/gemm.md), so
 * the same rate stands for it; the second scenario uses the power-capped sustained rate of that
 * run (650-710 TFLOP/s, 690 taken). */
const GEMM_RATE = { peak: 780e12, sustained: 690e12 };
/** Scenarios: A uses datasheet line rates (a lower bound on time); B derates every link to 80% of
 * line rate (an assumption: typical of NCCL bus bandwidth on NVLink and of RDMA goodput after
 * headers) and uses the sustained GEMM rate. */
const SCENARIOS = [
  { name: "A: GEMM 780 TFLOP/s, links at line rate", rate: GEMM_RATE.peak, linkEff: 1.0 },
  { name: "B: GEMM 690 TFLOP/s, links at 80% of line rate", rate: GEMM_RATE.sustained, linkEff: 0.8 },
];
/** SMs on an H200 (datasheet), and SMs given to comm CTAs during the fused op (our choice; the
 * real split comes from the cost model at run time). */
const SMS = 132;
const COMM_SMS = 16;
/** NVLink 4 on H200: 900 GB/s total per GPU (datasheet), 450 GB/s each way. */
const NVLINK_BW = 450e9;
/** Per-GPU network line rate. ConnectX-7: 400 Gb/s per port (datasheet), one per GPU. EFA: 16 x
 * 200 Gb/s per node (the configuration; AWS p5en lists 3200 Gbps EFAv3), two per GPU. */
const NIC_BW = { "8x400G CX-7": 400e9 / 8, "16x200G EFA": (2 * 200e9) / 8 };
/** Round trip of a write and its delivery acknowledgement (our signal waits for one). Assumptions,
 * not measurements: RC verbs ~ a few us, EFA SRD ~ tens of us; they only matter at small M. */
const RTT = { "8x400G CX-7": 5e-6, "16x200G EFA": 30e-6 };
/** Proxy cost per command, s: 1 / 65k commands/s, put+signal x64 host-pushed on the 2-core dev VM
 * over tcp;ofi_rxm (bench/results/proxy.md). An upper bound: that figure includes the tcp
 * provider's per-write cost, which an RDMA NIC does not have. GPU-pushed rate: not measured yet. */
const PROXY_CMD_S = 1 / 65e3;
/** One command moves one 128-row band of A (the GEMM tile height), so a band is handed to the GEMM
 * as soon as it lands. */
const BAND_ROWS = 128;
const W = 16;
const LOCAL = 8;
const BF16 = 2;

/** mKernel's published 2-node EFA AG+GEMM, TFLOP/s per GPU (from the issue). */
const MKERNEL_AG_EFA: Record<number, number> = { 4096: 51, 8192: 133, 16384: 285, 24576: 378, 32768: 451 };

// ---- model -------------------------------------------------------------------------------------------

interface Shape { M: number; N: number; K: number }

interface Terms {
  flops: number;
  gemm: number;      // GEMM alone on the SMs left to it
  nic: number;       // the rail peer's shard over this GPU's NIC, proxy and round trip included
  nvlink: number;    // NVLink traffic into this GPU
  total: number;     // predicted op time
  bound: string;
}

let linkEff = 1;
const nvlinkBw = () => NVLINK_BW * linkEff;
const nicBw = (net: keyof typeof NIC_BW) => NIC_BW[net] * linkEff;

function common(s: Shape, rate: number, net: keyof typeof NIC_BW) {
  const flops = 2 * s.M * s.N * s.K;
  const shard = (s.M / W) * s.K * BF16;                // one rank's rows of A (or of C for RS)
  const chunks = Math.max(1, Math.ceil(s.M / W / BAND_ROWS));
  const chunk = shard / chunks;
  const gemm = flops / (rate * (SMS - COMM_SMS) / SMS);
  const band = gemm * BAND_ROWS / s.M;                 // GEMM time of one band
  // Chunks pipeline: the wire or the proxy, whichever is slower per chunk, plus the first command
  // and the last write's acknowledgement.
  const nic = Math.max(shard / nicBw(net), chunks * PROXY_CMD_S) + PROXY_CMD_S + RTT[net];
  return { flops, shard, chunk, gemm, band, nic };
}

/**
 * AG+GEMM, hierarchical and rail-aligned. Each GPU fetches its rail peer's shard (same local index
 * on the other node) over its own NIC and forwards it over NVLink; the 7 local shards come over
 * NVLink too: 14 shards into each GPU over NVLink, 1 over the NIC. Tiles run local rows first, then
 * intra-node rows, then remote rows in arrival order; the op ends with the GEMM or one band after
 * the last data, whichever is later.
 */
function agGemm(s: Shape, rate: number, net: keyof typeof NIC_BW): Terms {
  const c = common(s, rate, net);
  const nvlink = Math.max(14 * c.shard / nvlinkBw(), c.nic + c.chunk / nvlinkBw());
  const lastData = Math.max(c.nic, nvlink);
  const total = Math.max(c.gemm, lastData + c.band);
  return { flops: c.flops, gemm: c.gemm, nic: c.nic, nvlink, total, bound: total === c.gemm ? "GEMM" : lastData === c.nic ? "NIC" : "NVLink" };
}

/**
 * GEMM+RS, the mirror: each GPU computes a partial C [M, K] (F as above) and C is reduce-scattered
 * by rows. Rows bound for the other node are computed first and reduced inside the node over
 * NVLink (each GPU reduces its rail peer's shard: 7 partials in), then sent over the NIC; the rows
 * of this node follow and are reduced the same way (7 partials in), and the other node's reduced
 * contribution for this GPU's own shard arrives over the NIC. Same bytes as AG+GEMM, but the data
 * exists only once its tiles are computed.
 */
function gemmRs(s: Shape, rate: number, net: keyof typeof NIC_BW): Terms {
  const c = common(s, rate, net);
  const remoteReduced = Math.max(c.gemm / 2, 7 * c.shard / nvlinkBw()) + c.band + c.chunk / nvlinkBw();
  // The NIC stream starts once the first band is computed and reduced, and cannot outrun the
  // production and reduction of the remote rows.
  const firstReduced = c.band + 7 * c.chunk / nvlinkBw();
  const remoteArrived = Math.max(firstReduced + c.nic, remoteReduced + c.chunk / nicBw(net) + RTT[net]);
  const localReduced = Math.max(c.gemm, 14 * c.shard / nvlinkBw()) + c.chunk / nvlinkBw();
  const total = Math.max(localReduced, remoteArrived);
  const nvlink = 14 * c.shard / nvlinkBw();
  return { flops: c.flops, gemm: c.gemm, nic: c.nic, nvlink, total,
    bound: total === localReduced ? (c.gemm >= nvlink ? "GEMM" : "NVLink") : "NIC" };
}

/** Unfused baseline: GEMM on all SMs after (or before) a hierarchical collective run alone. */
function unfused(s: Shape, rate: number, net: keyof typeof NIC_BW): number {
  const c = common(s, rate, net);
  return c.flops / rate + Math.max(c.nic, 14 * c.shard / nvlinkBw());
}

// ---- tables ------------------------------------------------------------------------------------------

const shapes: Shape[] = [4096, 8192, 16384, 24576, 32768].map((M) => ({ M, N: M / W, K: M }));
const us = (t: number) => (t * 1e6).toFixed(0);
const tf = (f: number, t: number) => (f / t / 1e12).toFixed(0);

const out: string[] = [];
for (const sc of SCENARIOS) {
  linkEff = sc.linkEff;
  out.push(`### ${sc.name}; ${COMM_SMS} of ${SMS} SMs on communication during the fused op`, "");
  out.push("| M | net | GEMM us | NIC us | NVLink us | AG+GEMM us | TFLOP/s | bound | mKernel EFA TFLOP/s | GEMM+RS us | TFLOP/s | bound | unfused us |");
  out.push("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
  for (const s of shapes) {
    for (const net of Object.keys(NIC_BW) as (keyof typeof NIC_BW)[]) {
      const ag = agGemm(s, sc.rate, net);
      const rs = gemmRs(s, sc.rate, net);
      const mk = net === "16x200G EFA" ? String(MKERNEL_AG_EFA[s.M]) : "";
      out.push(`| ${s.M / 1024}k | ${net} | ${us(ag.gemm)} | ${us(ag.nic)} | ${us(ag.nvlink)} | ${us(ag.total)} | ${tf(ag.flops, ag.total)} | ${ag.bound} | ${mk} | ` +
        `${us(rs.total)} | ${tf(rs.flops, rs.total)} | ${rs.bound} | ${us(unfused(s, sc.rate, net))} |`);
    }
  }
  out.push("");
}
console.log(out.join("\n"));
