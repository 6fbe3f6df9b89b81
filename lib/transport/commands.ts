// commands.ts — what a proxy is told to do (put / signal / fence / barrier) and how a command is
// packed into the FIFO's fixed-size slots (WeftProxyCommand, cuda/primitives/proxy_command.h).
// Everything is validated here, in TS, before it reaches the FIFO.
import { ProxyCommand } from "../abi.ts";
import { ArgumentError, checkInt, DisposedError } from "../errors.ts";
import { Region } from "./region.ts";

export const Opcode = { put: 1, signal: 2, fence: 3, barrier: 4 } as const;
const FLAG_SIGNAL = 1;

export interface SignalTarget {
  /** Region holding the 64-bit signal word on the peer (same index on every rank). */
  region: Region | number;
  /** Byte offset of the word, 8-byte aligned. */
  offset: number;
  /** The epoch the word is raised to. Values only grow. */
  value: number | bigint;
}

export interface PutCommand {
  peer: number;
  src: Region | number;
  srcOffset: number;
  dst: Region | number;
  dstOffset: number;
  bytes: number;
  /** Then raise this signal: visible only after this put's data (and all earlier data to `peer`). */
  signal?: SignalTarget;
  cookie?: number | bigint;
}

export type Command =
  | ({ op: "put" } & PutCommand)
  | ({ op: "signal"; peer: number; cookie?: number | bigint } & SignalTarget)
  | { op: "fence" }
  | { op: "barrier" };

function regionIndex(op: string, name: string, r: Region | number): number {
  if (r instanceof Region) {
    if (r.disposed) throw new DisposedError(op, `Region ${r.index}`);
    return r.index;
  }
  return checkInt(op, name, r, 1, 255);
}

function epoch(op: string, name: string, v: unknown): number | bigint {
  if (typeof v === "bigint") {
    if (v < 0n || v >= 1n << 64n) throw new ArgumentError(op, name, `must be a 64-bit unsigned value (got ${v})`);
    return v;
  }
  return checkInt(op, name, v, 0);
}

function cookie(op: string, name: string, v: unknown): number | bigint {
  return v === undefined ? 0 : epoch(op, name, v);
}

/** Packs commands into `buf` (ProxyCommand.size bytes each), validating each first. */
export function packCommands(commands: readonly Command[], buf?: Uint8Array, op = "Proxy.push"): Uint8Array {
  const out = buf && buf.length >= commands.length * ProxyCommand.size ? buf : new Uint8Array(commands.length * ProxyCommand.size);
  commands.forEach((c, i) => {
    const at = out.subarray(i * ProxyCommand.size, (i + 1) * ProxyCommand.size);
    const name = `commands[${i}]`;
    if (c === null || typeof c !== "object") throw new ArgumentError(op, name, "must be a command object { op, ... }");
    at.fill(0);
    ProxyCommand.write(at, { size: ProxyCommand.size, version: 1 });
    switch (c.op) {
      case "put": {
        const sig = c.signal;
        ProxyCommand.write(at, {
          opcode: Opcode.put,
          flags: sig ? FLAG_SIGNAL : 0,
          peer: checkInt(op, `${name}.peer`, c.peer, 0),
          src_region: regionIndex(op, `${name}.src`, c.src),
          dst_region: regionIndex(op, `${name}.dst`, c.dst),
          src_offset: checkInt(op, `${name}.srcOffset`, c.srcOffset, 0),
          dst_offset: checkInt(op, `${name}.dstOffset`, c.dstOffset, 0),
          bytes: checkInt(op, `${name}.bytes`, c.bytes, 0),
          signal_region: sig ? regionIndex(op, `${name}.signal.region`, sig.region) : 0,
          signal_offset: sig ? checkInt(op, `${name}.signal.offset`, sig.offset, 0) : 0,
          signal_value: sig ? epoch(op, `${name}.signal.value`, sig.value) : 0,
          cookie: cookie(op, `${name}.cookie`, c.cookie),
        });
        break;
      }
      case "signal":
        ProxyCommand.write(at, {
          opcode: Opcode.signal,
          peer: checkInt(op, `${name}.peer`, c.peer, 0),
          signal_region: regionIndex(op, `${name}.region`, c.region),
          signal_offset: checkInt(op, `${name}.offset`, c.offset, 0),
          signal_value: epoch(op, `${name}.value`, c.value),
          cookie: cookie(op, `${name}.cookie`, c.cookie),
        });
        break;
      case "fence":
        ProxyCommand.write(at, { opcode: Opcode.fence });
        break;
      case "barrier":
        ProxyCommand.write(at, { opcode: Opcode.barrier });
        break;
      default:
        throw new ArgumentError(op, `${name}.op`, `must be put, signal, fence or barrier (got ${JSON.stringify((c as { op?: unknown }).op)})`);
    }
  });
  return out;
}
