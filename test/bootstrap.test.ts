// The bootstrap store between real processes (one bun process per rank), the in-process store,
// and reading the launcher's environment. CPU only: runs in CI.
import { describe, expect, test } from "./support/test-api.ts";
import { hostname } from "node:os";
import { join } from "node:path";

import { LocalStore, rankEnvFromProcess, Store, storeOptionsFromEnv } from "../lib/bootstrap.ts";
import { ArgumentError, PeerError, TimeoutError } from "../lib/errors.ts";
import { runtime } from "../lib/runtime/index.ts";
import { caught } from "./support/caught.ts";
import { nextReport, spawnWorker, type Worker } from "./support/report-channel.ts";
import { describeStore } from "./support/store-gate.ts";

const worker = join(import.meta.dirname, "support", "store-worker.ts");

type Rank = Worker;

function spawnRank(rank: number, worldSize: number, port: number, scenario: string): Rank {
  return spawnWorker(worker, { RANK: String(rank), WORLD_SIZE: String(worldSize), MASTER_PORT: String(port), SCENARIO: scenario, TIMEOUT_MS: "15000" });
}

/** Starts rank 0 on a free port, then ranks 1..launched-1; returns every rank's result line. */
async function runRanks(worldSize: number, scenario: string, launched = worldSize): Promise<{ results: any[]; exits: number[] }> {
  const r0 = spawnRank(0, worldSize, 0, scenario);
  const { port } = await nextReport(r0);
  expect(port).toBeGreaterThan(0);
  const ranks = [r0, ...Array.from({ length: launched - 1 }, (_, i) => spawnRank(i + 1, worldSize, port, scenario))];
  const results = await Promise.all(ranks.map(async (r) => {
    try {
      return await nextReport(r);
    } catch {
      return undefined; // a rank that died on purpose
    }
  }));
  const exits = await Promise.all(ranks.map((r) => r.proc.exited));
  return { results, exits };
}

/** Every rank in `results` reported the error class `error`, with a message holding each of `parts`. */
function expectEveryRankFailed(results: any[], error: string, parts: string[]): void {
  for (const r of results) {
    expect(r.error).toBe(error);
    for (const part of parts) expect(r.message).toContain(part);
  }
}

describeStore("Store between processes", [runtime.name], () => {
  test("set/get/wait/barrier/allGather across 4 processes, large values included", async () => {
    const { results, exits } = await runRanks(4, "basic");
    expect(exits).toEqual([0, 0, 0, 0]);
    for (const r of results) {
      expect(r.got).toEqual(["value of 0", "value of 1", "value of 2", "value of 3"]);
      expect(r.gathered).toEqual([[0, 0, 255], [1, 2, 255], [2, 4, 255], [3, 6, 255]]);
      expect(r.bigOk).toBe(true);
    }
  });

  test("get of a key nobody sets times out and names the key", async () => {
    const { results } = await runRanks(2, "get-timeout");
    expectEveryRankFailed(results, "TimeoutError", ["'never-set'", "300 ms"]);
    for (const r of results) expect(r.code).toBe("E_TIMEOUT");
  });

  test("wait names exactly the keys that were never set", async () => {
    const { results } = await runRanks(2, "wait-timeout");
    expectEveryRankFailed(results, "TimeoutError", ["2 of 3 keys", "'absent/a'", "'absent/b'"]);
    for (const r of results) expect(r.message).not.toContain("present/");
  });

  test("a rank that never joins: the barrier times out naming it", async () => {
    const { results } = await runRanks(4, "barrier-missing", 2);
    expectEveryRankFailed(results, "TimeoutError", ["barrier 'all'", "ranks 2, 3 never arrived", "arrived: 0, 1"]);
  });

  test("a rank that dies: the others get PeerError naming it, not a hang", async () => {
    const t0 = performance.now();
    const { results, exits } = await runRanks(3, "dies");
    expect(exits[2]).toBe(3);
    expectEveryRankFailed(results.slice(0, 2), "PeerError", ["rank 2 left the store"]);
    expect(performance.now() - t0).toBeLessThan(9000); // well before the 10 s barrier bound
  });

  test("two processes claiming one rank: the second is refused", async () => {
    const r0 = spawnRank(0, 2, 0, "linger");
    const { port } = await nextReport(r0);
    const first = spawnRank(1, 2, port, "linger");
    expect((await nextReport(first)).ok).toBe(true);
    const second = spawnRank(1, 2, port, "linger");
    const refused = await nextReport(second);
    expect(refused.connect).toBe(true);
    expect(refused.error).toBe("ArgumentError");
    expect(refused.message).toContain("rank 1 is already connected");
    expect((await nextReport(r0)).ok).toBe(true);
    expect(await Promise.all([r0.proc.exited, first.proc.exited, second.proc.exited])).toEqual([0, 0, 0]);
  });

  test("no rank 0: connect times out saying where it looked", async () => {
    const t0 = performance.now();
    const err = await Store.connect({ rank: 1, worldSize: 2, addr: "127.0.0.1", port: 9, timeoutMs: 400 }).catch((e) => e);
    expect(err).toBeInstanceOf(TimeoutError);
    expect(err.message).toContain("127.0.0.1:9");
    expect(err.message).toContain("MASTER_ADDR");
    expect(err.message).toContain("within 400 ms"); // the connect bound is timeoutMs when that is under 60 s
    expect(performance.now() - t0).toBeLessThan(3000);
  });

  test("world size 1 in one process, and argument checks", async () => {
    await using s = await Store.connect({ rank: 0, worldSize: 1, addr: "127.0.0.1", port: 0 });
    await s.set("a", "b");
    expect(new TextDecoder().decode(await s.get("a"))).toBe("b");
    await s.barrier("x");
    expect((await s.allGather("g", Uint8Array.of(9))).map((v) => Array.from(v))).toEqual([[9]]);
    await expect(s.get("", 10)).rejects.toBeInstanceOf(ArgumentError);
    await expect(s.get("a", -1)).rejects.toBeInstanceOf(ArgumentError);
    await expect(Store.connect({ rank: 2, worldSize: 2, addr: "x", port: 1 })).rejects.toBeInstanceOf(ArgumentError);
    await expect(Store.connect({ rank: 1, worldSize: 2, addr: "x", port: 0 })).rejects.toBeInstanceOf(ArgumentError);
  });
});

describe("LocalStore (several ranks in one process)", () => {
  test("same interface: set/get/wait/barrier/allGather", async () => {
    const stores = LocalStore.group(3);
    await Promise.all(stores.map((s) => s.set(`k${s.rank}`, `v${s.rank}`)));
    const got = await Promise.all(stores.map((s) => s.get(`k${(s.rank + 1) % 3}`)));
    expect(got.map((v) => new TextDecoder().decode(v))).toEqual(["v1", "v2", "v0"]);
    await Promise.all(stores.map((s) => s.wait(["k0", "k1", "k2"])));
    await Promise.all(stores.map((s) => s.barrier("b")));
    await Promise.all(stores.map((s) => s.barrier("b")));
    const g = await Promise.all(stores.map((s) => s.allGather("g", Uint8Array.of(s.rank))));
    for (const row of g) expect(row.map((v) => v[0])).toEqual([0, 1, 2]);
    await Promise.all(stores.map((s) => s.close()));
  });

  test("a barrier missing a rank times out naming it", async () => {
    const [a, b, c] = LocalStore.group(3);
    const errs = await Promise.all([a!.barrier("b", 100), b!.barrier("b", 100)].map((p) => p.catch((e) => e)));
    for (const e of errs) {
      expect(e).toBeInstanceOf(TimeoutError);
      expect(e.message).toContain("rank 2 never arrived");
    }
    void c;
  });
});

describe("rankEnvFromProcess", () => {
  test("torchrun names", () => {
    expect(rankEnvFromProcess({ RANK: "3", WORLD_SIZE: "8", LOCAL_RANK: "1", LOCAL_WORLD_SIZE: "2", MASTER_ADDR: "10.0.0.1", MASTER_PORT: "29500", WEFT_NODE_ID: "n7" }))
      .toEqual({ rank: 3, worldSize: 8, localRank: 1, localWorldSize: 2, masterAddr: "10.0.0.1", masterPort: 29500, nodeId: "n7" });
  });

  test("torchrun names without LOCAL_*: one host, nodeId is the hostname", () => {
    const e = rankEnvFromProcess({ RANK: "1", WORLD_SIZE: "2", MASTER_ADDR: "h", MASTER_PORT: "1234" });
    expect(e).toMatchObject({ localRank: 1, localWorldSize: 2, nodeId: hostname() });
  });

  test("Slurm names, with the launch node and a port derived from the job id", () => {
    const e = rankEnvFromProcess({
      SLURM_PROCID: "5", SLURM_NTASKS: "8", SLURM_LOCALID: "1", SLURM_STEP_TASKS_PER_NODE: "4(x2)",
      SLURM_LAUNCH_NODE_IPADDR: "10.1.2.3", SLURM_JOB_ID: "123456",
    });
    expect(e).toMatchObject({ rank: 5, worldSize: 8, localRank: 1, localWorldSize: 4, masterAddr: "10.1.2.3", masterPort: 29500 + (123456 % 20000) });
    const f = rankEnvFromProcess({ SLURM_PROCID: "0", SLURM_STEP_NUM_TASKS: "2", SLURM_LOCALID: "0", SLURM_NTASKS_PER_NODE: "2", SLURM_NODELIST: "gpu[07-08]", MASTER_PORT: "5000" });
    expect(f).toMatchObject({ worldSize: 2, masterAddr: "gpu07", masterPort: 5000 });
  });

  test("Open MPI names", () => {
    const e = rankEnvFromProcess({
      OMPI_COMM_WORLD_RANK: "2", OMPI_COMM_WORLD_SIZE: "4", OMPI_COMM_WORLD_LOCAL_RANK: "0", OMPI_COMM_WORLD_LOCAL_SIZE: "2",
      MASTER_ADDR: "a", MASTER_PORT: "1",
    });
    expect(e).toMatchObject({ rank: 2, worldSize: 4, localRank: 0, localWorldSize: 2 });
  });

  test("missing or malformed variables are ArgumentErrors naming the variable", () => {
    const arg = (env: Record<string, string>, name: string, text: string) => {
      const err = caught(() => rankEnvFromProcess(env));
      expect(err).toBeInstanceOf(ArgumentError);
      expect((err as ArgumentError).argument).toBe(name);
      expect((err as Error).message).toContain(text);
    };
    arg({}, "RANK", "torchrun, srun or mpirun");
    arg({ RANK: "0", MASTER_ADDR: "a", MASTER_PORT: "1" }, "WORLD_SIZE", "must be set");
    arg({ RANK: "2", WORLD_SIZE: "2", MASTER_ADDR: "a", MASTER_PORT: "1" }, "RANK", "must be < WORLD_SIZE=2");
    arg({ RANK: "x", WORLD_SIZE: "2" }, "RANK", "integer");
    arg({ RANK: "0", WORLD_SIZE: "2", MASTER_PORT: "1" }, "MASTER_ADDR", "must be set");
    arg({ RANK: "0", WORLD_SIZE: "2", MASTER_ADDR: "a" }, "MASTER_PORT", "must be set");
    arg({ RANK: "0", WORLD_SIZE: "2", MASTER_ADDR: "a", MASTER_PORT: "0" }, "MASTER_PORT", "real port");
    arg({ OMPI_COMM_WORLD_RANK: "0", OMPI_COMM_WORLD_SIZE: "2", OMPI_COMM_WORLD_LOCAL_RANK: "0", MASTER_ADDR: "a", MASTER_PORT: "1" }, "LOCAL_WORLD_SIZE", "must be set");
  });

  test("integers are plain decimal digits in range: RANK=0x1, WORLD_SIZE=2e0, MASTER_PORT=' 29500 ' are refused", () => {
    const ok = { RANK: "1", WORLD_SIZE: "2", MASTER_ADDR: "10.0.0.1", MASTER_PORT: "29500" };
    expect(rankEnvFromProcess(ok)).toMatchObject({ rank: 1, worldSize: 2, masterPort: 29500 });
    const bad: [string, string][] = [
      ["RANK", "0x1"], ["RANK", "1.0"], ["RANK", "+1"], ["RANK", "-1"], ["RANK", " 1"], ["WORLD_SIZE", "2e0"], ["WORLD_SIZE", "0"],
      ["WORLD_SIZE", "Infinity"], ["MASTER_PORT", " 29500 "], ["MASTER_PORT", "65536"], ["MASTER_PORT", "0o777"], ["LOCAL_RANK", "0b1"],
    ];
    for (const [name, value] of bad) {
      let err: any;
      try {
        rankEnvFromProcess({ ...ok, LOCAL_RANK: "1", LOCAL_WORLD_SIZE: "2", [name]: value });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ArgumentError);
      expect(err.argument).toBe(name);
      expect(err.message).toContain("plain decimal integer in [");
    }
  });

  test("storeOptionsFromEnv: the job token, and sameHost only when the launcher says every rank is local", () => {
    const base = { RANK: "1", WORLD_SIZE: "2", MASTER_ADDR: "node0", MASTER_PORT: "29500" };
    expect(storeOptionsFromEnv({ ...base, LOCAL_RANK: "1", LOCAL_WORLD_SIZE: "2", WEFT_STORE_TOKEN: "0123456789abcdef" }))
      .toEqual({ rank: 1, worldSize: 2, addr: "node0", port: 29500, token: "0123456789abcdef", sameHost: true });
    expect(storeOptionsFromEnv({ ...base, LOCAL_RANK: "0", LOCAL_WORLD_SIZE: "1" }).sameHost).toBe(false);
    // A hand-started job without LOCAL_*: taken to share a host for devices, but the store still
    // listens where MASTER_ADDR points.
    expect(storeOptionsFromEnv(base).sameHost).toBe(false);
    for (const token of ["short", "", " 0123456789abcdef", "0123456789abcdef\n"]) {
      expect(() => storeOptionsFromEnv({ ...base, WEFT_STORE_TOKEN: token })).toThrow(ArgumentError);
    }
  });
});
