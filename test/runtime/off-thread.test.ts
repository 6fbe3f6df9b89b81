// The runtime seam's "call off the main thread" primitive (lib/native.ts offThread): under Deno a
// native call that blocks runs on a worker thread while the event loop keeps running; Bun has no
// such call, and says so by offering none (Stream.synchronizeAsync then polls). CPU only: a proxy
// with nothing draining its FIFO gives a native wait that blocks for as long as it is told to.
import { expect, test } from "../support/test-api.ts";

import { LocalStore } from "../../lib/bootstrap.ts";
import { TimeoutError } from "../../lib/errors.ts";
import { check, offThread } from "../../lib/native.ts";
import { runtime } from "../../lib/runtime/index.ts";
import { HostBuffer, Proxy, Transport } from "../../lib/transport.ts";
import { testFabric } from "../support/fabric.ts";

if (runtime.name === "bun") {
  test("Bun offers no off-thread call: offThread() is undefined", () => {
    expect(offThread()).toBeUndefined();
  });
} else {
  testFabric("a blocking native wait off the main thread leaves the event loop free", "tcp;ofi_rxm", async () => {
    const [store] = LocalStore.group(1, { timeoutMs: 20_000 });
    using sig = HostBuffer.alloc(4096);
    using transport = await Transport.connect(store!, { provider: "tcp;ofi_rxm", timeoutMs: 20_000 });
    const region = await transport.share(store!, sig);
    using proxy = await Proxy.connect(store!, transport);
    proxy.paused = true;
    const ticket = proxy.signal(0, { region, offset: 8, value: 7 });
    let ticks = 0;
    const timer = setInterval(() => ticks++, 5);
    const t0 = performance.now();
    const status = await offThread()!.weft_proxy_wait(proxy.handle, ticket, 400);
    const waited = performance.now() - t0;
    clearInterval(timer);
    // It blocked its full 400 ms in native code, and timers ran all along.
    expect(() => check(status, "weft_proxy_wait")).toThrow(TimeoutError);
    expect(waited).toBeGreaterThanOrEqual(390);
    expect(ticks).toBeGreaterThanOrEqual(20);
    // Unpaused, the same ticket completes and the same call returns at once.
    proxy.paused = false;
    await proxy.done(ticket, { timeoutMs: 10_000 });
    expect(await offThread()!.weft_proxy_wait(proxy.handle, ticket, 400)).toBe(0);
    expect(new BigUint64Array(sig.view.buffer, 8, 1)[0]).toBe(7n);
  }, 60_000);
}
