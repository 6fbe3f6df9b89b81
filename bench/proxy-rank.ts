// One rank of bench/proxy.ts. Rank 0 measures, rank 1 is the target (its proxy only progresses
// incoming writes). Rank 0 hosts the store and prints {"port": n} first, then one JSON result.
//   RANK, WORLD_SIZE=2, MASTER_PORT, WEFT_FABRIC_PROVIDER, REPEATS
import { ProxyCommand } from "../lib/abi.ts";
import { Store } from "../lib/bootstrap.ts";
import { HostBuffer, Proxy, Transport, type Command } from "../lib/transport.ts";

const rank = Number(process.env.RANK);
const repeats = Number(process.env.REPEATS ?? 5);
const store = await Store.connect({ rank, worldSize: 2, addr: "127.0.0.1", port: Number(process.env.MASTER_PORT ?? 0), timeoutMs: 60_000 });
if (rank === 0) console.log(JSON.stringify({ port: store.port }));

const BUF = 64 << 20;
const WORDS = 4096;
const src = HostBuffer.alloc(BUF);
const dst = HostBuffer.alloc(BUF);
const sig = HostBuffer.alloc(8 * WORDS);
src.view.fill(0x3c);
const transport = await Transport.connect(store, { timeoutMs: Number(process.env.TIMEOUT_MS ?? 60_000) });
const srcRegion = await transport.share(store, src);
const dstRegion = await transport.share(store, dst);
const sigRegion = await transport.share(store, sig);
// Rank 0 blocks its event loop (push/waitSync) while it hosts the store: every proxy must run first.
const proxy = await Proxy.connect(store, transport, { fifoSlots: 4096, maxInflight: Number(process.env.INFLIGHT ?? 16384) });

interface Sample { median: number; min: number; max: number }
function summarize(xs: number[]): Sample {
  const s = [...xs].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)]!, min: s[0]!, max: s[s.length - 1]! };
}

const SIGNAL_VALUE = ProxyCommand.offsets.signal_value;

/** Commands/s for `total` commands pushed in batches of `batch` (pre-packed; signal values bumped
 * per push so that every signal raises its word). */
function commandRate(kind: "put" | "put+signal" | "signal-1-word", batch: number, total: number): number {
  const cmds: Command[] = Array.from({ length: batch }, (_, i) => {
    switch (kind) {
      case "put": return { op: "put", peer: 1, src: srcRegion, srcOffset: 64 * i, dst: dstRegion, dstOffset: 64 * i, bytes: 64 };
      case "put+signal": return { op: "put", peer: 1, src: srcRegion, srcOffset: 64 * i, dst: dstRegion, dstOffset: 64 * i, bytes: 64,
        signal: { region: sigRegion, offset: 8 * (i % WORDS), value: 1 } };
      case "signal-1-word": return { op: "signal", peer: 1, region: sigRegion, offset: 0, value: 1 };
    }
  });
  const packed = Proxy.pack(cmds);
  const dv = new DataView(packed.buffer, packed.byteOffset, packed.byteLength);
  let value = Number(proxy.stats().pushed) + 1;
  const t0 = performance.now();
  let last = 0;
  for (let done = 0; done < total; done += batch) {
    if (kind !== "put") {
      for (let i = 0; i < batch; i++) dv.setBigUint64(i * ProxyCommand.size + SIGNAL_VALUE, BigInt(value++), true);
    }
    last = proxy.push(packed, { count: batch, timeoutMs: 60_000 });
  }
  proxy.waitSync(last, 60_000);
  return total / ((performance.now() - t0) / 1000);
}

/** GB/s of back-to-back puts of `bytes` each, `total` bytes in all, cycling through the buffers. */
function bandwidth(bytes: number, total: number): number {
  const n = Math.max(1, Math.floor(total / bytes));
  const slots = Math.max(1, Math.floor(BUF / bytes));
  const cmds: Command[] = Array.from({ length: Math.min(n, 256) }, (_, i) => ({
    op: "put", peer: 1, src: srcRegion, srcOffset: (i % slots) * bytes, dst: dstRegion, dstOffset: (i % slots) * bytes, bytes,
  }));
  const packed = Proxy.pack(cmds);
  const t0 = performance.now();
  let last = 0;
  for (let done = 0; done < n; done += cmds.length) {
    last = proxy.push(packed, { count: Math.min(cmds.length, n - done), timeoutMs: 60_000 });
  }
  proxy.waitSync(last, 60_000);
  return (n * bytes) / ((performance.now() - t0) * 1e6);
}

if (rank === 0) {
  const rates: Record<string, Sample> = {};
  for (const kind of ["put", "put+signal", "signal-1-word"] as const) {
    for (const batch of [1, 64]) {
      const total = batch === 1 ? 20_000 : 100_000;
      commandRate(kind, batch, Math.min(total, 5000)); // warm-up: connections, buffers
      if (process.env.TRACE) console.error(`${kind} x${batch}`, JSON.stringify(proxy.stats()));
      rates[`${kind} x${batch}`] = summarize(Array.from({ length: repeats }, () => commandRate(kind, batch, total)));
    }
  }
  const bw: Record<string, Sample> = {};
  for (const bytes of [64 << 10, 1 << 20, 4 << 20, 16 << 20]) {
    bandwidth(bytes, 64 << 20);
    bw[String(bytes)] = summarize(Array.from({ length: repeats }, () => bandwidth(bytes, 1 << 30)));
  }
  console.log(JSON.stringify({ provider: transport.provider, info: transport.info, rates, bandwidth: bw, stats: proxy.stats() }));
}
await store.barrier("bench/end", 600_000);
proxy.dispose();
transport.dispose();
src.dispose();
dst.dispose();
sig.dispose();
await store.close();
process.exit(0);
