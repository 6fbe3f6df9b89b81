// tensor.ts — a dense, row-major device tensor: shape, dtype, device, and the device memory it owns
// (or wraps without owning). Host transfers are synchronous; device-side work is stream-ordered.
import { DlpackDesc } from "./abi.ts";
import { requireDevice } from "./device.ts";
import { bf16ToF32, DTYPES, f16ToF32, f32ToBf16, f32ToF16, isDType, scalarBits, type DType, type RawArray } from "./dtype.ts";
import { ArgumentError, UnsupportedError } from "./errors.ts";
import { NativeHandle } from "./handle.ts";
import { check, native, outPointer } from "./native.ts";

export type Shape = readonly number[];

/** What upload() accepts: the dtype's own typed array, Float32Array for bf16/f16 (rounded to
 * nearest even), Uint16Array raw bits for bf16/f16, or a plain number array. */
export type TensorData = RawArray | readonly number[];

export interface TensorOptions {
  device?: number;
}

const COPY_H2D = 1;
const COPY_D2H = 2;
const COPY_D2D = 3;

/** Throws ArgumentError unless `shape` is a non-empty list of positive integers; returns numel. */
export function checkShape(shape: unknown, op: string, argument = "shape"): number {
  if (!Array.isArray(shape) || shape.length === 0) {
    throw new ArgumentError(op, argument, `must be a non-empty array of positive integers (got ${JSON.stringify(shape)})`);
  }
  let n = 1;
  shape.forEach((d, i) => {
    if (typeof d !== "number" || !Number.isInteger(d) || d <= 0) {
      throw new ArgumentError(op, `${argument}[${i}]`, `must be a positive integer (got ${JSON.stringify(d)})`);
    }
    n *= d;
  });
  if (!Number.isSafeInteger(n)) throw new ArgumentError(op, argument, `has more than 2^53 elements`);
  return n;
}

export function checkDType(dtype: unknown, op: string, argument = "dtype"): DType {
  if (!isDType(dtype)) {
    throw new ArgumentError(op, argument, `must be one of ${Object.keys(DTYPES).join(", ")} (got ${JSON.stringify(dtype)})`);
  }
  return dtype;
}

/** The options object of a call, or an ArgumentError naming it when it is not an object. */
export function checkOptions<T extends object>(opts: T | undefined, op: string, argument = "opts"): Partial<T> {
  if (opts === undefined) return {};
  if (opts === null || typeof opts !== "object" || Array.isArray(opts)) {
    throw new ArgumentError(op, argument, `must be an options object or undefined (got ${opts === null ? "null" : Array.isArray(opts) ? "an array" : typeof opts})`);
  }
  return opts;
}

export class Tensor extends NativeHandle {
  readonly shape: Shape;
  readonly dtype: DType;
  readonly device: number;
  readonly numel: number;
  readonly bytes: number;
  /** false for Tensor.wrap(): dispose() then forgets the pointer without freeing it. */
  readonly owned: boolean;
  /** A DLPack import's managed tensor, whose deleter dispose() calls. */
  #dlpack: { managed: number; flags: number } | undefined;

  protected constructor(ptr: number, shape: Shape, dtype: DType, device: number, owned: boolean, leak?: string) {
    const numel = shape.reduce((a, b) => a * b, 1);
    const what = `Tensor [${shape.join(", ")}] ${dtype} on device ${device}`;
    super(ptr, what, leak ?? (owned ? `its ${numel * DTYPES[dtype].bytes} bytes of device memory stay allocated until the process exits` : null));
    this.shape = Object.freeze([...shape]);
    this.dtype = dtype;
    this.device = device;
    this.numel = numel;
    this.bytes = numel * DTYPES[dtype].bytes;
    this.owned = owned;
  }

  /** Uninitialized device memory. */
  static empty(shape: Shape, dtype: DType, opts?: TensorOptions): Tensor {
    const op = "Tensor.empty";
    const numel = checkShape(shape, op);
    checkDType(dtype, op);
    const device = checkOptions(opts, op).device ?? 0;
    requireDevice(device, op);
    const out = new BigUint64Array(1);
    check(native().weft_malloc(device, numel * DTYPES[dtype].bytes, out), op);
    return new Tensor(outPointer(out), shape, dtype, device, true);
  }

  /** A new device tensor holding `data`. */
  static from(data: TensorData, shape: Shape, dtype: DType, opts?: TensorOptions): Tensor {
    const op = "Tensor.from";
    const numel = checkShape(shape, op);
    checkDType(dtype, op);
    checkOptions(opts, op);
    const bits = toRaw(data, dtype, numel, op); // validate before allocating
    const t = Tensor.empty(shape, dtype, opts);
    try {
      t.#uploadRaw(bits, op);
    } catch (e) {
      t.dispose();
      throw e;
    }
    return t;
  }

  /** Views existing device memory at `ptr` without owning it. The caller keeps it alive. */
  static wrap(ptr: number, shape: Shape, dtype: DType, device: number): Tensor {
    const op = "Tensor.wrap";
    if (!Number.isSafeInteger(ptr) || ptr <= 0) throw new ArgumentError(op, "ptr", `must be a non-null device address (got ${ptr})`);
    checkShape(shape, op);
    checkDType(dtype, op);
    requireDevice(device, op);
    return new Tensor(ptr, shape, dtype, device, false);
  }

  /** Device address of the first element. */
  get ptr(): number {
    return this.pointerFor("Tensor.ptr");
  }

  upload(data: TensorData): this {
    const op = "Tensor.upload";
    this.guard(op);
    this.#uploadRaw(toRaw(data, this.dtype, this.numel, op), op);
    return this;
  }

  /** Copies the tensor to the host. bf16/f16 come back as Float32Array unless `raw` is set, then
   * as their Uint16Array bits. */
  download(opts?: { raw?: boolean }): RawArray {
    const op = "Tensor.download";
    const ptr = this.pointerFor(op);
    const { raw: asRaw } = checkOptions(opts, op);
    if (asRaw !== undefined && typeof asRaw !== "boolean") throw new ArgumentError(op, "opts.raw", `must be a boolean (got ${JSON.stringify(asRaw)})`);
    const raw = allocRaw(this.dtype, this.numel);
    check(native().weft_memcpy(raw, ptr, this.bytes, COPY_D2H, null), op);
    if (asRaw || (this.dtype !== "bf16" && this.dtype !== "f16")) return raw;
    return this.dtype === "bf16" ? bf16ToF32(raw as Uint16Array) : f16ToF32(raw as Uint16Array);
  }

  /** Sets every element to `value` (NaN included, for poisoning outputs). */
  fill(value: number): this {
    const op = "Tensor.fill";
    const ptr = this.pointerFor(op);
    if (typeof value !== "number") throw new ArgumentError(op, "value", `must be a number (got ${typeof value})`);
    checkElement(this.dtype, value, op, "value");
    check(native().weft_fill(ptr, this.numel, DTYPES[this.dtype].bytes, scalarBits(this.dtype, value), null), op);
    return this;
  }

  /** Uniform random values in [lo, hi), generated on the device from `seed` (float dtypes). */
  fillRandom(seed: number, lo = -1, hi = 1): this {
    const op = "Tensor.fillRandom";
    const ptr = this.pointerFor(op);
    if (!DTYPES[this.dtype].float) throw new ArgumentError(op, "this.dtype", `must be a float dtype (got ${this.dtype})`);
    if (typeof seed !== "number" || !Number.isSafeInteger(seed)) throw new ArgumentError(op, "seed", `must be a safe integer (got ${JSON.stringify(seed)})`);
    for (const [name, v] of [["lo", lo], ["hi", hi]] as const) {
      if (typeof v !== "number" || !Number.isFinite(v)) throw new ArgumentError(op, name, `must be a finite number (got ${JSON.stringify(v)})`);
    }
    if (!(hi > lo)) throw new ArgumentError(op, "hi", `must be greater than lo (got lo=${lo}, hi=${hi})`);
    check(native().weft_fill_random(ptr, DTYPES[this.dtype].code, this.numel, BigInt.asUintN(64, BigInt(seed)), lo, hi, null), op);
    return this;
  }

  /** Copies `src` into this tensor; across devices this is a peer copy. Sizes must match. */
  copyFrom(src: Tensor): this {
    const op = "Tensor.copyFrom";
    const dst = this.pointerFor(op);
    if (!(src instanceof Tensor)) throw new ArgumentError(op, "src", "must be a Tensor");
    src.guard(op);
    if (src.bytes !== this.bytes) {
      throw new ArgumentError(op, "src", `has ${src.bytes} bytes but the destination has ${this.bytes}: copies need equal sizes`);
    }
    if (src.device === this.device) check(native().weft_memcpy(dst, src.ptr, this.bytes, COPY_D2D, null), op);
    else check(native().weft_memcpy_peer(dst, this.device, src.ptr, src.device, this.bytes, null), op);
    return this;
  }

  /** Frees the device memory (when owned); a wrapped tensor only forgets its pointer; a DLPack
   * import calls its producer's deleter. */
  protected destroy(ptr: number): void {
    if (this.owned) check(native().weft_free(ptr), "Tensor.dispose");
    if (this.#dlpack) check(native().weft_dlpack_delete(this.#dlpack.managed, this.#dlpack.flags), "Tensor.dispose");
  }

  override toString(): string {
    return `Tensor([${this.shape.join(", ")}], ${this.dtype}, device ${this.device}${this.disposed ? ", disposed" : ""})`;
  }

  #uploadRaw(raw: RawArray, op: string): void {
    check(native().weft_memcpy(this.pointerFor(op), raw, this.bytes, COPY_H2D, null), op);
  }

  /** Takes another runtime's tensor in this process, zero copy: `managed` is the address of a DLPack
   * DLManagedTensorVersioned (a legacy DLManagedTensor with `{ versioned: false }`) holding a dense,
   * row-major CUDA tensor of a weft dtype. The Tensor owes its producer the deleter call: dispose()
   * makes it. On an error nothing is taken (the caller still owns `managed`). */
  static fromDLPack(managed: number, opts: { versioned?: boolean } = {}): Tensor {
    const op = "Tensor.fromDLPack";
    if (!Number.isSafeInteger(managed) || managed <= 0) throw new ArgumentError(op, "managed", `must be the address of a DLPack managed tensor (got ${managed})`);
    const flags = opts.versioned === false ? 0 : DLPACK_VERSIONED;
    const buf = DlpackDesc.alloc();
    check(native().weft_dlpack_import(managed, flags, buf), op);
    const d = DlpackDesc.read(buf);
    if (d.device_type !== DLPACK_CUDA) {
      throw new ArgumentError(op, "managed", `holds memory of DLPack device type ${d.device_type} (${d.device_type === 1 ? "host memory" : "not CUDA"}): weft tensors are CUDA device memory`);
    }
    const shape = d.shape.slice(0, d.ndim).map(Number);
    const strides = d.strides.slice(0, d.ndim).map(Number);
    if (d.dtype < 0) {
      const code = d.dl_dtype & 0xff, bits = (d.dl_dtype >> 8) & 0xff, lanes = d.dl_dtype >>> 16;
      throw new UnsupportedError(`a tensor of DLPack dtype code ${code}, ${bits} bits, ${lanes} lane(s): weft takes ${Object.keys(DTYPES).join(", ")}`,
        { code: "E_UNSUPPORTED", op });
    }
    const dtype = (Object.keys(DTYPES) as DType[]).find((k) => DTYPES[k].code === d.dtype)!;
    checkShape(shape, op, "managed's shape");
    let step = 1;
    for (let i = shape.length - 1; i >= 0; i--) {
      if (shape[i]! > 1 && strides[i] !== step) {
        throw new ArgumentError(op, "managed", `has strides [${strides.join(", ")}] for shape [${shape.join(", ")}]: weft tensors are dense and row-major`);
      }
      step *= shape[i]!;
    }
    requireDevice(d.device_id, op, "managed's device");
    const t = new Tensor(Number(d.data), shape, dtype, d.device_id, false,
      "its producer's memory stays held until the process exits (the DLPack deleter was never called)");
    t.#dlpack = { managed, flags };
    return t;
  }

  /** This tensor as a DLPack DLManagedTensorVersioned (its address) for another runtime in this
   * process; the consumer calls its deleter when done. An owned tensor hands its memory over: this
   * Tensor is disposed and the deleter frees the memory. A view (Tensor.wrap, a symmetric tensor, a
   * DLPack import) is lent: keep what owns it alive until the consumer has called the deleter. */
  toDLPack(): number {
    const op = "Tensor.toDLPack";
    const data = this.pointerFor(op);
    const strides: number[] = [];
    let step = 1;
    for (let i = this.shape.length - 1; i >= 0; i--) {
      strides[i] = step;
      step *= this.shape[i]!;
    }
    const desc = DlpackDesc.write(DlpackDesc.alloc(), {
      data, device_type: DLPACK_CUDA, device_id: this.device, ndim: this.shape.length, dtype: DTYPES[this.dtype].code,
      shape: [...this.shape], strides,
    });
    const moves = this.owned && this.#dlpack === undefined;
    const out = new BigUint64Array(1);
    check(native().weft_dlpack_export(desc, DLPACK_VERSIONED | (moves ? DLPACK_FREE_DATA : 0), null, null, out), op);
    if (moves) this.abandon();
    return outPointer(out);
  }
}

const DLPACK_VERSIONED = 1;
const DLPACK_FREE_DATA = 2;
const DLPACK_CUDA = 2;

function allocRaw(dtype: DType, n: number): RawArray {
  switch (dtype) {
    case "bf16": case "f16": return new Uint16Array(n);
    case "f32": return new Float32Array(n);
    case "i32": return new Int32Array(n);
    case "u8": return new Uint8Array(n);
  }
}

/** Validates `data` against dtype and element count and returns the raw bits to copy. */
function toRaw(data: TensorData, dtype: DType, numel: number, op: string): RawArray {
  const length = (data as { length?: unknown })?.length;
  if (typeof length !== "number") throw new ArgumentError(op, "data", "must be a typed array or an array of numbers");
  if (length !== numel) throw new ArgumentError(op, "data", `has ${length} elements but the shape needs ${numel}`);
  if (Array.isArray(data)) {
    const arr = data as readonly unknown[];
    arr.forEach((v, i) => checkElement(dtype, v, op, `data[${i}]`));
    const nums = arr as readonly number[];
    switch (dtype) {
      case "bf16": return f32ToBf16(Float32Array.from(nums));
      case "f16": return f32ToF16(Float32Array.from(nums));
      case "f32": return Float32Array.from(nums);
      case "i32": return Int32Array.from(nums);
      case "u8": return Uint8Array.from(nums);
    }
  }
  const accepted: Record<DType, string[]> = {
    bf16: ["Float32Array", "Uint16Array"],
    f16: ["Float32Array", "Uint16Array"],
    f32: ["Float32Array"],
    i32: ["Int32Array"],
    u8: ["Uint8Array"],
  };
  const kind = (data as object).constructor?.name;
  if (!accepted[dtype].includes(kind)) {
    throw new ArgumentError(op, "data", `is a ${kind} but a ${dtype} tensor takes ${accepted[dtype].join(" or ")}`);
  }
  if (dtype === "bf16" && data instanceof Float32Array) return f32ToBf16(data);
  if (dtype === "f16" && data instanceof Float32Array) return f32ToF16(data);
  return data as RawArray;
}

const INT_RANGE: Partial<Record<DType, [number, number]>> = { i32: [-(2 ** 31), 2 ** 31 - 1], u8: [0, 255] };

/** Throws ArgumentError unless `v` is a value of `dtype` as written: any number for the float
 * dtypes (NaN and ±Inf included: they poison outputs), an integer in range for i32 and u8, which a
 * typed array would otherwise wrap (300 -> 44) or truncate (1.7 -> 1, NaN -> 0) without a word. */
function checkElement(dtype: DType, v: unknown, op: string, argument: string): void {
  if (typeof v !== "number") throw new ArgumentError(op, argument, `must be a number (got ${v === null ? "null" : typeof v})`);
  const range = INT_RANGE[dtype];
  if (range && !(Number.isInteger(v) && v >= range[0] && v <= range[1])) {
    throw new ArgumentError(op, argument, `must be an integer in [${range[0]}, ${range[1]}] for a ${dtype} tensor (got ${v})`);
  }
}
