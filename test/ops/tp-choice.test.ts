// The tensor-parallel cost model's choices, pinned (CPU, no GPU): every line of tp-choices.txt is a
// call on a described machine and the choice the cost model made for it before the picker
// (ffi/src/tp/picker.cpp) replaced choose(); weft_testing_tp_choose must make the same one, to the
// tile, the grid, the chunking and every workspace region. Then the placement rule of finding 5:
// ranks that share a GPU never get a copy-engine mover from "auto".
import { describe, expect, test } from "../support/test-api.ts";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import { TestingTpMachine, TpChoice, TpParams } from "../../lib/abi.ts";
import { native, outPointer, readCString } from "../../lib/native.ts";

const FIXTURE = join(import.meta.dirname, "tp-choices.txt");

interface Machine { world: number; nodes?: number; sms?: number; smBudget?: number; sharesDevice?: boolean }
interface Call { op: number; m: number; n: number; k: number; transB?: boolean; path?: number; mover?: number; commCtas?: number; tileN?: number; groupM?: number }

/** weft_testing_tp_choose's answer as one line: `error=<status>`, or the choice's fields and the
 * configuration beside it (the same text the fixture holds). */
function choose(machine: Machine, call: Call): string {
  const m = TestingTpMachine.write(TestingTpMachine.alloc(), {
    world: machine.world, rank: 0, sm_count: machine.sms ?? 132, sm_budget: machine.smBudget ?? 0, nodes: machine.nodes ?? 1,
    shares_device: machine.sharesDevice ? 1 : 0, slot_bytes: (machine.nodes ?? 1) > 1 ? 64 * 2 ** 20 : 0,
  });
  const p = TpParams.write(TpParams.alloc(), {
    op: call.op, flags: call.transB ? 1 : 0, m: call.m, n: call.n, k: call.k, path: call.path ?? 0, mover: call.mover ?? 0,
    comm_ctas: call.commCtas ?? 0, tile_n: call.tileN ?? 0, group_m: call.groupM ?? 0,
  });
  const out = TpChoice.alloc();
  const detail = new BigUint64Array(1);
  const status = native().weft_testing_tp_choose(m, p, out, detail);
  if (status !== 0) return `error=${status}`;
  const c = TpChoice.read(out);
  return `path=${c.path} mover=${c.mover} comm=${c.comm_ctas} gemm=${c.gemm_ctas} tile=${c.tile_n} group=${c.group_m} ` +
    `chunk=${c.path === 1 ? c.chunk_rows : 0} avail=${c.fused_available} ws=${c.workspace_bytes} ` +
    `fus=${c.predicted_fused_us.toFixed(6)} seq=${c.predicted_sequential_us.toFixed(6)}${readCString(outPointer(detail))}`;
}

/** key=value tokens (numbers compared within 1e-9 relative: the estimates are printed to 6 places). */
function tokens(line: string): { fields: Map<string, string>; reason: string } {
  const bar = line.indexOf("|");
  const head = bar < 0 ? line : line.slice(0, bar);
  const reason = bar < 0 ? "" : line.slice(bar + 1).trim();
  const fields = new Map<string, string>();
  for (const t of head.trim().split(/\s+/)) {
    const at = t.indexOf("=");
    fields.set(t.slice(0, at), t.slice(at + 1));
  }
  return { fields, reason };
}

function same(got: string, want: string): boolean {
  const g = tokens(got), w = tokens(want);
  if (g.reason !== w.reason || g.fields.size !== w.fields.size) return false;
  for (const [key, value] of w.fields) {
    const other = g.fields.get(key);
    if (other === undefined) return false;
    if (key === "fus" || key === "seq") {
      const a = Number(value), b = Number(other);
      if (Math.abs(a - b) > 1e-9 * Math.max(1, Math.abs(a)) + 5e-7) return false;
    } else if (value !== other) return false;
  }
  return true;
}

function parse(line: string): { machine: Machine; call: Call; want: string } {
  const [inputs, want] = line.split(" => ");
  const [op, m, n, k, world, nodes, transB, sms, smBudget, path, mover, commCtas, tileN, groupM] = inputs!.trim().split(/\s+/).map(Number);
  return {
    machine: { world: world!, nodes: nodes!, sms: sms!, smBudget: smBudget! },
    call: { op: op!, m: m!, n: n!, k: k!, transB: transB === 1, path: path!, mover: mover!, commCtas: commCtas!, tileN: tileN!, groupM: groupM! },
    want: want!.trim(),
  };
}

describe("tensor-parallel choices (CPU, weft_testing_tp_choose)", () => {
  const lines = readFileSync(FIXTURE, "utf8").split("\n").filter((l) => l && !l.startsWith("#"));

  test(`every one of ${lines.length} fixture calls gets the choice the cost model made before the picker`, () => {
    if (process.env.WEFT_WRITE_TP_CHOICES === "1") {
      const header = readFileSync(FIXTURE, "utf8").split("\n").filter((l) => l.startsWith("#"));
      const body = lines.map((l) => {
        const { machine, call } = parse(l);
        return `${l.split(" => ")[0]} => ${choose(machine, call)}`;
      });
      writeFileSync(FIXTURE, [...header, ...body, ""].join("\n"));
      return;
    }
    const wrong: string[] = [];
    for (const line of lines) {
      const { machine, call, want } = parse(line);
      const got = choose(machine, call);
      if (!same(got, want)) wrong.push(`${line.split(" => ")[0]}\n  want ${want}\n  got  ${got}`);
    }
    expect(wrong.slice(0, 5).join("\n")).toBe("");
    expect(wrong.length).toBe(0);
  });

  // Finding 5: two ranks on one GPU, each half the SMs. A copy between two buffers of one device runs
  // on its SMs, which both ranks' persistent kernels hold, so "auto" takes the CTA movers there.
  const large = [[16384, 8192, 8192], [8192, 12288, 4096], [12288, 8192, 4096], [24576, 4096, 4096], [12288, 12288, 8192]];
  for (const world of [2, 4]) {
    test(`world ${world} sharing one GPU: auto never takes a copy-engine mover, at every large shape of the deadlock report`, () => {
      const machine: Machine = { world, smBudget: Math.floor(132 / world), sharesDevice: true };
      for (const [m, n, k] of large) {
        for (const op of [0, 1, 2]) {
          // The CTA mover, or the sequential path where the cost model prefers it.
          const shared = tokens(choose(machine, { op, m: m!, n: n!, k: k! })).fields;
          expect(shared.get("mover")).toBe(shared.get("path") === "1" ? "1" : "3");
          // On separate GPUs the same call takes the copy engines (the rules the fixture pins).
          const apart = tokens(choose({ ...machine, sharesDevice: false }, { op, m: m!, n: n!, k: k! })).fields;
          expect(apart.get("mover")).toBe("2");
        }
      }
    });
  }

  test("world 2 sharing one GPU: a forced copy-engine mover leaves one of the rank's SMs free", () => {
    for (const op of [0, 1, 2]) {
      const call = { op, m: 16384, n: 8192, k: 8192, mover: 2 };
      const shared = tokens(choose({ world: 2, smBudget: 66, sharesDevice: true }, call)).fields;
      const apart = tokens(choose({ world: 2, smBudget: 66 }, call)).fields;
      expect(shared.get("mover")).toBe("2");
      expect(Number(shared.get("gemm"))).toBeLessThanOrEqual(65);
      expect(apart.get("gemm")).toBe("66");
    }
  });

  test("world 2 sharing one GPU: decode all-reduce still exchanges; the all-gather's commCtas still asks for CTAs", () => {
    const decode = tokens(choose({ world: 2, smBudget: 66, sharesDevice: true }, { op: 2, m: 128, n: 8192, k: 8192 })).fields;
    expect(decode.get("mover")).toBe("4");
    const ctas = tokens(choose({ world: 2, sharesDevice: true }, { op: 0, m: 8192, n: 8192, k: 8192, commCtas: 8 })).fields;
    expect(ctas.get("mover")).toBe("1");
    expect(ctas.get("comm")).toBe("8");
  });

  test("a described machine that is not one is refused", () => {
    expect(choose({ world: 0 }, { op: 0, m: 256, n: 256, k: 256 })).toBe("error=-1");
    expect(choose({ world: 2, sms: 0 }, { op: 0, m: 256, n: 256, k: 256 })).toBe("error=-1");
  });
});
