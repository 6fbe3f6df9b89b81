// tensors.ts — bad input to Tensor (shapes, dtypes, data, options, devices) and the device calls.
// `cases` need no GPU: each is refused before anything is allocated. `gpuCases` call a live tensor.
import { deviceInfo, enablePeerAccess } from "../../../lib/device.ts";
import { ArgumentError, DeviceError, DisposedError } from "../../../lib/errors.ts";
import { Completion } from "../../../lib/completion.ts";
import { Event, Stream } from "../../../lib/stream.ts";
import { Tensor } from "../../../lib/tensor.ts";
import { gpuCount } from "../gpu.ts";
import type { BadInputCase } from "./case.ts";

const A = ArgumentError;
const any = (v: unknown) => v as never;
/** A device index past the GPUs there are: DeviceError without any GPU, ArgumentError with some. */
const missingDevice = gpuCount();
const missingError = gpuCount() === 0 ? DeviceError : ArgumentError;

export const cases: BadInputCase[] = [
  // shapes
  { name: "Tensor.empty with a negative dimension", run: () => Tensor.empty([4, -1], "f32"), error: A, names: "shape[1]" },
  { name: "Tensor.empty with a fractional dimension", run: () => Tensor.empty([2.5], "f32"), error: A, names: "shape[0]" },
  { name: "Tensor.empty with a zero dimension", run: () => Tensor.empty([0], "f32"), error: A, names: "shape[0]" },
  { name: "Tensor.empty with a string dimension", run: () => Tensor.empty([any("3")], "f32"), error: A, names: "shape[0]" },
  { name: "Tensor.empty with an empty shape", run: () => Tensor.empty([], "f32"), error: A, names: "shape" },
  { name: "Tensor.empty with a NaN dimension", run: () => Tensor.empty([NaN], "f32"), error: A, names: "shape[0]" },
  { name: "Tensor.empty with an infinite dimension", run: () => Tensor.empty([Infinity], "f32"), error: A, names: "shape[0]" },
  { name: "Tensor.empty with a string shape", run: () => Tensor.empty(any("4"), "f32"), error: A, names: "shape" },
  { name: "Tensor.empty with a null shape", run: () => Tensor.empty(any(null), "f32"), error: A, names: "shape" },
  { name: "Tensor.empty with more than 2^53 elements", run: () => Tensor.empty([2 ** 30, 2 ** 30, 2 ** 10], "u8"), error: A, names: "shape" },
  // dtypes
  { name: "Tensor.empty with dtype f64", run: () => Tensor.empty([4], any("f64")), error: A, names: "dtype" },
  { name: "Tensor.empty without a dtype", run: () => Tensor.empty([4], any(undefined)), error: A, names: "dtype" },
  { name: "Tensor.empty with dtype F32 (case matters)", run: () => Tensor.empty([4], any("F32")), error: A, names: "dtype" },
  { name: "Tensor.empty with dtype 'toString'", run: () => Tensor.empty([4], any("toString")), error: A, names: "dtype" },
  // options and devices
  { name: "Tensor.empty with null options (was a raw TypeError)", run: () => Tensor.empty([4], "f32", any(null)), error: A, names: "opts" },
  { name: "Tensor.empty with a number for options", run: () => Tensor.empty([4], "f32", any(5)), error: A, names: "opts" },
  { name: "Tensor.empty on device -1", run: () => Tensor.empty([4], "f32", { device: -1 }), error: A, names: "device" },
  { name: "Tensor.empty on device 1.5", run: () => Tensor.empty([4], "f32", { device: 1.5 }), error: A, names: "device" },
  { name: "Tensor.empty on device '0'", run: () => Tensor.empty([4], "f32", { device: any("0") }), error: A, names: "device" },
  { name: `Tensor.empty on device ${missingDevice} (no such GPU)`, run: () => Tensor.empty([4], "f32", { device: missingDevice }), error: missingError, names: "device" },
  // data
  { name: "Tensor.from with 5 elements for a [2, 3] shape", run: () => Tensor.from(new Float32Array(5), [2, 3], "f32"), error: A, names: "data" },
  { name: "Tensor.from an Int32Array as bf16", run: () => Tensor.from(new Int32Array(4), [4], "bf16"), error: A, names: "data" },
  { name: "Tensor.from a Float32Array as i32", run: () => Tensor.from(new Float32Array(4), [4], "i32"), error: A, names: "data" },
  { name: "Tensor.from a Uint16Array as f32", run: () => Tensor.from(new Uint16Array(4), [4], "f32"), error: A, names: "data" },
  { name: "Tensor.from a string", run: () => Tensor.from(any("abcd"), [4], "u8"), error: A, names: "data" },
  { name: "Tensor.from a number", run: () => Tensor.from(any(42), [4], "u8"), error: A, names: "data" },
  { name: "Tensor.from null", run: () => Tensor.from(any(null), [4], "u8"), error: A, names: "data" },
  { name: "Tensor.from [300, -1] as u8 (was wrapped to 44, 255)", run: () => Tensor.from([300, -1], [2], "u8"), error: A, names: "data[0]" },
  { name: "Tensor.from [1, -1] as u8", run: () => Tensor.from([1, -1], [2], "u8"), error: A, names: "data[1]" },
  { name: "Tensor.from [NaN, 1.7] as i32 (was truncated to 0, 1)", run: () => Tensor.from([NaN, 1.7], [2], "i32"), error: A, names: "data[0]" },
  { name: "Tensor.from [1, 1.7] as i32", run: () => Tensor.from([1, 1.7], [2], "i32"), error: A, names: "data[1]" },
  { name: "Tensor.from [2^31] as i32 (out of range)", run: () => Tensor.from([2 ** 31], [1], "i32"), error: A, names: "data[0]" },
  { name: "Tensor.from a string element as f32", run: () => Tensor.from(any(["1", 2]), [2], "f32"), error: A, names: "data[0]" },
  { name: "Tensor.from a null element as bf16", run: () => Tensor.from(any([1, null]), [2], "bf16"), error: A, names: "data[1]" },
  { name: "Tensor.from with null options", run: () => Tensor.from([1, 2], [2], "f32", any(null)), error: A, names: "opts" },
  { name: "Tensor.from 2 numbers for a [3] shape", run: () => Tensor.from([1, 2], [3], "f32"), error: A, names: "data" },
  { name: "Tensor.from with a bad shape", run: () => Tensor.from([1, 2], [2, 0], "f32"), error: A, names: "shape[1]" },
  // wrap
  { name: "Tensor.wrap a null pointer", run: () => Tensor.wrap(0, [4], "f32", 0), error: A, names: "ptr" },
  { name: "Tensor.wrap a negative pointer", run: () => Tensor.wrap(-4096, [4], "f32", 0), error: A, names: "ptr" },
  { name: "Tensor.wrap a fractional pointer", run: () => Tensor.wrap(4096.5, [4], "f32", 0), error: A, names: "ptr" },
  { name: "Tensor.wrap with a zero dimension", run: () => Tensor.wrap(4096, [0], "f32", 0), error: A, names: "shape[0]" },
  { name: "Tensor.wrap with an unknown dtype", run: () => Tensor.wrap(4096, [4], any("x"), 0), error: A, names: "dtype" },
  { name: "Tensor.wrap on device -1", run: () => Tensor.wrap(4096, [4], "f32", -1), error: A, names: "device" },
  { name: `Tensor.wrap on device ${missingDevice} (no such GPU)`, run: () => Tensor.wrap(4096, [4], "f32", missingDevice), error: missingError, names: "device" },
  // streams, events, devices
  { name: "Stream.create on device -1", run: () => Stream.create(-1), error: A, names: "device" },
  { name: `Stream.create on device ${missingDevice} (no such GPU)`, run: () => Stream.create(missingDevice), error: missingError, names: "device" },
  { name: "Event.create on device 1.5", run: () => Event.create(1.5), error: A, names: "device" },
  { name: "Completion.create on device -1", run: () => Completion.create(-1), error: A, names: "device" },
  { name: "deviceInfo(-1)", run: () => deviceInfo(-1), error: A, names: "device" },
  { name: `deviceInfo(${missingDevice}) (no such GPU)`, run: () => deviceInfo(missingDevice), error: missingError, names: "device" },
  { name: "enablePeerAccess(-1, 0)", run: () => enablePeerAccess(-1, 0), error: A, names: "device" },
];

// ---- on a GPU: a live tensor, freed after the cases ----------------------------------------------
let live: { f: Tensor; i: Tensor; u: Tensor; gone: Tensor } | undefined;
const t = () => (live ??= {
  f: Tensor.empty([4], "f32"), i: Tensor.empty([4], "i32"), u: Tensor.empty([4], "u8"),
  gone: (() => {
    const x = Tensor.empty([4], "f32");
    x.dispose();
    return x;
  })(),
});

export const gpuCases: BadInputCase[] = [
  { name: "fill with a string", run: () => t().f.fill(any("1")), error: A, names: "value" },
  { name: "fill an i32 tensor with 1.5", run: () => t().i.fill(1.5), error: A, names: "value" },
  { name: "fill an i32 tensor with NaN (was 0)", run: () => t().i.fill(NaN), error: A, names: "value" },
  { name: "fill a u8 tensor with 300 (was 44)", run: () => t().u.fill(300), error: A, names: "value" },
  { name: "fillRandom an i32 tensor", run: () => t().i.fillRandom(1), error: A, names: "this.dtype" },
  { name: "fillRandom with a NaN seed (was a raw RangeError)", run: () => t().f.fillRandom(NaN), error: A, names: "seed" },
  { name: "fillRandom with hi below lo", run: () => t().f.fillRandom(1, 2, 1), error: A, names: "hi" },
  { name: "fillRandom with an infinite hi", run: () => t().f.fillRandom(1, 0, Infinity), error: A, names: "hi" },
  { name: "download with raw: 1", run: () => t().f.download({ raw: any(1) }), error: A, names: "opts.raw" },
  { name: "download with null options", run: () => t().f.download(any(null)), error: A, names: "opts" },
  { name: "copyFrom a number", run: () => t().f.copyFrom(any(42)), error: A, names: "src" },
  { name: "copyFrom a tensor of another size", run: () => t().f.copyFrom(t().u), error: A, names: "src" },
  { name: "upload 3 elements into 4", run: () => t().f.upload(new Float32Array(3)), error: A, names: "data" },
  { name: "upload [300] into u8", run: () => t().u.upload([1, 2, 300, 4]), error: A, names: "data[2]" },
  { name: "download a disposed tensor", run: () => t().gone.download(), error: DisposedError, names: "Tensor [4] f32" },
  { name: "ptr of a disposed tensor", run: () => t().gone.ptr, error: DisposedError, names: "Tensor [4] f32" },
  { name: "Completion.create with 0 slots", run: () => Completion.create(0, { slots: 0 }), error: A, names: "slots" },
  { name: "Completion.create with a negative timeout", run: () => Completion.create(0, { timeoutMs: -1 }), error: A, names: "timeoutMs" },
  { name: "Completion.create with null options", run: () => Completion.create(0, any(null)), error: A, names: "opts" },
];

export function release(): void {
  if (live) for (const x of Object.values(live)) x.dispose();
  live = undefined;
}
