// rank-env.ts — who this process is, read from the launcher's environment (torchrun, then Slurm,
// then Open MPI names), and the store options that follow from it (storeOptionsFromEnv).
//
// Every variable is checked strictly: integers are plain decimal digits ("0x1", "2e0", " 29500 "
// and "+1" are refused, naming the variable and the rule), because Number() accepts all of those
// and a rank or port read differently on two hosts is a job that hangs instead of failing.
import { Buffer } from "node:buffer";
import { hostname } from "node:os";
import process from "node:process";

import { ArgumentError } from "../errors.ts";
import { checkBindAddr, checkToken } from "./store-api.ts";

export interface RankEnv {
  rank: number;
  worldSize: number;
  localRank: number;
  localWorldSize: number;
  masterAddr: string;
  masterPort: number;
  /** Ranks with the same nodeId share a host (and can map each other's GPU memory). */
  nodeId: string;
}

export type Env = Record<string, string | undefined>;

const ENV_OP = "rankEnvFromProcess";
/** Ranks and world sizes cross the ABI as int32. */
const MAX_RANKS = 0x7fffffff;

/** A variable that must be a plain decimal integer in [min, max]; undefined when unset or "". */
function intVar(env: Env, name: string, min: number, max: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === "") return undefined;
  const v = /^[0-9]{1,16}$/.test(raw) ? Number(raw) : NaN;
  if (!(v >= min && v <= max)) {
    throw new ArgumentError(ENV_OP, name, `must be a plain decimal integer in [${min}, ${max}] (got ${JSON.stringify(raw)})`);
  }
  return v;
}

/** Slurm's task-count lists: "4", "4(x2)", "2(x3),1". The first entry is this node's count when all
 * nodes run the same number of tasks, which is the only layout we accept without LOCAL_WORLD_SIZE. */
function slurmTasksPerNode(env: Env, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === "") return undefined;
  if (!/^[0-9]{1,9}(\(x[0-9]{1,9}\))?(,[0-9]{1,9}(\(x[0-9]{1,9}\))?)*$/.test(raw)) {
    throw new ArgumentError(ENV_OP, name, `must be a Slurm task list such as "4", "4(x2)" or "2(x3),1" (got ${JSON.stringify(raw)})`);
  }
  return Number(/^[0-9]+/.exec(raw)![0]);
}

/** The first host of a Slurm node list: "node[01-04,07],gpu2" -> "node01". */
function firstSlurmHost(list: string | undefined): string | undefined {
  if (!list) return undefined;
  const m = /^([^,[]+)(?:\[([^\],-]+))?/.exec(list.trim());
  if (!m) return undefined;
  return m[2] ? m[1]! + m[2] : m[1];
}

/** Rank, world size, local rank and local world size under one launcher's four names. */
function fourInts(env: Env, rank: string, size: string, localRank: string, localSize: string) {
  return {
    rank: intVar(env, rank, 0, MAX_RANKS - 1),
    worldSize: intVar(env, size, 1, MAX_RANKS),
    localRank: intVar(env, localRank, 0, MAX_RANKS - 1),
    localWorldSize: intVar(env, localSize, 1, MAX_RANKS),
  };
}

interface Parsed {
  env: RankEnv;
  /** The launcher said every rank runs on this host (its local world size is the world size). */
  sameHost: boolean;
}

function parse(env: Env): Parsed {
  let rank: number | undefined;
  let worldSize: number | undefined;
  let localRank: number | undefined;
  let localWorldSize: number | undefined;
  let addr = env.MASTER_ADDR || undefined;
  let addrName = "MASTER_ADDR";
  let port = intVar(env, "MASTER_PORT", 0, 65535);
  let source: string;
  let rankName: string;
  let sizeName: string;
  let sizesGiven = true;

  if (env.RANK !== undefined || env.WORLD_SIZE !== undefined) {
    source = "torchrun";
    rankName = "RANK";
    sizeName = "WORLD_SIZE";
    ({ rank, worldSize, localRank, localWorldSize } = fourInts(env, rankName, sizeName, "LOCAL_RANK", "LOCAL_WORLD_SIZE"));
    if (localRank === undefined && localWorldSize === undefined) {
      // A hand-started job: taken to share one host, but not said to (sameHost stays false, so the
      // store still listens where MASTER_ADDR points).
      localRank = rank;
      localWorldSize = worldSize;
      sizesGiven = false;
    }
  } else if (env.SLURM_PROCID !== undefined) {
    source = "Slurm";
    rankName = "SLURM_PROCID";
    sizeName = env.SLURM_NTASKS !== undefined ? "SLURM_NTASKS" : env.SLURM_STEP_NUM_TASKS !== undefined ? "SLURM_STEP_NUM_TASKS" : "SLURM_NPROCS";
    rank = intVar(env, "SLURM_PROCID", 0, MAX_RANKS - 1);
    worldSize = intVar(env, sizeName, 1, MAX_RANKS);
    localRank = intVar(env, "SLURM_LOCALID", 0, MAX_RANKS - 1);
    const tasksName = ["SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE"].find((n) => env[n] !== undefined);
    localWorldSize = tasksName ? slurmTasksPerNode(env, tasksName) : undefined;
    if (!addr) {
      addr = env.SLURM_LAUNCH_NODE_IPADDR || firstSlurmHost(env.SLURM_STEP_NODELIST ?? env.SLURM_JOB_NODELIST ?? env.SLURM_NODELIST);
      addrName = env.SLURM_LAUNCH_NODE_IPADDR ? "SLURM_LAUNCH_NODE_IPADDR" : "SLURM_STEP_NODELIST";
    }
    // A port every rank of the job derives alike, in the dynamic range, when MASTER_PORT is unset.
    const job = intVar(env, "SLURM_JOB_ID", 0, Number.MAX_SAFE_INTEGER);
    if (port === undefined && job !== undefined) port = 29500 + (job % 20000);
  } else if (env.OMPI_COMM_WORLD_RANK !== undefined) {
    source = "Open MPI";
    rankName = "OMPI_COMM_WORLD_RANK";
    sizeName = "OMPI_COMM_WORLD_SIZE";
    ({ rank, worldSize, localRank, localWorldSize } = fourInts(env, rankName, sizeName, "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"));
  } else {
    throw new ArgumentError(ENV_OP, "RANK", "is not set, and neither are SLURM_PROCID nor OMPI_COMM_WORLD_RANK: " +
      "start the job with torchrun, srun or mpirun, or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT yourself");
  }

  const from = `(read from ${source} variables)`;
  if (rank === undefined) throw new ArgumentError(ENV_OP, rankName, `must be set ${from}`);
  if (worldSize === undefined) throw new ArgumentError(ENV_OP, sizeName, `must be set ${from}`);
  if (rank >= worldSize) throw new ArgumentError(ENV_OP, rankName, `must be < ${sizeName}=${worldSize} (got ${rank})`);
  if (localRank === undefined) throw new ArgumentError(ENV_OP, source === "Slurm" ? "SLURM_LOCALID" : "LOCAL_RANK", `must be set ${from}`);
  if (localWorldSize === undefined) {
    throw new ArgumentError(ENV_OP, source === "Slurm" ? "SLURM_NTASKS_PER_NODE" : "LOCAL_WORLD_SIZE", `must be set ${from}`);
  }
  if (localRank >= localWorldSize) {
    throw new ArgumentError(ENV_OP, "LOCAL_RANK", `must be < the local world size ${localWorldSize} (got ${localRank})`);
  }
  if (localWorldSize > worldSize) {
    throw new ArgumentError(ENV_OP, "LOCAL_WORLD_SIZE", `must be <= the world size ${worldSize} (got ${localWorldSize})`);
  }
  if (!addr) throw new ArgumentError(ENV_OP, "MASTER_ADDR", `must be set: the host where rank 0 runs the store ${from}`);
  checkBindAddr(ENV_OP, addrName, addr);
  if (port === undefined) throw new ArgumentError(ENV_OP, "MASTER_PORT", `must be set: the TCP port of rank 0's store ${from}`);
  if (port === 0 && worldSize > 1) {
    throw new ArgumentError(ENV_OP, "MASTER_PORT", `must name a real port when WORLD_SIZE > 1 (got 0): other ranks cannot find an ephemeral port`);
  }
  const nodeId = env.WEFT_NODE_ID || hostname();
  if (Buffer.byteLength(nodeId) > 255) throw new ArgumentError(ENV_OP, "WEFT_NODE_ID", `must be at most 255 bytes (got ${Buffer.byteLength(nodeId)})`);
  return {
    env: { rank, worldSize, localRank, localWorldSize, masterAddr: addr, masterPort: port, nodeId },
    sameHost: sizesGiven && localWorldSize === worldSize,
  };
}

/**
 * Who this process is, from (in order) torchrun names (RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Slurm names (SLURM_PROCID, SLURM_NTASKS, ...) or
 * Open MPI names (OMPI_COMM_WORLD_*). MASTER_ADDR/MASTER_PORT override what a launcher implies.
 * Without LOCAL_RANK/LOCAL_WORLD_SIZE (a hand-started torchrun-style job) all ranks are taken to
 * share one host. nodeId is WEFT_NODE_ID, or else the hostname.
 */
export function rankEnvFromProcess(env: Env = process.env): RankEnv {
  return parse(env).env;
}

/** What Store.connect needs, from the same environment: rank, world, rank 0's address and port, the
 * job token (WEFT_STORE_TOKEN) and whether the launcher put every rank on this host (then the store
 * listens on loopback only). */
export function storeOptionsFromEnv(env: Env = process.env): {
  rank: number; worldSize: number; addr: string; port: number; token?: string; sameHost: boolean;
} {
  const { env: e, sameHost } = parse(env);
  const raw = env.WEFT_STORE_TOKEN;
  const token = raw === undefined ? undefined : checkToken(ENV_OP, "WEFT_STORE_TOKEN", raw);
  return { rank: e.rank, worldSize: e.worldSize, addr: e.masterAddr, port: e.masterPort, token, sameHost };
}
