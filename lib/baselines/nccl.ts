// nccl.ts — NCCL as a benchmark baseline (libnccl.so.2, dlopen'ed by libweft at run time): one
// NCCL communicator per local GPU in this process (ncclCommInitAll), every collective issued for
// all of them in one group call. Not part of weft's API surface; bench/ uses it.
import { NcclParams } from "../abi.ts";
import { DTYPES } from "../dtype.ts";
import { ArgumentError } from "../errors.ts";
import { NativeHandle } from "../handle.ts";
import { addressOf, check, native, outPointer } from "../native.ts";
import type { Stream } from "../stream.ts";
import type { Tensor } from "../tensor.ts";

export type NcclKind = "allGather" | "reduceScatter" | "allReduce" | "allToAll" | "broadcast";
const KIND: Record<NcclKind, number> = { allGather: 0, reduceScatter: 1, allReduce: 2, allToAll: 3, broadcast: 4 };

/** NCCL's version code (22803 for 2.28.3), or 0 when libnccl.so.2 is not on this machine. */
export function ncclVersion(): number {
  const v = new Int32Array(1);
  check(native().weft_nccl_version(v), "ncclVersion");
  return v[0]!;
}

export class NcclGroup extends NativeHandle {
  readonly devices: readonly number[];

  private constructor(handle: number, devices: readonly number[]) {
    super(handle, `NcclGroup on devices ${devices.join(", ")}`, "its NCCL communicators stay open until the process exits");
    this.devices = devices;
  }

  static create(devices: readonly number[]): NcclGroup {
    const out = new BigUint64Array(1);
    check(native().weft_nccl_create(devices.length, Int32Array.from(devices), out), "NcclGroup.create");
    return new NcclGroup(outPointer(out), [...devices]);
  }

  /** Packs one collective over every device (inputs[i], outputs[i] on devices[i]); run() issues it. */
  prepare(kind: NcclKind, inputs: readonly Tensor[], outputs: readonly Tensor[], streams: readonly Stream[], opts: { count: number; root?: number }): () => void {
    const op = "NcclGroup.prepare";
    const n = this.devices.length;
    if (inputs.length !== n || outputs.length !== n || streams.length !== n) throw new ArgumentError(op, "inputs", `needs one tensor and stream per device (${n})`);
    const ins = BigUint64Array.from(inputs, (t) => BigInt(t.ptr));
    const outs = BigUint64Array.from(outputs, (t) => BigInt(t.ptr));
    const sts = BigUint64Array.from(streams, (s) => BigInt(s.handle));
    const params = NcclParams.write(NcclParams.alloc(), {
      kind: KIND[kind], dtype: DTYPES[inputs[0]!.dtype].code, count: opts.count, root: opts.root ?? 0,
    });
    const dv = new DataView(params.buffer);
    return () => {
      const handle = this.pointerFor("NcclGroup.run");
      // The arrays stay referenced by this closure; their addresses are taken per call.
      dv.setBigUint64(NcclParams.offsets.inputs, BigInt(addressOf(ins)), true);
      dv.setBigUint64(NcclParams.offsets.outputs, BigInt(addressOf(outs)), true);
      dv.setBigUint64(NcclParams.offsets.streams, BigInt(addressOf(sts)), true);
      check(native().weft_nccl_collective(handle, params), `nccl.${kind}`);
    };
  }

  protected destroy(handle: number): void {
    check(native().weft_nccl_destroy(handle), "NcclGroup.dispose");
  }
}
