// dtype.ts — element types, their native codes (WeftDtype in weft.h), and the bf16/f16 <-> f32
// conversions. JS has no bf16: tensors take Float32Array (rounded to nearest even here) or raw
// Uint16Array bits, and give the same back.

export type DType = "bf16" | "f16" | "f32" | "i32" | "u8";

export interface DTypeInfo {
  readonly name: DType;
  /** WeftDtype value in weft.h. */
  readonly code: number;
  readonly bytes: number;
  readonly float: boolean;
}

export const DTYPES: Readonly<Record<DType, DTypeInfo>> = {
  bf16: { name: "bf16", code: 0, bytes: 2, float: true },
  f16: { name: "f16", code: 1, bytes: 2, float: true },
  f32: { name: "f32", code: 2, bytes: 4, float: true },
  i32: { name: "i32", code: 3, bytes: 4, float: false },
  u8: { name: "u8", code: 4, bytes: 1, float: false },
};

export function isDType(x: unknown): x is DType {
  return typeof x === "string" && Object.hasOwn(DTYPES, x);
}

/** The typed array a dtype's raw bits live in. */
export type RawArray = Uint16Array | Float32Array | Int32Array | Uint8Array;
/** What a tensor accepts on upload: raw bits, or Float32Array for the 16-bit floats. */
export type HostArray = RawArray;

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** f32 -> bf16 bits, round to nearest even. NaN stays NaN (quieted, sign kept), ±Inf stays ±Inf,
 * subnormals round like any other value. */
export function f32ToBf16(src: Float32Array, dst = new Uint16Array(src.length)): Uint16Array {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < bits.length; i++) {
    const u = bits[i]!;
    if ((u & 0x7fffffff) > 0x7f800000) dst[i] = (u >>> 16) | 0x0040;
    else dst[i] = (u + 0x7fff + ((u >>> 16) & 1)) >>> 16;
  }
  return dst;
}

export function bf16ToF32(src: Uint16Array, dst = new Float32Array(src.length)): Float32Array {
  const bits = new Uint32Array(dst.buffer, dst.byteOffset, dst.length);
  for (let i = 0; i < src.length; i++) bits[i] = src[i]! << 16;
  return dst;
}

/** One f32 value -> f16 bits, round to nearest even, with subnormals and overflow to ±Inf. */
export function f32ToF16Bits(x: number): number {
  f32[0] = x;
  return f32BitsToF16(u32[0]!);
}

/** f32 bit pattern -> f16 bits. Works on bits so that NaN sign and payload survive (a NaN that
 * passes through a JS number is canonicalized). */
function f32BitsToF16(u: number): number {
  const sign = (u >>> 16) & 0x8000;
  const a = u & 0x7fffffff;
  if (a > 0x7f800000) return sign | 0x7e00 | ((a >>> 13) & 0x3ff); // NaN, quiet bit set
  if (a >= 0x477ff000) return sign | 0x7c00; // >= 65520 rounds to Inf (and Inf itself)
  if (a >= 0x38800000) {
    // Normal in f16: re-bias the exponent by (127 - 15) and round the 13 dropped bits.
    const v = a - 0x38000000;
    return sign | ((v + 0xfff + ((v >>> 13) & 1)) >>> 13);
  }
  if (a <= 0x33000000) return sign; // <= 2^-25: rounds (ties to even) to zero
  // Subnormal in f16: value = m * 2^-24, m = round(mantissa * 2^(exp - 126)).
  const exp = a >>> 23;
  const mant = (a & 0x7fffff) | 0x800000;
  const shift = 126 - exp;
  let m = mant >>> shift;
  const rem = mant & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  if (rem > half || (rem === half && (m & 1) === 1)) m++;
  return sign | m;
}

export function f16BitsToF32(h: number): number {
  u32[0] = f16BitsToF32Bits(h);
  return f32[0]!;
}

/** f16 bits -> f32 bits; exact for every value (subnormals become f32 normals). */
function f16BitsToF32Bits(h: number): number {
  const sign = (h & 0x8000) << 16;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 31) return (sign | 0x7f800000 | (m << 13)) >>> 0;
  if (e !== 0) return (sign | ((e + 112) << 23) | (m << 13)) >>> 0;
  if (m === 0) return sign >>> 0;
  let shift = 0;
  let mm = m;
  while ((mm & 0x400) === 0) {
    mm <<= 1;
    shift++;
  }
  return (sign | ((113 - shift) << 23) | ((mm & 0x3ff) << 13)) >>> 0;
}

export function f32ToF16(src: Float32Array, dst = new Uint16Array(src.length)): Uint16Array {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < bits.length; i++) dst[i] = f32BitsToF16(bits[i]!);
  return dst;
}

export function f16ToF32(src: Uint16Array, dst = new Float32Array(src.length)): Float32Array {
  const bits = new Uint32Array(dst.buffer, dst.byteOffset, dst.length);
  for (let i = 0; i < src.length; i++) bits[i] = f16BitsToF32Bits(src[i]!);
  return dst;
}

/** The bit pattern of one value of `dtype`, for fills (NaN poison included). */
export function scalarBits(dtype: DType, value: number): bigint {
  switch (dtype) {
    case "bf16":
      return BigInt(f32ToBf16(Float32Array.of(value))[0]!);
    case "f16":
      return BigInt(f32ToF16Bits(value));
    case "f32":
      f32[0] = value;
      return BigInt(u32[0]!);
    case "i32":
      return BigInt(value | 0) & 0xffffffffn;
    case "u8":
      return BigInt(value & 0xff);
  }
}
