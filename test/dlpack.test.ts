// DLPack hand-over for embedders (Tensor.fromDLPack / toDLPack over weft_dlpack_*): the native
// export/import round trip on a host descriptor (no GPU needed), what fromDLPack refuses, and the
// zero-copy round trip of a device tensor on a GPU.
import { describe, expect, test } from "./support/test-api.ts";

import { DlpackDesc } from "../lib/abi.ts";
import { ArgumentError, UnsupportedError, WeftError } from "../lib/errors.ts";
import { check, native, outPointer, viewNative } from "../lib/native.ts";
import { Tensor } from "../lib/tensor.ts";
import { caught } from "./support/caught.ts";
import { describeGpu, randomArray } from "./support/gpu.ts";

const VERSIONED = 1;

function live(): number {
  const n = new BigInt64Array(1);
  check(native().weft_dlpack_live(n), "weft_dlpack_live");
  return Number(n[0]);
}

/** A managed tensor over (fake) host memory at `data`: native export of a CPU descriptor. */
function hostManaged(shape: number[], dtype = 2, data = 4096, flags = VERSIONED): number {
  const strides: number[] = [];
  let step = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = step;
    step *= shape[i]!;
  }
  const desc = DlpackDesc.write(DlpackDesc.alloc(), { data, device_type: 1, device_id: 0, ndim: shape.length, dtype, shape, strides });
  const out = new BigUint64Array(1);
  check(native().weft_dlpack_export(desc, flags, null, null, out), "weft_dlpack_export");
  return outPointer(out);
}

function read(managed: number, flags = VERSIONED) {
  const buf = DlpackDesc.alloc();
  check(native().weft_dlpack_import(managed, flags, buf), "weft_dlpack_import");
  return DlpackDesc.read(buf);
}

describe("DLPack (CPU)", () => {
  test("export then import gives back shape, strides, dtype and address; the deleter runs once", () => {
    const before = live();
    for (const flags of [VERSIONED, 0]) {
      const m = hostManaged([3, 5, 7], 0, 1 << 20, flags);
      expect(live()).toBe(before + 1);
      const d = read(m, flags);
      expect([Number(d.data), d.device_type, d.ndim, d.dtype, d.dl_dtype]).toEqual([1 << 20, 1, 3, 0, 4 | (16 << 8) | (1 << 16)]);
      expect(d.shape.slice(0, 3).map(Number)).toEqual([3, 5, 7]);
      expect(d.strides.slice(0, 3).map(Number)).toEqual([35, 7, 1]);
      check(native().weft_dlpack_delete(m, flags), "weft_dlpack_delete");
      expect(live()).toBe(before);
    }
  });

  test("a newer major version is refused; bad descriptors are named", () => {
    const m = hostManaged([4]);
    const version = new Uint32Array(viewNative(m, 8));  // DLManagedTensorVersioned starts with {major, minor}
    version[0] = 2;
    const err = caught(() => read(m));
    expect(err).toBeInstanceOf(UnsupportedError);
    expect((err as WeftError).message).toContain("DLPack version 2.0: weft reads version 1.x");
    version[0] = 1;
    check(native().weft_dlpack_delete(m, VERSIONED), "weft_dlpack_delete");
    const bad = DlpackDesc.write(DlpackDesc.alloc(), { data: 4096, device_type: 1, ndim: 9, dtype: 2 });
    expect(() => check(native().weft_dlpack_export(bad, VERSIONED, null, null, new BigUint64Array(1)), "export")).toThrow(/desc.ndim must be in \[0, 8\]/);
    const host = DlpackDesc.write(DlpackDesc.alloc(), { data: 4096, device_type: 1, ndim: 1, dtype: 2, shape: [4], strides: [1] });
    expect(() => check(native().weft_dlpack_export(host, VERSIONED | 2, null, null, new BigUint64Array(1)), "export"))
      .toThrow(/FREE_DATA hands over weft_malloc memory, so device_type must be CUDA/);
  });

  test("Tensor.fromDLPack refuses host memory and leaves the tensor with the caller", () => {
    const before = live();
    const m = hostManaged([2, 2]);
    expect(() => Tensor.fromDLPack(m)).toThrow(ArgumentError);
    expect(() => Tensor.fromDLPack(m)).toThrow(/host memory\): weft tensors are CUDA device memory/);
    expect(live()).toBe(before + 1);
    check(native().weft_dlpack_delete(m, VERSIONED), "weft_dlpack_delete");
    expect(() => Tensor.fromDLPack(0)).toThrow(/'managed' must be the address/);
    expect(live()).toBe(before);
  });
});

describeGpu("DLPack on a GPU", 1, () => {
  test("toDLPack hands an owned tensor over, fromDLPack takes it back zero copy, dispose runs the deleter", () => {
    const before = live();
    const data = randomArray(6 * 10, 27);
    const t = Tensor.from(data, [6, 10], "f32");
    const ptr = t.ptr;
    const m = t.toDLPack();
    expect(t.disposed).toBe(true);  // owned: the memory moved with the managed tensor
    const d = read(m);
    expect([Number(d.data), d.device_type, d.device_id, d.dtype]).toEqual([ptr, 2, 0, 2]);
    const u = Tensor.fromDLPack(m);
    expect([u.ptr, u.shape, u.dtype, u.device]).toEqual([ptr, [6, 10], "f32", 0]);
    expect(Array.from(u.download())).toEqual(Array.from(data));
    // A lent view: exporting an import does not move anything.
    const again = u.toDLPack();
    expect(u.disposed).toBe(false);
    check(native().weft_dlpack_delete(again, VERSIONED), "weft_dlpack_delete");
    u.dispose();  // the deleter frees the device memory (WEFT_DLPACK_FREE_DATA)
    expect(live()).toBe(before);
  });

  test("fromDLPack refuses strided tensors", () => {
    const t = Tensor.empty([4, 4], "bf16");
    try {
      const strided = DlpackDesc.write(DlpackDesc.alloc(), { data: t.ptr, device_type: 2, ndim: 2, dtype: 0, shape: [4, 2], strides: [4, 2] });
      const out = new BigUint64Array(1);
      check(native().weft_dlpack_export(strided, VERSIONED, null, null, out), "export");
      expect(() => Tensor.fromDLPack(outPointer(out))).toThrow(/strides \[4, 2\] for shape \[4, 2\]: weft tensors are dense and row-major/);
      check(native().weft_dlpack_delete(outPointer(out), VERSIONED), "delete");
    } finally {
      t.dispose();
    }
  });
});
