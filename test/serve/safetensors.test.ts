// The safetensors reader and writer (examples/serve/safetensors.ts) on files the test writes itself,
// the model-file layout the decoder loads, and the configs. CPU only.
import { afterAll, beforeAll, describe, expect, onlyUnderBun, test } from "../support/test-api.ts";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { ConfigError, fromHuggingFace, PRESETS, shardOf, validateConfig } from "../../examples/serve/config.ts";
import { SafetensorsError, SafetensorsFile, writeSafetensors } from "../../examples/serve/safetensors.ts";
import { checkpointShapes } from "../../examples/serve/weights.ts";
import { bf16ToF32, f32ToBf16, f32ToF16 } from "../../lib/dtype.ts";
import { randomHostModel, writeHostModel } from "../support/llama-reference.ts";

onlyUnderBun("examples/serve/safetensors.ts reads through Bun.file, by its issue's spec");

let dir = "";
beforeAll(() => void (dir = mkdtempSync(join(tmpdir(), "weft-safetensors-"))));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A file with a hand-made header, for the malformed cases. */
async function rawFile(name: string, header: unknown, data = new Uint8Array(16), headerLength?: bigint): Promise<string> {
  const json = new TextEncoder().encode(typeof header === "string" ? header : JSON.stringify(header));
  const head = new Uint8Array(8);
  new DataView(head.buffer).setBigUint64(0, headerLength ?? BigInt(json.length), true);
  const path = join(dir, name);
  writeFileSync(path, Buffer.concat([head, json, data]));
  return path;
}

async function openError(path: string): Promise<string> {
  try {
    await SafetensorsFile.open(path);
  } catch (e) {
    expect(e).toBeInstanceOf(SafetensorsError);
    return (e as Error).message;
  }
  throw new Error("expected a SafetensorsError");
}

describe("safetensors", () => {
  test("written and read back: dtypes, shapes, bytes, metadata; F16 and F32 come back as bf16", async () => {
    const path = join(dir, "roundtrip.safetensors");
    const a = Float32Array.from({ length: 12 }, (_, i) => i * 0.25 - 1);
    const bits = f32ToBf16(a);
    await writeSafetensors(path, {
      "w.bf16": { dtype: "BF16", shape: [3, 4], data: bits },
      "w.f32": { dtype: "F32", shape: [12], data: a },
      "w.f16": { dtype: "F16", shape: [2, 6], data: f32ToF16(a) },
      "ids": { dtype: "I32", shape: [2], data: Int32Array.from([7, -1]) },
    }, { format: "pt", "weft.config": "{}" });
    const f = await SafetensorsFile.open(path);
    expect([...f.entries.keys()]).toEqual(["w.bf16", "w.f32", "w.f16", "ids"]);
    expect(f.entry("w.bf16")).toMatchObject({ dtype: "BF16", shape: [3, 4] });
    expect(f.metadata).toEqual({ format: "pt", "weft.config": "{}" });
    expect(Array.from(await f.bf16("w.bf16", [3, 4]))).toEqual(Array.from(bits));
    expect(Array.from(await f.bf16("w.f32"))).toEqual(Array.from(bits));
    expect(Array.from(await f.f32("w.f16"))).toEqual(Array.from(bf16ToF32(bits)));
    expect(Array.from(new Int32Array(await f.bytes("ids")))).toEqual([7, -1]);
    // The data section starts on an 8-byte boundary.
    expect((f.entry("w.bf16").begin) % 8).toBe(0);
    await expect(f.bf16("w.bf16", [4, 3])).rejects.toThrow(/\[3, 4\] but the model config needs \[4, 3\]/);
    await expect(f.bf16("ids")).rejects.toThrow(/I32; a weight must be BF16, F16 or F32/);
    expect(() => f.entry("missing")).toThrow(/no tensor 'missing'/);
  });

  test("malformed files are refused before any tensor is read, with the reason", async () => {
    expect(await openError(join(dir, "nope.safetensors"))).toContain("no such file");
    writeFileSync(join(dir, "short.safetensors"), new Uint8Array(5));
    expect(await openError(join(dir, "short.safetensors"))).toContain("shorter than the 8-byte header length");
    expect(await openError(await rawFile("huge.safetensors", {}, undefined, 1n << 40n))).toContain("header length");
    expect(await openError(await rawFile("past.safetensors", {}, new Uint8Array(0), 1000n))).toContain("runs past the end");
    expect(await openError(await rawFile("notjson.safetensors", "{nope"))).toContain("not JSON");
    expect(await openError(await rawFile("array.safetensors", "[1]"))).toContain("not a JSON object");
    expect(await openError(await rawFile("dtype.safetensors", { t: { dtype: "Q4", shape: [1], data_offsets: [0, 1] } }))).toContain('dtype "Q4"');
    expect(await openError(await rawFile("shape.safetensors", { t: { dtype: "F32", shape: [-1], data_offsets: [0, 4] } }))).toContain("shape");
    expect(await openError(await rawFile("size.safetensors", { t: { dtype: "F32", shape: [3], data_offsets: [0, 8] } }))).toContain("12 bytes but its offsets span 8");
    expect(await openError(await rawFile("beyond.safetensors", { t: { dtype: "F32", shape: [8], data_offsets: [0, 32] } }))).toContain("past the end");
    expect(await openError(await rawFile("overlap.safetensors", {
      a: { dtype: "F32", shape: [2], data_offsets: [0, 8] }, b: { dtype: "F32", shape: [2], data_offsets: [4, 12] },
    }))).toContain("overlap");
    expect(await openError(await rawFile("meta.safetensors", { __metadata__: { a: 1 } }))).toContain("__metadata__");
  });

  test("a tiny Llama model file has every Hugging Face name at its shape", async () => {
    const cfg = PRESETS.tiny!;
    const path = join(dir, "tiny.safetensors");
    await writeHostModel(path, cfg, randomHostModel(cfg, 1));
    const f = await SafetensorsFile.open(path);
    const shapes = checkpointShapes(cfg);
    expect(f.entries.size).toBe(Object.keys(shapes).length);
    for (const [name, shape] of Object.entries(shapes)) expect(f.entry(name).shape).toEqual(shape);
    expect(JSON.parse(f.metadata["weft.config"]!)).toEqual(cfg);
    expect(shapes["model.layers.1.self_attn.k_proj.weight"]).toEqual([128, 128]);  // kv heads 2 x head dim 64, hidden 128
  });
});

describe("model configs", () => {
  test("presets split over their ranks; bad splits name the field", () => {
    for (const [name, c] of Object.entries(PRESETS)) expect(validateConfig(c, 2)).toBe(c), void name;
    expect(() => validateConfig(PRESETS.tiny!, 4)).toThrow(ConfigError);
    expect(() => validateConfig(PRESETS.tiny!, 4)).toThrow(/kvHeads \(2\) must split evenly over 4 ranks/);
    expect(() => validateConfig({ ...PRESETS.tiny!, vocab: 200 }, 1)).toThrow(/vocab \(200\)/);
    expect(() => validateConfig({ ...PRESETS.tiny!, headDim: 40 }, 1)).toThrow(/headDim \(40\)/);
    expect(() => validateConfig({ ...PRESETS.tiny!, intermediate: 260 }, 2)).toThrow(/intermediate \(260\)/);
    expect(shardOf(PRESETS["llama-8b"]!, 2)).toMatchObject({ hq: 16, hkv: 4, qkv: 3072, attn: 2048, inter: 7168, vocabPadded: 128256 });
  });

  test("a Hugging Face config.json", () => {
    const c = fromHuggingFace({
      hidden_size: 2048, num_hidden_layers: 16, num_attention_heads: 32, num_key_value_heads: 8, intermediate_size: 8192,
      vocab_size: 128256, rms_norm_eps: 1e-5, rope_theta: 500000, tie_word_embeddings: true,
    });
    expect(c).toEqual(PRESETS["llama-1b"]!);
    expect(() => fromHuggingFace({ hidden_size: 8 })).toThrow(/num_attention_heads/);
  });
});
