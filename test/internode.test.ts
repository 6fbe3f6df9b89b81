// The communicator across nodes: the node plan (CPU) and the hierarchical collectives through the
// proxy on the GPUs, with WEFT_NODE_ID set to the rank so that each GPU of this host is its own
// node (two bun processes, libfabric tcp;ofi_rxm unless WEFT_FABRIC_PROVIDER says otherwise).
import { describe, expect, test } from "bun:test";
import { join } from "node:path";

import { UnsupportedError } from "../lib/errors.ts";
import { planNodes } from "../lib/internode.ts";
import { check, native } from "../lib/native.ts";
import { describeGpu } from "./support/gpu.ts";
import { runCheckWorkers } from "./support/report-channel.ts";

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

describeGpu("hierarchical collectives, each GPU its own node (2 processes, proxy + libfabric)", 2, () => {
  test("every check passes on both ranks", async () => {
    const worker = join(import.meta.dir, "support", "internode-worker.ts");
    const provider = process.env.WEFT_FABRIC_PROVIDER ?? "tcp;ofi_rxm";
    console.log(`  provider requested: ${provider}`);
    const { failed, exits, reported } = await runCheckWorkers(worker, 2, (rank) => ({ WEFT_FABRIC_PROVIDER: provider, WEFT_NODE_ID: `node${rank}` }));
    expect(failed).toEqual([]);
    expect(exits).toEqual([0, 0]);
    expect(reported.every((n) => n >= 10)).toBe(true);
  }, 300_000);
});
