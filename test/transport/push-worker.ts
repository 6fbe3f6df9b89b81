// A Worker thread that pushes into a proxy's host FIFO concurrently with other threads
// (test/transport/rank-worker.ts, scenario "fifo"). It gets the native proxy handle and pushes
// COUNT signals to its own word, in batches of 1 to 3, values 1..COUNT.
import { ProxyCommand } from "../../lib/abi.ts";
import { check, native } from "../../lib/native.ts";

declare const self: Worker;

self.onmessage = (e: MessageEvent<{ proxy: number; index: number; count: number; region: number; timeoutMs: number }>) => {
  const { proxy, index, count, region, timeoutMs } = e.data;
  const buf = new Uint8Array(ProxyCommand.size * 3);
  const first = new BigUint64Array(1);
  let pushed = 0;
  let value = 0;
  while (value < count) {
    const n = Math.min(1 + (value % 3), count - value);
    for (let i = 0; i < n; i++) {
      ProxyCommand.write(buf.subarray(i * ProxyCommand.size, (i + 1) * ProxyCommand.size), {
        size: ProxyCommand.size, version: 1, opcode: 2, flags: 0, peer: 0, src_region: 0, dst_region: 0,
        signal_region: region, signal_offset: 8 * index, signal_value: ++value, cookie: index,
        src_offset: 0, dst_offset: 0, bytes: 0,
      });
    }
    check(native().weft_proxy_push(proxy, buf, n, timeoutMs, first), "push-worker");
    pushed += n;
  }
  postMessage({ index, pushed });
};
