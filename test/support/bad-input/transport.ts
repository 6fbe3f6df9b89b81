// transport.ts — bad input to the inter-node transport and its proxy: Transport.open, proxy
// options and every field of a proxy command. All of it is checked in TS before the ABI, so no
// libfabric and no GPU is needed.
import { ArgumentError } from "../../../lib/errors.ts";
import { Proxy, Transport, type Command } from "../../../lib/transport.ts";
import type { BadInputCase } from "./case.ts";

const A = ArgumentError;
const any = (v: unknown) => v as never;
const open = (over: object) => Transport.open({ rank: 0, worldSize: 2, ...over } as never);
/** Proxy options are validated before the transport is touched. */
const start = (opts: unknown) => Proxy.start(any({}), any(opts));
const put = { op: "put", peer: 1, src: 1, srcOffset: 0, dst: 2, dstOffset: 0, bytes: 64 } as const;
const pack = (c: unknown) => Proxy.pack([c as Command]);

export const cases: BadInputCase[] = [
  { name: "Transport.open with null options", run: () => Transport.open(any(null)), error: A, names: "opts" },
  { name: "Transport.open with worldSize 0", run: () => open({ worldSize: 0 }), error: A, names: "worldSize" },
  { name: "Transport.open with rank 2 of 2", run: () => open({ rank: 2 }), error: A, names: "rank" },
  { name: "Transport.open with rank -1", run: () => open({ rank: -1 }), error: A, names: "rank" },
  { name: "Transport.open with rank 0.5", run: () => open({ rank: 0.5 }), error: A, names: "rank" },
  { name: "Transport.open on device -1", run: () => open({ device: -1 }), error: A, names: "device" },
  { name: "Transport.open with timeoutMs 0", run: () => open({ timeoutMs: 0 }), error: A, names: "timeoutMs" },
  { name: "Transport.open with timeoutMs 2^32", run: () => open({ timeoutMs: 2 ** 32 }), error: A, names: "timeoutMs" },
  { name: "Transport.open with an empty provider", run: () => open({ provider: "" }), error: A, names: "provider" },
  { name: "Transport.open with a numeric provider", run: () => open({ provider: 5 }), error: A, names: "provider" },
  { name: "Proxy.start with 3 FIFO slots (not a power of two)", run: () => start({ fifoSlots: 3 }), error: A, names: "fifoSlots" },
  { name: "Proxy.start with 1 FIFO slot", run: () => start({ fifoSlots: 1 }), error: A, names: "fifoSlots" },
  { name: "Proxy.start with 2^21 FIFO slots", run: () => start({ fifoSlots: 2 ** 21 }), error: A, names: "fifoSlots" },
  { name: "Proxy.start with batch 0", run: () => start({ batch: 0 }), error: A, names: "batch" },
  { name: "Proxy.start with batch 5000", run: () => start({ batch: 5000 }), error: A, names: "batch" },
  { name: "Proxy.start with maxInflight 0", run: () => start({ maxInflight: 0 }), error: A, names: "maxInflight" },
  { name: "Proxy.start with timeoutMs 0", run: () => start({ timeoutMs: 0 }), error: A, names: "timeoutMs" },
  { name: "Proxy.start on device -1", run: () => start({ device: -1 }), error: A, names: "device" },
  { name: "Proxy.start with null options", run: () => start(null), error: A, names: "opts" },
  { name: "proxy command of an unknown op", run: () => pack({ op: "jump" }), error: A, names: "commands[0].op" },
  { name: "proxy command null", run: () => pack(null), error: A, names: "commands[0]" },
  { name: "put to peer -1", run: () => pack({ ...put, peer: -1 }), error: A, names: "commands[0].peer" },
  { name: "put from region 0", run: () => pack({ ...put, src: 0 }), error: A, names: "commands[0].src" },
  { name: "put from region 256", run: () => pack({ ...put, src: 256 }), error: A, names: "commands[0].src" },
  { name: "put to region 1.5", run: () => pack({ ...put, dst: 1.5 }), error: A, names: "commands[0].dst" },
  { name: "put at source offset -1", run: () => pack({ ...put, srcOffset: -1 }), error: A, names: "commands[0].srcOffset" },
  { name: "put at destination offset NaN", run: () => pack({ ...put, dstOffset: NaN }), error: A, names: "commands[0].dstOffset" },
  { name: "put of -1 bytes", run: () => pack({ ...put, bytes: -1 }), error: A, names: "commands[0].bytes" },
  { name: "put signalling region 0", run: () => pack({ ...put, signal: { region: 0, offset: 0, value: 1 } }), error: A, names: "commands[0].signal.region" },
  { name: "put signalling offset -8", run: () => pack({ ...put, signal: { region: 3, offset: -8, value: 1 } }), error: A, names: "commands[0].signal.offset" },
  { name: "put signalling value 1.5 (was a raw RangeError)", run: () => pack({ ...put, signal: { region: 3, offset: 0, value: 1.5 } }), error: A, names: "commands[0].signal.value" },
  { name: "put signalling value -1n (was wrapped to 2^64 - 1)", run: () => pack({ ...put, signal: { region: 3, offset: 0, value: -1n } }), error: A, names: "commands[0].signal.value" },
  { name: "put with cookie 1.5", run: () => pack({ ...put, cookie: 1.5 }), error: A, names: "commands[0].cookie" },
  { name: "signal to region 0", run: () => pack({ op: "signal", peer: 1, region: 0, offset: 0, value: 1 }), error: A, names: "commands[0].region" },
  { name: "signal at offset 1.5", run: () => pack({ op: "signal", peer: 1, region: 3, offset: 1.5, value: 1 }), error: A, names: "commands[0].offset" },
  { name: "signal of value -1", run: () => pack({ op: "signal", peer: 1, region: 3, offset: 0, value: -1 }), error: A, names: "commands[0].value" },
  { name: "signal of value 2^64", run: () => pack({ op: "signal", peer: 1, region: 3, offset: 0, value: 1n << 64n }), error: A, names: "commands[0].value" },
  { name: "second command of a batch bad", run: () => Proxy.pack([{ op: "fence" }, { ...put, peer: -1 }]), error: A, names: "commands[1].peer" },
];
