// The node plan: which rank is on which node, from the node ids the ranks report (lib/comm/
// node-plan.ts), and the staging each rank needs between nodes. CPU only.
import { describe, expect, test } from "../support/test-api.ts";

import { planNodes } from "../../lib/comm/node-plan.ts";
import { UnsupportedError } from "../../lib/errors.ts";
import { check, native } from "../../lib/native.ts";

describe("node plan (which rank is on which node)", () => {
  test("one node: local rank and size are the rank and the world", () => {
    expect(planNodes(["a", "a", "a"], 2)).toEqual({ node: 0, nodes: 1, localRank: 2, localSize: 3 });
  });

  test("node-major ranks: nodes numbered by their lowest rank, local rank within the node", () => {
    const ids = ["x", "x", "y", "y", "z", "z"];
    expect(ids.map((_, r) => planNodes(ids, r))).toEqual([
      { node: 0, nodes: 3, localRank: 0, localSize: 2 }, { node: 0, nodes: 3, localRank: 1, localSize: 2 },
      { node: 1, nodes: 3, localRank: 0, localSize: 2 }, { node: 1, nodes: 3, localRank: 1, localSize: 2 },
      { node: 2, nodes: 3, localRank: 0, localSize: 2 }, { node: 2, nodes: 3, localRank: 1, localSize: 2 },
    ]);
    expect(planNodes(["0", "1"], 1)).toEqual({ node: 1, nodes: 2, localRank: 0, localSize: 1 });
  });

  test("uneven nodes or interleaved ranks are UnsupportedError naming the rule", () => {
    expect(() => planNodes(["a", "a", "b"], 0)).toThrow(UnsupportedError);
    expect(() => planNodes(["a", "a", "b"], 0)).toThrow(/same number of ranks/);
    expect(() => planNodes(["a", "b", "a", "b"], 0)).toThrow(/node-major/);
  });

  test("staging sizes: validated, 4 KiB of signals then 2 parities x nodes slots", () => {
    const out = new BigUint64Array(2);
    check(native().weft_comm_internode_bytes(2, 1 << 20, out.subarray(0, 1), out.subarray(1, 2)), "test");
    expect([Number(out[0]), Number(out[1])]).toEqual([4 << 20, 4096 + (4 << 20)]);
    expect(() => check(native().weft_comm_internode_bytes(1, 1 << 20, out.subarray(0, 1), out.subarray(1, 2)), "test")).toThrow(/nodes must be >= 2/);
    expect(() => check(native().weft_comm_internode_bytes(2, 100, out.subarray(0, 1), out.subarray(1, 2)), "test")).toThrow(/multiple of 256/);
  });
});
