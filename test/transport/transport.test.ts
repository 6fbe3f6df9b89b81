// The transport layer inside one process: how libweft.so reaches libfabric, argument checks, host
// buffers, provider selection errors. Multi-process behaviour is in proxy.test.ts. Runs with and
// without libfabric (a build without its headers, or a machine without libfabric.so.1): the tests
// that need it skip and say why, and REQUIRE_FABRIC=1 turns those skips into failures.
import { describe, expect, test } from "../support/test-api.ts";
import { join } from "node:path";

import { ArgumentError, DisposedError, PeerError, TransportError, UnsupportedError } from "../../lib/errors.ts";
import { nativePath, native } from "../../lib/native.ts";
import { HostBuffer, Proxy, Transport, transportCounters } from "../../lib/transport.ts";
import { caught } from "../support/caught.ts";
import { fabric, requireFabric, testFabric } from "../support/fabric.ts";
import { evalArgv, runSync } from "../support/processes.ts";

function tool(cmd: string[]): string | null {
  try {
    const r = runSync(cmd);
    return r.exitCode === 0 ? r.stdout : null;
  } catch {
    return null;
  }
}

describe("libweft.so and libfabric", () => {
  native(); // load
  const lib = nativePath()!;
  const dynamic = tool(["objdump", "-p", lib]);
  const undefinedSyms = tool(["nm", "-D", "--undefined-only", lib]);

  const noTool = (t: string) => `(skipped: \`${t}\` is not installed here, binutils has it)`;
  test.skipIf(dynamic === null)(`libfabric is not a load-time dependency (dlopen'ed, so its absence cannot stop loading)${dynamic === null ? " " + noTool("objdump") : ""}`, () => {
    const needed = dynamic!.split("\n").filter((l) => l.trim().startsWith("NEEDED")).map((l) => l.trim().split(/\s+/)[1]);
    expect(needed.length).toBeGreaterThan(0);
    expect(needed.filter((n) => /fabric|ibverbs|numa/.test(n!))).toEqual([]);
  });

  test.skipIf(undefinedSyms === null)(`no libfabric symbol is left for the dynamic linker to resolve${undefinedSyms === null ? " " + noTool("nm") : ""}`, () => {
    const fi = undefinedSyms!.split("\n").filter((l) => /\bfi_\w+/.test(l));
    expect(fi).toEqual([]);
  });
});

describe("Transport arguments", () => {
  test("rank and world size are checked before crossing the ABI", () => {
    expect(() => Transport.open({ rank: 2, worldSize: 2 })).toThrow(ArgumentError);
    expect(() => Transport.open({ rank: 0, worldSize: 0 })).toThrow(/worldSize/);
    expect(() => Transport.open({ rank: 0, worldSize: 1, timeoutMs: 0 })).toThrow(/timeoutMs/);
    expect(() => Transport.open({ rank: 0, worldSize: 1, provider: "" })).toThrow(/provider/);
  });

  test("the test-only write dropper refuses anything but an open transport", () => {
    // Status -1 (WEFT_E_INVALID): a NULL handle never reaches a transport.
    expect(native().weft_testing_transport_drop_writes(0, 1)).toBe(-1);
  });

  // With libfabric, the message lists what this machine has; without it (no headers at build
  // time, or no libfabric.so.1), it says that, and REQUIRE_FABRIC=1 makes that a failure.
  test("an unknown forced provider is UNSUPPORTED and the message says what this machine has", () => {
    const err = caught(() => Transport.open({ rank: 0, worldSize: 1, provider: "no-such-provider" }));
    expect(err).toBeInstanceOf(UnsupportedError);
    const msg = (err as Error).message;
    const f = fabric();
    if (f.libfabric !== null) {
      expect(msg).toContain("no-such-provider");
      expect(msg).toMatch(/Providers on this machine: .+/);
    } else {
      if (requireFabric) throw new Error(`REQUIRE_FABRIC=1 but this build has no libfabric: ${f.reason}`);
      expect(msg).toMatch(/built without libfabric headers|libfabric\.so\.1 could not be loaded/);
      console.log(`  no libfabric here (${f.reason}): Transport.open says "${msg}"`);
    }
    expect(transportCounters().transports).toBe(0);
  });
});

describe("HostBuffer", () => {
  test("zero-filled, viewed zero-copy, freed once", () => {
    const before = transportCounters().hostBuffers;
    const b = HostBuffer.alloc(1 << 20);
    expect(transportCounters().hostBuffers).toBe(before + 1);
    expect(b.view.length).toBe(1 << 20);
    expect(b.view.every((x) => x === 0)).toBe(true);
    b.view[12345] = 77;
    expect(new Uint8Array(b.view.buffer)[12345]).toBe(77);
    b.dispose();
    b.dispose();
    expect(transportCounters().hostBuffers).toBe(before);
    expect(() => b.view).toThrow(DisposedError);
  });

  test("bad sizes are refused", () => {
    expect(() => HostBuffer.alloc(0)).toThrow(ArgumentError);
    expect(() => HostBuffer.alloc(1.5)).toThrow(ArgumentError);
  });

  // Views kept past dispose() must not reach the freed memory: before the fix, a write through one
  // crashed the process (rc 139) and a read returned freed, then reused, bytes. In a child process,
  // so that the crash it guards against cannot take the test runner with it.
  test("every view kept past dispose() is detached: no crash, no freed memory (in a child process)", () => {
    const script = `
      import { HostBuffer, transportCounters } from "./lib/transport.ts";
      const before = transportCounters().hostBuffers;
      const results = [];
      for (const bytes of [4096, 1 << 20, 64 << 20]) {
        const b = HostBuffer.alloc(bytes);
        const view = b.view, words = new BigUint64Array(view.buffer), sub = view.subarray(100, 200);
        view.fill(7);
        b.dispose();
        using reuse = HostBuffer.alloc(bytes);   // likely the same memory again
        reuse.view.fill(0x33);
        view[10] = 1; words[3] = 5n; sub[0] = 9;  // writes after dispose
        let fillThrows = false;
        try { view.fill(1); } catch (e) { fillThrows = e instanceof TypeError; }
        results.push({ bytes, length: view.length, words: words.length, sub: sub.length, read: view[10] ?? null,
          fillThrows, reuseIntact: reuse.view.every((x) => x === 0x33) });
      }
      for (let i = 0; i < 2000; i++) { const b = HostBuffer.alloc(4096); b.view[0] = 1; b.dispose(); }
      console.log(JSON.stringify({ results, leaked: transportCounters().hostBuffers - before }));`;
    const r = runSync(evalArgv(script), { cwd: join(import.meta.dirname, "..", ".."), env: process.env });
    expect(r.exitCode).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").at(-1)!);
    for (const x of out.results) {
      expect(x).toEqual({ bytes: x.bytes, length: 0, words: 0, sub: 0, read: null, fillThrows: true, reuseIntact: true });
    }
    expect(out.leaked).toBe(0);
  });
});

describe("address exchange checks", () => {
  testFabric("addresses of the wrong count or length are refused; a proxy needs a connected transport", "tcp;ofi_rxm", () => {
    const transport = Transport.open({ rank: 0, worldSize: 2, provider: "tcp;ofi_rxm" });
    try {
      const a = transport.address();
      expect(a.length).toBeGreaterThan(64);
      expect(() => transport.connectPeers([a])).toThrow(ArgumentError);
      // A peer's address is checked before native code reads it (lib/bootstrap/exchanged-values.ts).
      expect(() => transport.connectPeers([a, a.subarray(1)])).toThrow(PeerError);
      // Rank 1's slot holding rank 0's address: refused before native code reads it.
      expect(() => transport.connectPeers([a, a])).toThrow(/rank 1's transport address, read from the store, claims rank 0/);
      expect(() => Proxy.start(transport)).toThrow(/connected/);
      expect(transport.info.provider).toBe("tcp;ofi_rxm");
      expect(transport.info.deliveryComplete).toBe(true);
    } finally {
      transport.dispose();
    }
    expect(transportCounters()).toMatchObject({ transports: 0, regions: 0, proxyThreads: 0 });
  });
});
