// The transport layer inside one process: how libweft.so reaches libfabric, argument checks, host
// buffers, provider selection errors. Multi-process behaviour is in proxy.test.ts.
import { describe, expect, test } from "bun:test";

import { ArgumentError, DisposedError, TransportError, UnsupportedError } from "../../lib/errors.ts";
import { fabricProviders } from "../../lib/info.ts";
import { nativePath, native } from "../../lib/native.ts";
import { HostBuffer, Proxy, Transport, transportCounters } from "../../lib/transport.ts";

function tool(cmd: string[]): string | null {
  try {
    const r = Bun.spawnSync(cmd);
    return r.exitCode === 0 ? r.stdout.toString() : null;
  } catch {
    return null;
  }
}

describe("libweft.so and libfabric", () => {
  native(); // load
  const lib = nativePath()!;
  const dynamic = tool(["objdump", "-p", lib]);
  const undefinedSyms = tool(["nm", "-D", "--undefined-only", lib]);

  test.skipIf(dynamic === null)("libfabric is not a load-time dependency (dlopen'ed, so its absence cannot stop loading)", () => {
    const needed = dynamic!.split("\n").filter((l) => l.trim().startsWith("NEEDED")).map((l) => l.trim().split(/\s+/)[1]);
    expect(needed.length).toBeGreaterThan(0);
    expect(needed.filter((n) => /fabric|ibverbs|numa/.test(n!))).toEqual([]);
  });

  test.skipIf(undefinedSyms === null)("no libfabric symbol is left for the dynamic linker to resolve", () => {
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

  test("an unknown forced provider is UNSUPPORTED and the message lists what this machine has", () => {
    let err: unknown;
    try {
      Transport.open({ rank: 0, worldSize: 1, provider: "no-such-provider" });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UnsupportedError);
    const msg = (err as Error).message;
    expect(msg).toContain("no-such-provider");
    expect(msg).toMatch(/Providers on this machine: .+/);
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
});

describe("address exchange checks", () => {
  const tcp = (() => {
    try {
      return fabricProviders().providers.some((p) => p.name === "tcp;ofi_rxm");
    } catch {
      return false;
    }
  })();

  test.skipIf(!tcp)("addresses of the wrong count or length are refused; a proxy needs a connected transport", () => {
    const transport = Transport.open({ rank: 0, worldSize: 2, provider: "tcp;ofi_rxm" });
    try {
      const a = transport.address();
      expect(a.length).toBeGreaterThan(64);
      expect(() => transport.connectPeers([a])).toThrow(ArgumentError);
      expect(() => transport.connectPeers([a, a.subarray(1)])).toThrow(TransportError);
      // Rank 1's slot holding rank 0's address: the native side checks whose address it is.
      expect(() => transport.connectPeers([a, a])).toThrow(/belongs to rank 0/);
      expect(() => Proxy.start(transport)).toThrow(/connected/);
      expect(transport.info.provider).toBe("tcp;ofi_rxm");
      expect(transport.info.deliveryComplete).toBe(true);
    } finally {
      transport.dispose();
    }
    expect(transportCounters()).toMatchObject({ transports: 0, regions: 0, proxyThreads: 0 });
  });
});
