// safetensors.ts — reads and writes the safetensors format (huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets":
// [begin, end]}, "__metadata__": {string: string}}, then the tensors' bytes, offsets relative to the
// end of the header. The header is checked before any tensor is read: known dtypes, whole shapes,
// offsets inside the file that match the shape and do not overlap.
import { bf16ToF32, f16ToF32, f32ToBf16 } from "../../lib/dtype.ts";

export type SafetensorsDtype = "BF16" | "F16" | "F32" | "F64" | "I32" | "I64" | "U8" | "I8" | "BOOL";

const DTYPE_BYTES: Record<SafetensorsDtype, number> = { BF16: 2, F16: 2, F32: 4, F64: 8, I32: 4, I64: 8, U8: 1, I8: 1, BOOL: 1 };
/** Headers larger than this are refused (the reference implementation's limit is 100 MB). */
const MAX_HEADER_BYTES = 100_000_000;

export interface SafetensorsEntry {
  name: string;
  dtype: SafetensorsDtype;
  shape: number[];
  /** Absolute byte range in the file. */
  begin: number;
  end: number;
}

export class SafetensorsError extends Error {}

export class SafetensorsFile {
  readonly path: string;
  readonly entries: ReadonlyMap<string, SafetensorsEntry>;
  readonly metadata: Readonly<Record<string, string>>;

  private constructor(path: string, entries: Map<string, SafetensorsEntry>, metadata: Record<string, string>) {
    this.path = path;
    this.entries = entries;
    this.metadata = metadata;
  }

  static async open(path: string): Promise<SafetensorsFile> {
    const file = Bun.file(path);
    if (!(await file.exists())) throw new SafetensorsError(`${path}: no such file`);
    const size = file.size;
    const fail = (why: string): never => {
      throw new SafetensorsError(`${path}: not a valid safetensors file: ${why}`);
    };
    if (size < 8) fail(`${size} bytes, shorter than the 8-byte header length`);
    const n = new DataView(await file.slice(0, 8).arrayBuffer()).getBigUint64(0, true);
    if (n === 0n || n > BigInt(MAX_HEADER_BYTES)) fail(`header length ${n} (must be 1 .. ${MAX_HEADER_BYTES})`);
    const headerBytes = Number(n);
    if (8 + headerBytes > size) fail(`header length ${headerBytes} runs past the end of the ${size}-byte file`);
    let header: unknown;
    try {
      header = JSON.parse(await file.slice(8, 8 + headerBytes).text());
    } catch (e) {
      fail(`the header is not JSON (${(e as Error).message})`);
    }
    if (header === null || typeof header !== "object" || Array.isArray(header)) fail("the header is not a JSON object");
    const dataStart = 8 + headerBytes;
    const entries = new Map<string, SafetensorsEntry>();
    let metadata: Record<string, string> = {};
    for (const [name, raw] of Object.entries(header as Record<string, unknown>)) {
      if (name === "__metadata__") {
        if (raw === null || typeof raw !== "object" || Object.values(raw).some((v) => typeof v !== "string")) {
          fail("__metadata__ must map strings to strings");
        }
        metadata = raw as Record<string, string>;
        continue;
      }
      const e = raw as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
      if (e === null || typeof e !== "object") fail(`tensor '${name}' is not an object`);
      if (typeof e.dtype !== "string" || !(e.dtype in DTYPE_BYTES)) fail(`tensor '${name}' has dtype ${JSON.stringify(e.dtype)}`);
      if (!Array.isArray(e.shape) || !e.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) fail(`tensor '${name}' has shape ${JSON.stringify(e.shape)}`);
      const off = e.data_offsets;
      if (!Array.isArray(off) || off.length !== 2 || !off.every((o) => Number.isSafeInteger(o) && o >= 0) || off[0] > off[1]) {
        fail(`tensor '${name}' has data_offsets ${JSON.stringify(off)}`);
      }
      const dtype = e.dtype as SafetensorsDtype;
      const shape = e.shape as number[];
      const bytes = shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[dtype];
      const [b0, b1] = off as [number, number];
      if (b1 - b0 !== bytes) fail(`tensor '${name}' is ${dtype} [${shape.join(", ")}] = ${bytes} bytes but its offsets span ${b1 - b0}`);
      if (dataStart + b1 > size) fail(`tensor '${name}' ends at byte ${dataStart + b1}, past the end of the ${size}-byte file`);
      entries.set(name, { name, dtype, shape, begin: dataStart + b0, end: dataStart + b1 });
    }
    const sorted = [...entries.values()].sort((a, b) => a.begin - b.begin);
    for (let i = 1; i < sorted.length; i++) {
      if (sorted[i]!.begin < sorted[i - 1]!.end) fail(`tensors '${sorted[i - 1]!.name}' and '${sorted[i]!.name}' overlap`);
    }
    return new SafetensorsFile(path, entries, metadata);
  }

  entry(name: string): SafetensorsEntry {
    const e = this.entries.get(name);
    if (!e) throw new SafetensorsError(`${this.path}: no tensor '${name}'`);
    return e;
  }

  /** The raw bytes of one tensor. */
  async bytes(name: string): Promise<ArrayBuffer> {
    const e = this.entry(name);
    return Bun.file(this.path).slice(e.begin, e.end).arrayBuffer();
  }

  /** One floating-point tensor as bf16 bits (BF16 as stored; F16 and F32 rounded to nearest even). */
  async bf16(name: string, shape?: readonly number[]): Promise<Uint16Array> {
    const e = this.entry(name);
    if (shape && (shape.length !== e.shape.length || shape.some((d, i) => d !== e.shape[i]))) {
      throw new SafetensorsError(`${this.path}: tensor '${name}' is [${e.shape.join(", ")}] but the model config needs [${shape.join(", ")}]`);
    }
    const buf = await this.bytes(name);
    switch (e.dtype) {
      case "BF16": return new Uint16Array(buf);
      case "F16": return f32ToBf16(f16ToF32(new Uint16Array(buf)));
      case "F32": return f32ToBf16(new Float32Array(buf));
      default: throw new SafetensorsError(`${this.path}: tensor '${name}' is ${e.dtype}; a weight must be BF16, F16 or F32`);
    }
  }

  /** One floating-point tensor as fp32. */
  async f32(name: string): Promise<Float32Array> {
    return bf16ToF32(await this.bf16(name));
  }
}

export interface TensorToWrite {
  dtype: SafetensorsDtype;
  shape: number[];
  /** Raw little-endian bytes of the elements (e.g. a Uint16Array of bf16 bits). */
  data: ArrayBufferView;
}

/** Writes a safetensors file (tensors in the order given, header padded to 8 bytes). */
export async function writeSafetensors(path: string, tensors: Record<string, TensorToWrite>, metadata?: Record<string, string>): Promise<void> {
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const bytes = t.shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[t.dtype];
    if (t.data.byteLength !== bytes) throw new SafetensorsError(`writeSafetensors: '${name}' has ${t.data.byteLength} bytes but ${t.dtype} [${t.shape.join(", ")}] needs ${bytes}`);
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  const raw = new TextEncoder().encode(JSON.stringify(header));
  const padded = raw.length + ((8 - ((8 + raw.length) % 8)) % 8);
  const head = new Uint8Array(8 + padded).fill(0x20);  // JSON may end in spaces
  new DataView(head.buffer).setBigUint64(0, BigInt(padded), true);
  head.set(raw, 8);
  const parts: ArrayBufferView[] = [head, ...Object.values(tensors).map((t) => new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength))];
  await Bun.write(path, new Blob(parts as unknown as ArrayBuffer[]));
}
