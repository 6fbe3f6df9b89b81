// Every ABI struct's TS packing against the C compiler's layout, every struct's _INIT, and every enum
// and constant of weft.h against the TS mirrors lib/ reads (weft_abi_layout).
import { expect, test } from "./support/test-api.ts";

import { ABI_ENUMS, ABI_STRUCTS } from "../lib/abi.ts";
import { ALGORITHMS, Kind as collectiveKind } from "../lib/comm/collectives.ts";
import { DTYPES } from "../lib/dtype.ts";
import { Status } from "../lib/errors.ts";
import { ABI_VERSION, check, native, outPointer, readCString } from "../lib/native.ts";
// (moe-gemm before moe: entered first, moe.ts would meet comm.ts -> moe-gemm.ts -> moe.ts mid-cycle)
import { MOVERS as MOE_MOVERS } from "../lib/ops/moe-gemm-validate.ts";
import { FLAG_SWIGLU, FLAG_W_NK, MOVER_NAMES as MOE_MOVER_NAMES } from "../lib/ops/moe-gemm.ts";
import { FLAG_NORMALIZE } from "../lib/ops/moe.ts";
import { LAYOUTS as RING_LAYOUTS, MOVER_NAMES as RING_MOVER_NAMES, MOVERS as RING_MOVERS } from "../lib/ops/ring-attention.ts";
import { ENGINE_STAGE } from "../lib/ops/tp.ts";
import { FLAG_B_NK, MOVER_NAMES, MOVERS, OPS, PATHS } from "../lib/ops/tp-validation.ts";

interface CLayout {
  structs: Record<string, { sizeof: number; init: { size: number; version: number }; fields: Record<string, number> }>;
  enums: Record<string, Record<string, number>>;
}

let cached: CLayout | undefined;
function cLayout(): CLayout {
  if (!cached) {
    const out = new BigUint64Array(1);
    check(native().weft_abi_layout(out), "weft_abi_layout");
    cached = JSON.parse(readCString(outPointer(out))) as CLayout;
  }
  return cached;
}

test("C publishes a layout for every TS ABI struct and no others", () => {
  expect(Object.keys(cLayout().structs).sort()).toEqual(ABI_STRUCTS.map((s) => s.name).sort());
});

for (const s of ABI_STRUCTS) {
  test(`${s.name}: sizeof and every offsetof match C; its _INIT sets size and the version TS writes`, () => {
    const c = cLayout().structs[s.name]!;
    expect(s.size).toBe(c.sizeof);
    expect({ ...s.offsets }).toEqual(c.fields);
    expect(c.init).toEqual({ size: c.sizeof, version: s.version });
    const offsets = s.offsets as Record<string, number>;
    if (offsets.version !== undefined) expect(new DataView(s.alloc().buffer).getUint32(offsets.version, true)).toBe(c.init.version);
  });
}

test("C publishes every enum group TS mirrors and no others, value for value", () => {
  expect(Object.keys(cLayout().enums).sort()).toEqual(Object.keys(ABI_ENUMS).sort());
  for (const [name, values] of Object.entries(ABI_ENUMS)) expect({ name, values: { ...values } }).toEqual({ name, values: cLayout().enums[name]! });
});

/** A friendlier TS table (keyed by lib's names) against a C group, through the name each key stands for. */
function mirrors(group: string, table: Record<string, number>, cName: (key: string) => string): void {
  const c = cLayout().enums[group]!;
  for (const [key, value] of Object.entries(table)) expect({ group, key, value }).toEqual({ group, key, value: c[cName(key)]! });
}

const snake = (s: string) => s.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase();

test("lib's own tables agree with weft.h: status codes, dtypes, tensor-parallel ops, paths, movers, stages, flags", () => {
  mirrors("WeftStatus", Status, (k) => `WEFT_${k}`);
  mirrors("WeftDtype", Object.fromEntries(Object.values(DTYPES).map((d) => [d.name, d.code])), (k) => `WEFT_${k.toUpperCase()}`);
  mirrors("WeftTpOp", OPS, (k) => `WEFT_TP_${snake(k)}`);
  mirrors("WeftTpPath", PATHS, (k) => `WEFT_TP_PATH_${k.toUpperCase()}`);
  mirrors("WeftTpMover", MOVERS, (k) => `WEFT_TP_MOVER_${snake(k)}`);
  MOVER_NAMES.forEach((name, code) => {
    const c = cLayout().enums.WeftTpMover!;
    const cName = name === "none" ? (code === c.WEFT_TP_MOVER_NONE ? "WEFT_TP_MOVER_NONE" : undefined) : `WEFT_TP_MOVER_${snake(name)}`;
    if (cName) expect({ name, code }).toEqual({ name, code: c[cName]! });
  });
  mirrors("WeftGemmFlags", { B_NK: FLAG_B_NK }, (k) => `WEFT_GEMM_${k}`);
  mirrors("WeftGemmStage", Object.fromEntries(Object.keys(ENGINE_STAGE).map((code) => [String(code), Number(code)])),
    (k) => Object.entries(cLayout().enums.WeftGemmStage!).find(([, v]) => v === Number(k))?.[0] ?? "missing");
  mirrors("WeftCollectiveKind", collectiveKind, (k) => `WEFT_${snake(k)}`);
  mirrors("WeftAlgorithm", ALGORITHMS, (k) => `WEFT_ALGO_${k.toUpperCase()}`);
  mirrors("WeftMoeFlags", { NORMALIZE: FLAG_NORMALIZE }, (k) => `WEFT_MOE_${k}`);
  expect(cLayout().enums.WeftAbi!.WEFT_ABI_VERSION).toBe(ABI_VERSION);
});

test("lib's own tables agree with weft.h: MoE expert GEMMs, ring attention (flags, movers and their names, layouts)", () => {
  mirrors("WeftMoeExpertFlags", { W_NK: FLAG_W_NK, SWIGLU: FLAG_SWIGLU }, (k) => `WEFT_MOE_${k}`);
  mirrors("WeftMoeMover", MOE_MOVERS, (k) => `WEFT_MOE_MOVER_${k.toUpperCase()}`);
  mirrors("WeftMoeMover", Object.fromEntries(MOE_MOVER_NAMES.map((name, code) => [name, code])), (k) => `WEFT_MOE_MOVER_${k.toUpperCase()}`);
  mirrors("WeftRingLayout", RING_LAYOUTS, (k) => `WEFT_RING_${k.toUpperCase()}`);
  mirrors("WeftRingMover", RING_MOVERS, (k) => `WEFT_RING_MOVER_${snake(k)}`);
  // Code 0 (AUTO) names no mover: a world of one has none.
  mirrors("WeftRingMover", Object.fromEntries(RING_MOVER_NAMES.map((name, code) => [name, code]).slice(1)), (k) => `WEFT_RING_MOVER_${snake(k)}`);
});
