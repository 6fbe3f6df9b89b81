// struct.ts — C struct layouts for ABI structs, computed the way a C compiler lays them out
// (natural alignment, tail padding). test/abi.test.ts compares every offset with weft_abi_layout().

type Scalar = "u8" | "i32" | "u32" | "i64" | "u64" | "f32" | "f64" | "ptr";
export type FieldType = Scalar | { char: number } | { array: Scalar; length: number };

const scalarSize: Record<Scalar, number> = {
  u8: 1, i32: 4, u32: 4, i64: 8, u64: 8, f32: 4, f64: 8, ptr: 8,
};

type FieldValue<T extends FieldType> = T extends "i64" | "u64" ? bigint | number
  : T extends Scalar ? number
  : T extends { char: number } ? string
  : (number | bigint)[];

export type StructValues<F extends Record<string, FieldType>> = { [K in keyof F]: FieldValue<F[K]> };

function sizeAlign(t: FieldType): [number, number] {
  if (typeof t === "string") return [scalarSize[t], scalarSize[t]];
  if ("char" in t) return [t.char, 1];
  return [scalarSize[t.array] * t.length, scalarSize[t.array]];
}

export class Struct<F extends Record<string, FieldType>> {
  readonly name: string;
  readonly fields: F;
  readonly offsets: Readonly<Record<keyof F, number>>;
  readonly size: number;
  /** The version the C side reads (its _INIT's); alloc() writes it. */
  readonly version: number;

  constructor(name: string, fields: F, options: { version?: number } = {}) {
    this.name = name;
    this.fields = fields;
    this.version = options.version ?? 1;
    let offset = 0;
    let maxAlign = 1;
    const offsets = {} as Record<keyof F, number>;
    for (const [k, t] of Object.entries(fields) as [keyof F, FieldType][]) {
      const [size, align] = sizeAlign(t);
      offset = Math.ceil(offset / align) * align;
      offsets[k] = offset;
      offset += size;
      maxAlign = Math.max(maxAlign, align);
    }
    this.offsets = offsets;
    this.size = Math.ceil(offset / maxAlign) * maxAlign;
  }

  /** A zeroed buffer of this struct's size; `size` and `version` fields are filled when present. */
  alloc(version = this.version): Uint8Array {
    const buf = new Uint8Array(this.size);
    const dv = new DataView(buf.buffer);
    if ("size" in this.offsets) dv.setUint32(this.offsets["size" as keyof F], this.size, true);
    if ("version" in this.offsets) dv.setUint32(this.offsets["version" as keyof F], version, true);
    return buf;
  }

  write(buf: Uint8Array, values: Partial<StructValues<F>>): Uint8Array {
    const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    for (const [k, v] of Object.entries(values) as [keyof F, unknown][]) {
      const t = this.fields[k];
      if (t === undefined) throw new Error(`${this.name} has no field ${String(k)}`);
      const at = this.offsets[k];
      if (typeof t === "string") setScalar(dv, at, t, v as number | bigint);
      else if ("char" in t) {
        const bytes = new TextEncoder().encode(v as string);
        buf.fill(0, at, at + t.char);
        buf.set(bytes.subarray(0, t.char - 1), at);
      } else {
        const arr = v as (number | bigint)[];
        for (let i = 0; i < t.length; i++) setScalar(dv, at + i * scalarSize[t.array], t.array, arr[i] ?? 0);
      }
    }
    return buf;
  }

  read(buf: Uint8Array): StructValues<F> {
    const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    const out = {} as Record<keyof F, unknown>;
    for (const [k, t] of Object.entries(this.fields) as [keyof F, FieldType][]) {
      const at = this.offsets[k];
      if (typeof t === "string") out[k] = getScalar(dv, at, t);
      else if ("char" in t) {
        const raw = buf.subarray(at, at + t.char);
        const end = raw.indexOf(0);
        out[k] = new TextDecoder().decode(end < 0 ? raw : raw.subarray(0, end));
      } else {
        out[k] = Array.from({ length: t.length }, (_, i) => getScalar(dv, at + i * scalarSize[t.array], t.array));
      }
    }
    return out as StructValues<F>;
  }
}

function setScalar(dv: DataView, at: number, t: Scalar, v: number | bigint): void {
  switch (t) {
    case "u8": dv.setUint8(at, Number(v)); break;
    case "i32": dv.setInt32(at, Number(v), true); break;
    case "u32": dv.setUint32(at, Number(v), true); break;
    case "i64": dv.setBigInt64(at, BigInt(v), true); break;
    case "u64": case "ptr": dv.setBigUint64(at, BigInt(v), true); break;
    case "f32": dv.setFloat32(at, Number(v), true); break;
    case "f64": dv.setFloat64(at, Number(v), true); break;
  }
}

function getScalar(dv: DataView, at: number, t: Scalar): number | bigint {
  switch (t) {
    case "u8": return dv.getUint8(at);
    case "i32": return dv.getInt32(at, true);
    case "u32": return dv.getUint32(at, true);
    case "i64": return dv.getBigInt64(at, true);
    case "u64": return dv.getBigUint64(at, true);
    case "ptr": return Number(dv.getBigUint64(at, true));
    case "f32": return dv.getFloat32(at, true);
    case "f64": return dv.getFloat64(at, true);
  }
}
