import { describe, expect, test } from "./support/test-api.ts";

import { bf16ToF32, f32ToBf16 } from "../lib/dtype.ts";
import { DeviceError, DisposedError, WeftError } from "../lib/errors.ts";
import { Tensor } from "../lib/tensor.ts";
import { enablePeerAccess } from "../lib/device.ts";
import { Event, Stream } from "../lib/stream.ts";
import { argError } from "./support/argument-error.ts";
import { caught } from "./support/caught.ts";
import { describeGpu, gpuCount, randomArray } from "./support/gpu.ts";

describe("validation (no GPU needed: checked before anything is allocated)", () => {
  test("negative, zero, non-integer and non-number dims", () => {
    expect(argError(() => Tensor.empty([4, -1], "f32"), "shape[1]")).toContain("positive integer");
    expect(argError(() => Tensor.empty([2.5], "f32"), "shape[0]")).toContain("2.5");
    expect(argError(() => Tensor.empty([0], "f32"), "shape[0]")).toContain("positive integer");
    expect(argError(() => Tensor.empty(["3" as unknown as number], "f32"), "shape[0]")).toContain('"3"');
    expect(argError(() => Tensor.empty([], "f32"), "shape")).toContain("non-empty");
    expect(argError(() => Tensor.empty([NaN], "f32"), "shape[0]")).toContain("positive integer");
  });

  test("unknown dtype", () => {
    expect(argError(() => Tensor.empty([4], "f64" as never), "dtype")).toContain("bf16, f16, f32, i32, u8");
  });

  test("data whose length does not match the shape", () => {
    expect(argError(() => Tensor.from(new Float32Array(5), [2, 3], "f32"), "data")).toContain("has 5 elements but the shape needs 6");
  });

  test("data of the wrong array type for the dtype", () => {
    expect(argError(() => Tensor.from(new Int32Array(4), [4], "bf16"), "data")).toContain("Float32Array or Uint16Array");
    expect(argError(() => Tensor.from(new Float32Array(4), [4], "i32"), "data")).toContain("Int32Array");
    expect(argError(() => Tensor.from(new Uint16Array(4), [4], "f32"), "data")).toContain("Float32Array");
    expect(argError(() => Tensor.from("abcd" as never, [4], "u8"), "data")).toContain("is a String but a u8 tensor takes Uint8Array");
    expect(argError(() => Tensor.from(42 as never, [4], "u8"), "data")).toContain("typed array");
  });

  test("an out-of-range device: ArgumentError past the GPUs there are, DeviceError when there is none", () => {
    if (gpuCount() > 0) {
      expect(argError(() => Tensor.empty([4], "f32", { device: gpuCount() + 3 }), "device")).toContain(`must be < ${gpuCount()}`);
    } else {
      const err = caught(() => Tensor.empty([4], "f32", { device: 0 }));
      expect(err).toBeInstanceOf(DeviceError);
      expect((err as DeviceError).argument).toBe("device");
      expect((err as Error).message).toContain("no GPU on this machine");
      expect((err as Error).message).toContain("'device'");
    }
    expect(argError(() => Tensor.empty([4], "f32", { device: -1 }), "device")).toContain("non-negative");
  });

  test("wrapping a null pointer", () => {
    expect(argError(() => Tensor.wrap(0, [4], "f32", 0), "ptr")).toContain("non-null");
  });
});

describeGpu("Tensor on a GPU", 1, () => {
  test("upload/download round trips, 1 element to 1 GiB", () => {
    for (const bytes of [1, 7, 4096 + 3, 1 << 20, 64 << 20, 1 << 30]) {
      const host = new Uint8Array(bytes);
      // xorshift over 32-bit words: fast enough for a GiB, and never all zeros.
      const words = new Uint32Array(host.buffer, 0, bytes >>> 2);
      let s = (bytes * 2654435761) >>> 0 || 1;
      for (let i = 0; i < words.length; i++) {
        s ^= s << 13; s ^= s >>> 17; s ^= s << 5;
        words[i] = s >>> 0;
      }
      for (let i = words.length * 4; i < bytes; i++) host[i] = (i * 131 + 7) & 0xff;
      using t = Tensor.from(host, [bytes], "u8");
      const back = t.download() as Uint8Array;
      expect(back.length).toBe(bytes);
      expect(Buffer.from(back.buffer).equals(Buffer.from(host.buffer))).toBe(true);
    }
  });

  test("bf16 from Float32Array rounds to nearest even and comes back as f32", () => {
    const x = randomArray(10007, 1);
    using t = Tensor.from(x, [10007], "bf16");
    expect(t.download()).toEqual(bf16ToF32(f32ToBf16(x)));
    expect(t.download({ raw: true })).toEqual(f32ToBf16(x));
  });

  test("fill (NaN poison and values) and fillRandom", () => {
    using t = Tensor.empty([3, 1001], "bf16");
    t.fill(NaN);
    expect((t.download() as Float32Array).every(Number.isNaN)).toBe(true);
    t.fill(-1.5);
    expect((t.download() as Float32Array).every((v) => v === -1.5)).toBe(true);
    t.fillRandom(42, -2, 2);
    const r = t.download() as Float32Array;
    expect(r.every((v) => v >= -2 && v <= 2)).toBe(true);
    expect(new Set(r).size).toBeGreaterThan(100);
    using u = Tensor.empty([3, 1001], "bf16").fillRandom(42, -2, 2);
    expect(u.download()).toEqual(r); // same seed, same data
  });

  test("copyFrom on one device, and size mismatches are rejected", () => {
    using a = Tensor.from(randomArray(1000, 2), [1000], "f32");
    using b = Tensor.empty([10, 100], "f32").fill(NaN);
    b.copyFrom(a);
    expect(b.download()).toEqual(a.download());
    using c = Tensor.empty([999], "f32");
    expect(argError(() => c.copyFrom(a), "src")).toContain("4000 bytes but the destination has 3996");
  });

  test("dispose: use after dispose throws, double dispose is a no-op, `using` disposes", () => {
    const t = Tensor.empty([16], "f32");
    t.dispose();
    expect(() => t.download()).toThrow(DisposedError);
    expect(() => t.upload(new Float32Array(16))).toThrow(DisposedError);
    expect(() => t.ptr).toThrow(DisposedError);
    t.dispose();
    let escaped: Tensor;
    {
      using u = Tensor.empty([16], "f32");
      escaped = u;
    }
    expect(escaped.disposed).toBe(true);
  });

  test("wrap views memory without owning it", () => {
    using owner = Tensor.from(new Float32Array([1, 2, 3, 4]), [4], "f32");
    const view = Tensor.wrap(owner.ptr, [2, 2], "f32", owner.device);
    expect(Array.from(view.download())).toEqual([1, 2, 3, 4]);
    view.dispose();
    expect(Array.from(owner.download())).toEqual([1, 2, 3, 4]);
  });

  test("failed allocations surface as WeftError and leave nothing behind", () => {
    expect(() => Tensor.empty([1 << 30, 1 << 10], "f32")).toThrow(WeftError); // 4 TiB
    using t = Tensor.empty([1 << 20], "f32"); // the device still allocates afterwards
    expect(t.bytes).toBe(4 << 20);
  });

  test("events time stream work", () => {
    using s = Stream.create(0);
    using e0 = Event.create(0);
    using e1 = Event.create(0);
    e0.record(s);
    e1.record(s);
    e1.synchronize();
    expect(e1.elapsedSince(e0)).toBeGreaterThanOrEqual(0);
    expect(s.done()).toBe(true);
  });
});

describeGpu("peer copy between two GPUs", 2, () => {
  test("1 GiB device 0 -> device 1 is exact, with bandwidth printed", () => {
    const n = 1 << 28; // 1 GiB of f32
    using a = Tensor.empty([n], "f32", { device: 0 }).fillRandom(7);
    using b = Tensor.empty([n], "f32", { device: 1 }).fill(NaN);
    enablePeerAccess(0, 1);
    enablePeerAccess(1, 0);
    b.copyFrom(a); // warm-up
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      b.copyFrom(a);
      times.push(performance.now() - t0);
    }
    times.sort((x, y) => x - y);
    const gbps = (a.bytes / 1e9) / (times[2]! / 1e3);
    console.log(`peer copy 1 GiB GPU0 -> GPU1: median ${times[2]!.toFixed(2)} ms, ${gbps.toFixed(1)} GB/s (host-timed, synchronous)`);
    // The same seed regenerates the source on device 1: compare against that, bit for bit.
    using ref = Tensor.empty([n], "f32", { device: 1 }).fillRandom(7);
    const back = b.download() as Float32Array;
    const want = ref.download() as Float32Array;
    expect(Buffer.from(back.buffer).equals(Buffer.from(want.buffer))).toBe(true);
  });
});
