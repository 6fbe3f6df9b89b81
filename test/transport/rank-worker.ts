// One rank of a multi-process transport test (test/transport/proxy.test.ts). Rank 0 hosts the
// bootstrap store on a free port and prints {"port": n} first; then every rank connects the
// transport through the store, runs SCENARIO and prints one JSON result line.
//
//   RANK, WORLD_SIZE, MASTER_PORT (0 on rank 0), SCENARIO, SEED, TIMEOUT_MS, WRITES, DROP_EVERY
//   (signal-order: every DROP_EVERY-th data write of this rank's transport is dropped, through the
//   test-only weft_testing_transport_drop_writes)
// The parent sets WEFT_FABRIC_PROVIDER=tcp;ofi_rxm and FI_TCP_IFACE=lo (loopback).
import { readdirSync } from "node:fs";

import { check, native } from "../../lib/native.ts";
import { HostBuffer, Proxy, Region, Transport, transportCounters, type Command } from "../../lib/transport.ts";
import { connectWorkerStore, describeError, report } from "../support/report-channel.ts";

const rank = Number(process.env.RANK);
const worldSize = Number(process.env.WORLD_SIZE);
const scenario = process.env.SCENARIO ?? "random-writes";
const seed = Number(process.env.SEED ?? 1);
const timeoutMs = Number(process.env.TIMEOUT_MS ?? 20000);

/** xorshift32 stream: the same (seed, stream) gives the same numbers in every process. */
function rng(...keys: number[]): () => number {
  let s = 0x9e3779b9;
  for (const k of keys) s = Math.imul(s ^ (k + 0x7f4a7c15), 0x85ebca6b) >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
}

/** Fills `out` with the source pattern of `owner`: fresh random bytes, never all zero. */
function fillSource(out: Uint8Array, owner: number): void {
  const words = new Uint32Array(out.buffer, out.byteOffset, out.byteLength >>> 2);
  let s = (Math.imul(seed + 1, 0x9e3779b1) ^ Math.imul(owner + 1, 0x85ebca77)) >>> 0 || 1;
  for (let i = 0; i < words.length; i++) {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    words[i] = s;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const store = await connectWorkerStore(rank, worldSize, timeoutMs);

const threadsNow = () => {
  try {
    return readdirSync("/proc/self/task").length;
  } catch {
    return -1;
  }
};

try {
  switch (scenario) {
    case "random-writes": report(await randomWrites()); break;
    case "signal-order": report(await signalOrder()); break;
    case "killed-peer": report(await killedPeer()); break;
    case "all-to-all": report(await allToAll()); break;
    case "fifo": report(await fifo()); break;
    default: throw new Error(`unknown scenario ${scenario}`);
  }
} catch (e) {
  report({ rank, ...describeError(e) });
}
try {
  await store.close();
} catch {
  // a killed peer can leave the store unable to say goodbye; the result line is out already
}
process.exit(0);

// ---- scenarios -------------------------------------------------------------------------------------

/**
 * Ring: rank r sends to r+1 and receives from r-1. WRITES puts in total (split over the senders),
 * random sizes 1 B .. 4 MiB (log-uniform, plus both ends) at random source and destination
 * offsets, in rounds whose destinations do not overlap. Every put raises the round's signal word to
 * (round << 20 | index + 1); the receiver, each time it sees the word move, checks every put the
 * value covers by checksum: a signal seen before its data is a failure. After a round the receiver
 * poisons what it received and acks, and the sender starts the next round.
 */
async function randomWrites() {
  const SRC = 32 << 20;
  const DST = 64 << 20;
  const MAX = 4 << 20;
  const total = Number(process.env.WRITES ?? 10000);
  const perSender = Math.floor(total / worldSize) + (rank < total % worldSize ? 1 : 0);
  const next = (rank + 1) % worldSize;
  const prev = (rank + worldSize - 1) % worldSize;
  const prevWrites = Math.floor(total / worldSize) + (prev < total % worldSize ? 1 : 0);

  // Buffers first: `using` disposes in reverse order, so the transport closes before they are freed.
  using src = HostBuffer.alloc(SRC);
  using dst = HostBuffer.alloc(DST);
  using sig = HostBuffer.alloc(4096);
  using transport = await Transport.connect(store, { timeoutMs });
  fillSource(src.view, rank);
  const expected = new Uint8Array(SRC);
  fillSource(expected, prev);
  dst.view.fill(0x5a);
  const srcRegion = await transport.share(store, src);
  const dstRegion = await transport.share(store, dst);
  const sigRegion = await transport.share(store, sig);
  using proxy = await Proxy.connect(store, transport, { fifoSlots: 256 });
  const words = new BigUint64Array(sig.view.buffer, sig.view.byteOffset, 2); // [0] data signal from prev, [1] ack from next

  interface Put { srcOffset: number; dstOffset: number; bytes: number }
  // The plan of round k from `sender`: both ends compute it from the same seed.
  const plan = (sender: number, round: number, remaining: number): Put[] => {
    const r = rng(seed, sender, round);
    const puts: Put[] = [];
    let at = Math.floor(r() * 64);
    while (puts.length < Math.min(remaining, 400)) {
      let bytes = Math.max(1, Math.min(MAX, Math.floor(2 ** (r() * 22.0001))));
      if (round === 1 && puts.length === 0) bytes = 1;
      if (round === 1 && puts.length === 1) bytes = MAX;
      if (at + bytes > DST) break;
      puts.push({ srcOffset: Math.floor(r() * (SRC - bytes + 1)), dstOffset: at, bytes });
      at += bytes + Math.floor(r() * 4096);
    }
    return puts;
  };

  let sent = 0;
  let sendRound = 0;
  let sendPending: Command[] = [];
  let received = 0;
  let recvRound = 1;
  let recvPlan = plan(prev, 1, prevWrites);
  let verified = 0;
  let signalsSeen = 0;
  let earlySignals = 0;
  let bytesVerified = 0;
  let lastAck = 0;
  const started = performance.now();
  const deadline = started + timeoutMs * 4;

  while (sent < perSender || received < prevWrites || sendPending.length > 0) {
    if (performance.now() > deadline) throw new Error(`rank ${rank}: stuck (sent ${sent}/${perSender}, received ${received}/${prevWrites}, round ${recvRound})`);
    // Sender: a new round once the receiver acked the last one.
    if (sendPending.length === 0 && sent < perSender && Number(words[1]) >= sendRound) {
      sendRound++;
      const puts = plan(rank, sendRound, perSender - sent);
      sendPending = puts.map((p, i) => ({
        op: "put", peer: next, src: srcRegion, srcOffset: p.srcOffset, dst: dstRegion, dstOffset: p.dstOffset, bytes: p.bytes,
        signal: { region: sigRegion, offset: 0, value: (BigInt(sendRound) << 20n) | BigInt(i + 1) },
      }));
      sent += puts.length;
    }
    if (sendPending.length > 0) {
      const chunk = sendPending.splice(0, Math.min(sendPending.length, proxy.capacity));
      proxy.push(chunk, { timeoutMs });
    }
    // Receiver: check everything the signal word covers now.
    const v = words[0]!;
    const round = Number(v >> 20n);
    if (round > recvRound) throw new Error(`rank ${rank}: signal for round ${round} arrived before round ${recvRound} was acked`);
    if (round === recvRound) {
      const covered = Number(v & 0xfffffn);
      if (covered > verified) signalsSeen++;
      while (verified < covered) {
        const p = recvPlan[verified]!;
        const got = Buffer.from(dst.view.buffer, dst.view.byteOffset + p.dstOffset, p.bytes);
        const want = Buffer.from(expected.buffer, expected.byteOffset + p.srcOffset, p.bytes);
        if (!got.equals(want)) {
          earlySignals++;
          throw new Error(`rank ${rank}: round ${round} put ${verified} (${p.bytes} B at ${p.dstOffset}) has wrong bytes after its signal (${covered}) was seen`);
        }
        bytesVerified += p.bytes;
        verified++;
      }
      if (verified === recvPlan.length) {
        for (const p of recvPlan) dst.view.fill((0xa5 ^ recvRound) & 0xff, p.dstOffset, p.dstOffset + p.bytes);
        received += recvPlan.length;
        proxy.signal(prev, { region: sigRegion, offset: 8, value: recvRound });
        lastAck = recvRound;
        recvRound++;
        verified = 0;
        recvPlan = received < prevWrites ? plan(prev, recvRound, prevWrites - received) : [];
      }
    }
    if (proxy.error()) throw proxy.error()!;
    await new Promise((r) => setImmediate(r));
  }
  await proxy.flush({ timeoutMs });
  const seconds = (performance.now() - started) / 1000;
  const stats = proxy.stats();
  await store.barrier("random-writes/end");
  return {
    rank, provider: transport.provider, sent, received, rounds: lastAck, signalsSeen, earlySignals,
    bytesVerified, seconds, stats, error: proxy.error()?.message ?? null,
  };
}

/**
 * Rank 0 streams N puts of varying size to rank 1; put i writes block i (each 32-bit word stamped
 * with i) and raises signal word i % 4 to i + 1. The contract: a signal is visible only after the
 * data of its put and of every earlier put to that peer. Rank 1 spins on the four words without
 * yielding; whenever the largest value m moves, every block < m must be complete, checked word by
 * word. Rank 0 pauses every 4 batches so that rank 1 sees many distinct values.
 */
async function signalOrder() {
  const N = Number(process.env.WRITES ?? 4000);
  const BLOCK = 4096;
  const WORDS = 4;
  using src = HostBuffer.alloc(N * BLOCK);
  using dst = HostBuffer.alloc(N * BLOCK);
  using sig = HostBuffer.alloc(8 * WORDS);
  using transport = await Transport.connect(store, { timeoutMs });
  const dropEvery = Number(process.env.DROP_EVERY ?? 0);
  if (dropEvery > 0) check(native().weft_testing_transport_drop_writes(transport.handle, BigInt(dropEvery)), "drop writes");
  const stamp = (i: number) => Math.imul(i + 1, 2654435761) >>> 0;
  const srcWords = new Uint32Array(src.view.buffer, src.view.byteOffset, src.bytes / 4);
  for (let i = 0; i < N; i++) srcWords.fill(stamp(i), (i * BLOCK) / 4, ((i + 1) * BLOCK) / 4);
  dst.view.fill(0xff);
  const srcRegion = await transport.share(store, src);
  const dstRegion = await transport.share(store, dst);
  const sigRegion = await transport.share(store, sig);
  using proxy = await Proxy.connect(store, transport, { fifoSlots: 64 });
  // Sizes vary so that a later, smaller put could overtake an earlier, larger one on an unordered
  // fabric. Both ranks draw them from the same stream.
  const sizes = (() => {
    const r = rng(seed, 77);
    return Array.from({ length: N }, () => 4 * (1 + Math.floor(r() * (BLOCK / 4))));
  })();
  await store.barrier("signal-order/start");
  let result: Record<string, unknown> = { rank };
  if (rank === 0) {
    let last = 0;
    for (let i = 0, batch = 0; i < N; i += 16, batch++) {
      const cmds: Command[] = [];
      for (let j = i; j < Math.min(N, i + 16); j++) {
        cmds.push({ op: "put", peer: 1, src: srcRegion, srcOffset: j * BLOCK, dst: dstRegion, dstOffset: j * BLOCK, bytes: sizes[j]!,
          signal: { region: sigRegion, offset: 8 * (j % WORDS), value: j + 1 } });
      }
      last = proxy.push(cmds, { timeoutMs });
      if (batch % 4 === 3) await proxy.done(last, { timeoutMs });
    }
    await proxy.done(last, { timeoutMs });
    result = { rank, pushed: N, stats: proxy.stats() };
  } else {
    const words = new BigUint64Array(sig.view.buffer, sig.view.byteOffset, WORDS);
    const dstWords = new Uint32Array(dst.view.buffer, dst.view.byteOffset, dst.bytes / 4);
    let complete = 0; // blocks [0, complete) verified
    let distinct = 0;
    let violations = 0;
    let firstViolation: string | null = null;
    const deadline = performance.now() + timeoutMs;
    while (complete < N && performance.now() < deadline) {
      let m = 0;
      for (let w = 0; w < WORDS; w++) m = Math.max(m, Number(words[w]));
      if (m <= complete) continue;
      distinct++;
      for (let b = complete; b < m; b++) {
        const from = (b * BLOCK) / 4;
        const to = from + sizes[b]! / 4;
        for (let k = from; k < to; k++) {
          if (dstWords[k] !== stamp(b)) {
            violations++;
            firstViolation ??= `signal ${m} seen but block ${b} word ${k - from} of ${sizes[b]! / 4} not there yet`;
            break;
          }
        }
      }
      complete = m;
    }
    result = { rank, complete, distinct, violations, firstViolation };
  }
  await store.barrier("signal-order/end");
  return result;
}

/**
 * Rank 1 SIGKILLs itself once the ranks have exchanged data; rank 0 then keeps putting to it and
 * must get an error from the proxy within the transport timeout, not hang. PHASE=before kills rank 1
 * before any transfer (no connection yet); otherwise after one round trip.
 */
async function killedPeer() {
  const before = process.env.PHASE === "before";
  using buf = HostBuffer.alloc(8 << 20);
  using transport = await Transport.connect(store, { timeoutMs });
  const region = await transport.share(store, buf);
  using proxy = await Proxy.connect(store, transport);
  if (!before) {
    const t = proxy.put({ peer: 1 - rank, src: region, srcOffset: 0, dst: region, dstOffset: 0, bytes: 4096, signal: { region, offset: 8 << 19, value: 1 } });
    await proxy.done(t, { timeoutMs });
  }
  await store.barrier("killed-peer/ready");
  if (rank === 1) {
    process.kill(process.pid, "SIGKILL");
    await sleep(10_000);
  }
  await sleep(200);
  const started = performance.now();
  try {
    let last = 0;
    for (let i = 0; i < 64; i++) {
      last = proxy.put({ peer: 1, src: region, srcOffset: 0, dst: region, dstOffset: 4096, bytes: 1 << 20, signal: { region, offset: 8, value: i + 2 } }, { timeoutMs });
    }
    await proxy.done(last, { timeoutMs: timeoutMs * 3 });
    return { rank, completed: true, ms: performance.now() - started };
  } catch (e) {
    return { rank, ms: performance.now() - started, ...describeError(e), proxyError: proxy.error()?.code ?? null };
  }
}

/**
 * Every rank puts a stamped block to every other rank and signals it, then a proxy BARRIER; after
 * it every block must be in place. Repeated ROUNDS times with growing epochs (no reset), then a
 * mid-transfer teardown: 32 x 4 MiB puts pushed and the proxy disposed at once. Three open/close
 * cycles; the counters and the thread count must come back.
 */
async function allToAll() {
  const BLOCK = 64 << 10;
  const rounds = Number(process.env.ROUNDS ?? 20);
  const threadsBefore = threadsNow();
  const cycles: { threads: number; counters: ReturnType<typeof transportCounters> }[] = [];
  let checked = 0;
  let bad = 0;
  let provider = "";
  let stopMs = 0;
  for (let cycle = 0; cycle < 3; cycle++) {
    {
      using src = HostBuffer.alloc(BLOCK * worldSize + (32 << 20));
      using dst = HostBuffer.alloc(BLOCK * worldSize + (32 << 20));
      using sig = HostBuffer.alloc(8 * worldSize);
      using transport = await Transport.connect(store, { timeoutMs }, `a2a/${cycle}`);
      provider = transport.provider;
      const srcRegion = await transport.share(store, src, `a2a/${cycle}/src`);
      const dstRegion = await transport.share(store, dst, `a2a/${cycle}/dst`);
      const sigRegion = await transport.share(store, sig, `a2a/${cycle}/sig`);
      const sigWords = new BigUint64Array(sig.view.buffer, sig.view.byteOffset, worldSize);
      const dstWords = new Uint32Array(dst.view.buffer, dst.view.byteOffset, (BLOCK * worldSize) / 4);
      const proxy = await Proxy.connect(store, transport, { fifoSlots: 32 }, `a2a/${cycle}/proxy`);
      for (let round = 1; round <= rounds; round++) {
        const stamp = (r: number) => (Math.imul(round * 7919 + cycle, 40503) ^ Math.imul(r + 1, 2654435761)) >>> 0;
        new Uint32Array(src.view.buffer, src.view.byteOffset + rank * BLOCK, BLOCK / 4).fill(stamp(rank));
        const cmds: Command[] = [];
        for (let p = 0; p < worldSize; p++) {
          if (p === rank) continue;
          cmds.push({ op: "put", peer: p, src: srcRegion, srcOffset: rank * BLOCK, dst: dstRegion, dstOffset: rank * BLOCK, bytes: BLOCK,
            signal: { region: sigRegion, offset: 8 * rank, value: round } });
        }
        cmds.push({ op: "barrier" });
        const last = proxy.push(cmds, { timeoutMs });
        await proxy.done(last, { timeoutMs });
        // After the barrier every peer's block of this round is here, and its signal is raised.
        for (let p = 0; p < worldSize; p++) {
          if (p === rank) continue;
          checked++;
          if (sigWords[p]! < BigInt(round)) bad++;
          const w = dstWords.subarray((p * BLOCK) / 4, ((p + 1) * BLOCK) / 4);
          if (w[0] !== stamp(p) || w[w.length - 1] !== stamp(p)) bad++;
        }
        // The next round overwrites the source and the peers' destinations: all ranks must be done reading.
        const b = proxy.barrier({ timeoutMs });
        await proxy.done(b, { timeoutMs });
      }
      // Mid-transfer teardown: big puts in flight, then stop at once. Bounded, nothing leaks.
      const peer = (rank + 1) % worldSize;
      for (let i = 0; i < 32; i++) {
        proxy.put({ peer, src: srcRegion, srcOffset: BLOCK * worldSize, dst: dstRegion, dstOffset: BLOCK * worldSize, bytes: 4 << 20 });
      }
      const t0 = performance.now();
      proxy.dispose();
      stopMs = Math.max(stopMs, performance.now() - t0);
      // Collective teardown: nobody closes its endpoint while a peer may still write into it.
      await store.barrier(`a2a/${cycle}/close`);
    }
    cycles.push({ threads: threadsNow(), counters: transportCounters() });
  }
  return { rank, provider, checked, bad, stopMs, threadsBefore, cycles };
}

/**
 * One rank, writing to itself. A 4-slot FIFO: thousands of single and batched pushes wrap it
 * around; a paused proxy makes a push time out (backpressure), then drains on resume; four threads
 * push concurrently; invalid commands are refused with the field named.
 */
async function fifo() {
  const BLOCK = 256;
  const N = 4000;
  using src = HostBuffer.alloc(N * BLOCK);
  using dst = HostBuffer.alloc(N * BLOCK);
  using sig = HostBuffer.alloc(64);
  using transport = await Transport.connect(store, { timeoutMs });
  const srcRegion = await transport.share(store, src);
  const dstRegion = await transport.share(store, dst);
  const sigRegion = await transport.share(store, sig);
  using proxy = await Proxy.connect(store, transport, { fifoSlots: 4, batch: 3 });
  const sigWords = new BigUint64Array(sig.view.buffer, sig.view.byteOffset, 8);
  fillSource(src.view, 0);
  const r = rng(seed, 5);

  // Wrap-around: N puts, alone or in batches of up to 4 (the whole FIFO), each to its own block.
  let last = 0;
  for (let i = 0; i < N;) {
    const n = Math.min(N - i, 1 + Math.floor(r() * 4));
    const cmds: Command[] = [];
    for (let j = i; j < i + n; j++) {
      cmds.push({ op: "put", peer: 0, src: srcRegion, srcOffset: j * BLOCK, dst: dstRegion, dstOffset: j * BLOCK, bytes: 1 + Math.floor(r() * BLOCK),
        signal: { region: sigRegion, offset: 0, value: j + 1 } });
    }
    last = proxy.push(cmds, { timeoutMs });
    i += n;
  }
  await proxy.done(last, { timeoutMs });
  let wrapBad = 0;
  for (let j = 0; j < N; j++) {
    const at = j * BLOCK;
    if (dst.view[at] !== src.view[at]) wrapBad++;
  }
  const afterWrap = proxy.stats();

  // Backpressure: paused, 4 pushes fill the FIFO; the 5th waits its timeout out and fails.
  proxy.paused = true;
  const before = proxy.completed;
  let t = 0;
  for (let k = 0; k < 4; k++) t = proxy.signal(0, { region: sigRegion, offset: 8, value: k + 1 });
  let fullError: ReturnType<typeof describeError> | null = null;
  const t0 = performance.now();
  try {
    proxy.signal(0, { region: sigRegion, offset: 8, value: 99 }, { timeoutMs: 300 });
  } catch (e) {
    fullError = describeError(e);
  }
  const fullMs = performance.now() - t0;
  let nonBlocking: ReturnType<typeof describeError> | null = null;
  try {
    proxy.signal(0, { region: sigRegion, offset: 8, value: 99 }, { timeoutMs: 0 });
  } catch (e) {
    nonBlocking = describeError(e);
  }
  await sleep(100);
  const completedWhilePaused = proxy.completed - before;
  proxy.paused = false;
  await proxy.done(t, { timeoutMs });
  const resumed = proxy.completed - before;

  // Four threads push concurrently: every ticket must be taken exactly once.
  const PER = 3000;
  const workers = Array.from({ length: 4 }, () => new Worker(new URL("./push-worker.ts", import.meta.url).href, { type: "module" }));
  const results = await Promise.all(workers.map((w, index) => new Promise<{ pushed: number }>((resolve, reject) => {
    w.onmessage = (e) => resolve(e.data);
    w.onerror = (e) => reject(new Error(e.message));
    w.postMessage({ proxy: proxy.handle, index: index + 2, count: PER, region: sigRegion.index, timeoutMs });
  })));
  for (const w of workers) w.terminate();
  await proxy.flush({ timeoutMs });
  const stats = proxy.stats();
  const finalWords = [2, 3, 4, 5].map((i) => Number(sigWords[i]));

  // Invalid commands never reach the FIFO.
  const invalid: Record<string, string> = {};
  const tryPush = (name: string, c: Command) => {
    try {
      proxy.push([c]);
      invalid[name] = "accepted";
    } catch (e) {
      invalid[name] = `${(e as { code?: string }).code}: ${(e as Error).message}`;
    }
  };
  tryPush("peer", { op: "put", peer: 1, src: srcRegion, srcOffset: 0, dst: dstRegion, dstOffset: 0, bytes: 8 });
  tryPush("bounds", { op: "put", peer: 0, src: srcRegion, srcOffset: src.bytes - 4, dst: dstRegion, dstOffset: 0, bytes: 8 });
  tryPush("region0", { op: "signal", peer: 0, region: 0, offset: 0, value: 1 });
  tryPush("align", { op: "signal", peer: 0, region: sigRegion, offset: 4, value: 1 });
  tryPush("tooMany", { op: "fence" });
  let tooMany = "accepted";
  try {
    proxy.push(Array.from({ length: 5 }, () => ({ op: "fence" as const })));
  } catch (e) {
    tooMany = `${(e as { code?: string }).code}: ${(e as Error).message}`;
  }
  invalid.tooMany = tooMany;

  return {
    rank, provider: transport.provider, wrapBad, afterWrap, fullError, fullMs, nonBlocking, completedWhilePaused, resumed,
    threads: results.map((x) => x.pushed), finalWords, stats, invalid, error: proxy.error()?.message ?? null,
  };
}
