// GPU threads pushing into the proxy's device lane (cuda/primitives/fifo.cuh), one process, the
// transport writing to itself. Needs a GPU and libfabric's provider; skips without them, saying
// why (REQUIRE_GPU=1 and REQUIRE_FABRIC=1 make those failures).
import { expect, test } from "../support/test-api.ts";

import { Tensor } from "../../lib/tensor.ts";
import { HostBuffer, Proxy, Transport, transportCounters } from "../../lib/transport.ts";
import { describeFabric } from "../support/fabric.ts";
import { describeGpu } from "../support/gpu.ts";

// tcp;ofi_rxm unless WEFT_FABRIC_PROVIDER names another (shm, ...).
const provider = process.env.WEFT_FABRIC_PROVIDER ?? "tcp;ofi_rxm";

async function until(cond: () => boolean, timeoutMs: number, what: () => string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > deadline) throw new Error(`timed out: ${what()}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

/** A transport that talks to itself, with `words` u64 host words registered as the signals' target
 * and a zeroed i32 [4] record on GPU 0 of how pushing threads failed; disposing it disposes all
 * three, the transport first. */
function openLoopback(words: number) {
  using owned = new DisposableStack(); // disposes what was made so far if a later step throws
  const sig = owned.use(HostBuffer.alloc(8 * words));
  const failures = owned.use(Tensor.empty([4], "i32", { device: 0 }));
  failures.fill(0);
  const transport = owned.use(Transport.open({ rank: 0, worldSize: 1, device: 0, provider, timeoutMs: 20_000 }));
  transport.connectPeers([transport.address()]);
  const region = transport.register(sig);
  region.connectPeers([region.descriptor()]);
  const all = owned.move();
  return { sig, failures, transport, region, [Symbol.dispose]: () => all.dispose() };
}

describeGpu("proxy device lane", 1, () => describeFabric(`over ${provider}`, provider, () => {
  for (const [slots, ctas, threads, perThread] of [[1024, 4, 128, 50], [8, 8, 64, 40]] as const) {
    test(`${ctas}x${threads} GPU threads push ${perThread} signals each through a ${slots}-slot FIFO`, async () => {
      const words = ctas * threads;
      using loopback = openLoopback(words);
      const { sig, failures, transport, region } = loopback;
      using proxy = Proxy.start(transport, { fifoSlots: slots, device: 0 });
      console.log(`transport provider: ${transport.provider} (FI_HMEM ${transport.info.hmem})`);
      expect(proxy.deviceLane).toBeDefined();
      const t0 = performance.now();
      proxy.devicePush({ op: "signal", peer: 0, region, offset: 0, value: 0 },
        { ctas, threads, perThread, failures: failures.ptr, timeoutMs: 10_000 });
      const total = words * perThread;
      await until(() => proxy.deviceCompleted! >= total || proxy.error() !== null, 30_000,
        () => `${proxy.deviceCompleted} of ${total} device commands completed`);
      const ms = performance.now() - t0;
      expect(proxy.error()).toBeNull();
      expect(proxy.deviceCompleted).toBe(total);
      console.log(`  ${total} GPU-pushed signals in ${ms.toFixed(1)} ms: ${(total / ms * 1000).toFixed(0)} commands/s`);
      const f = new BigUint64Array((failures.download() as Int32Array).buffer);
      expect(f[0]).toBe(0n);
      const got = new BigUint64Array(sig.view.buffer, sig.view.byteOffset, words);
      // Every thread's word ends at its last value: all of its pushes arrived, none twice.
      expect(got.every((v) => v === BigInt(perThread))).toBe(true);
      await proxy.flush();
    }, 60_000);
  }

  test("an aborted proxy releases GPU threads waiting on a full FIFO", async () => {
    using loopback = openLoopback(64);
    const { failures, transport, region } = loopback;
    const proxy = Proxy.start(transport, { fifoSlots: 4, device: 0 });
    proxy.paused = true;
    // 64 threads into 4 slots with the proxy paused: all but 4 wait; aborting the proxy marks the
    // FIFO failed and the waiters give up with its status long before their 20 s timeout.
    proxy.devicePush({ op: "signal", peer: 0, region, offset: 0, value: 0 },
      { ctas: 1, threads: 64, perThread: 1, failures: failures.ptr, timeoutMs: 20_000 });
    await new Promise((r) => setTimeout(r, 200));
    const t0 = performance.now();
    proxy.abort();
    const f = new BigUint64Array((failures.download() as Int32Array).buffer); // waits for the kernel
    expect(performance.now() - t0).toBeLessThan(5_000);
    proxy.dispose();
    expect(f[0]).toBe(60n);
    expect(Number(BigInt.asIntN(64, f[1]!))).toBe(-8); // WEFT_E_TRANSPORT
  }, 60_000);

  test("teardown leaves nothing behind", () => {
    expect(transportCounters()).toMatchObject({ transports: 0, regions: 0, proxyThreads: 0 });
  });
}));
