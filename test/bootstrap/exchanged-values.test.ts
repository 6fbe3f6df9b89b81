// Values ranks exchange through the store are checked before native code reads them: peer handles
// (weft_comm_import), transport addresses and region descriptors (the libfabric transport). CPU only.
import { describe, expect, test } from "../support/test-api.ts";

import { PeerHandle } from "../../lib/abi.ts";
import { checkPeerHandle, checkRegionDescriptors, checkTransportAddresses } from "../../lib/bootstrap.ts";
import { PeerError } from "../../lib/errors.ts";
import { HostBuffer, Transport } from "../../lib/transport.ts";
import { caught } from "../support/caught.ts";

const op = "Communicator.create";

function handle(fields: Partial<Parameters<typeof PeerHandle.write>[1]> = {}): Uint8Array {
  return PeerHandle.write(PeerHandle.alloc(), {
    process_token: 0x1234_5678_9abcn, device: 1, rank: 1, arena_base: 0x7f00_0000_0000n, arena_bytes: 1n << 30n,
    ipc: Array.from({ length: 64 }, (_, i) => (i * 13 + 1) & 0xff), ...fields,
  });
}

const mine = handle({ process_token: 0x9999n, rank: 0, device: 0 });

function refused(f: () => unknown, text: string): void {
  const err = caught(f);
  expect(err).toBeInstanceOf(PeerError);
  expect((err as Error).message).toContain(text);
}

describe("checkPeerHandle", () => {
  test("a handle as weft_comm_export writes it passes, as a copy", () => {
    const h = handle();
    const out = checkPeerHandle(op, h, 1, mine);
    expect(Array.from(out)).toEqual(Array.from(h));
    expect(out).not.toBe(h);
  });

  test("a short, long, forged or empty handle is a PeerError naming the rank it came from", () => {
    refused(() => checkPeerHandle(op, undefined, 1, mine), "rank 1's peer handle");
    refused(() => checkPeerHandle(op, handle().subarray(0, 50), 1, mine), `has 50 bytes, not ${PeerHandle.size}`);
    refused(() => checkPeerHandle(op, new Uint8Array(PeerHandle.size + 8), 1, mine), `not ${PeerHandle.size}`);
    refused(() => checkPeerHandle(op, handle({ rank: 2 }), 1, mine), "claims rank 2");
    refused(() => checkPeerHandle(op, handle({ version: 7 }), 1, mine), "version 7");
    refused(() => checkPeerHandle(op, handle({ size: 8 }), 1, mine), "size 8");
    refused(() => checkPeerHandle(op, handle({ arena_bytes: 1n << 40n }), 1, mine), "same heapBytes");
    refused(() => checkPeerHandle(op, handle({ device: -1 }), 1, mine), "device -1");
    refused(() => checkPeerHandle(op, handle({ process_token: 0n }), 1, mine), "no process token");
    refused(() => checkPeerHandle(op, handle({ ipc: new Array(64).fill(0) }), 1, mine), "empty CUDA IPC handle");
    // Same process token as this rank: the arena address is used directly, so it must be there.
    refused(() => checkPeerHandle(op, handle({ process_token: 0x9999n, arena_base: 0n }), 1, mine), "no arena address");
  });
});

const enc = new TextEncoder();

function address(rank: number, opts: { provider?: string; addrlen?: number; extra?: number; magic?: string } = {}): Uint8Array {
  const raw = opts.addrlen ?? 16;
  const b = new Uint8Array(88 + raw + (opts.extra ?? 0));
  b.set(enc.encode(opts.magic ?? "weftadr1"));
  b.set(enc.encode(opts.provider ?? "tcp;ofi_rxm\0"), 8);
  const dv = new DataView(b.buffer);
  dv.setInt32(56, rank, true);
  dv.setUint32(60, raw, true);
  dv.setBigUint64(64, 0x1000n, true);
  return b;
}

function descriptor(rank: number, region = 1, fields: { addr?: bigint; bytes?: bigint; magic?: string } = {}): Uint8Array {
  const b = new Uint8Array(40);
  b.set(enc.encode(fields.magic ?? "weftreg1"));
  const dv = new DataView(b.buffer);
  dv.setInt32(8, rank, true);
  dv.setInt32(12, region, true);
  dv.setBigUint64(16, fields.addr ?? 0x7f00_0000_0000n, true);
  dv.setBigUint64(24, fields.bytes ?? 4096n, true);
  dv.setBigUint64(32, 77n, true);
  return b;
}

describe("checkTransportAddresses and checkRegionDescriptors", () => {
  test("well-formed blobs pass", () => {
    checkTransportAddresses("Transport.connectPeers", [address(0), address(1), address(2)]);
    checkRegionDescriptors("Region.connectPeers", [descriptor(0, 3), descriptor(1, 3)]);
  });

  test("a forged or truncated address is a PeerError naming the rank", () => {
    const o = "Transport.connectPeers";
    refused(() => checkTransportAddresses(o, [address(0), address(0)]), "rank 1's transport address");
    refused(() => checkTransportAddresses(o, [address(0), address(1).subarray(0, 40)]), "has 40 bytes");
    refused(() => checkTransportAddresses(o, [address(0), address(1, { magic: "evil!!!!" })]), "magic");
    refused(() => checkTransportAddresses(o, [address(0), address(1, { extra: 5 })]), "says 16 address bytes but carries 21");
    refused(() => checkTransportAddresses(o, [address(0), address(1, { provider: "x".repeat(48) })]), "unterminated provider");
    refused(() => checkTransportAddresses(o, [address(0), address(1, { addrlen: 5000 })]), "expected 88 to");
    refused(() => checkTransportAddresses(o, [address(0), "not bytes"]), "is missing");
  });

  test("a forged descriptor is a PeerError naming the rank", () => {
    const o = "Region.connectPeers";
    refused(() => checkRegionDescriptors(o, [descriptor(0), descriptor(0)]), "claims rank 0");
    refused(() => checkRegionDescriptors(o, [descriptor(0, 2), descriptor(1, 3)]), "names region 3 where rank 0's names 2");
    refused(() => checkRegionDescriptors(o, [descriptor(0, 0)]), "names region 0");
    refused(() => checkRegionDescriptors(o, [descriptor(0), descriptor(1, 1, { bytes: 0n })]), "region of 0 bytes");
    refused(() => checkRegionDescriptors(o, [descriptor(0, 1, { magic: "weftadr1" })]), "region magic");
    refused(() => checkRegionDescriptors(o, [descriptor(0).subarray(0, 39)]), "has 39 bytes");
  });
});

/** Why the native transport cannot run here, or undefined when it can. */
function transportMissing(): string | undefined {
  try {
    Transport.open({ rank: 0, worldSize: 1, provider: "tcp;ofi_rxm" }).dispose();
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

describe("the real blobs", () => {
  const missing = transportMissing();
  test.skipIf(missing !== undefined)(`libweft.so's own address and region descriptor pass the checks${missing ? ` (skipped: ${missing.slice(0, 120)})` : ""}`, () => {
    const t = Transport.open({ rank: 0, worldSize: 1, provider: "tcp;ofi_rxm" });
    const buf = HostBuffer.alloc(4096);
    try {
      const a = t.address();
      checkTransportAddresses("Transport.connectPeers", [a]);
      t.connectPeers([a]);
      const r = t.register(buf);
      const d = r.descriptor();
      checkRegionDescriptors("Region.connectPeers", [d]);
      r.connectPeers([d]);
    } finally {
      t.dispose();
      buf.dispose();
    }
  });
});
