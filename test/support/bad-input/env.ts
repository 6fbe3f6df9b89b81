// env.ts — bad launcher environments: every variable rankEnvFromProcess and storeOptionsFromEnv
// read, in the forms a shell script or a launcher gets wrong (hex, exponents, spaces, signs, out of
// range, malformed lists). Each case names the variable its error must name.
import { rankEnvFromProcess, storeOptionsFromEnv } from "../../../lib/bootstrap.ts";
import { ArgumentError } from "../../../lib/errors.ts";
import type { BadInputCase } from "./case.ts";

const torchrun = { RANK: "1", WORLD_SIZE: "2", LOCAL_RANK: "1", LOCAL_WORLD_SIZE: "2", MASTER_ADDR: "10.0.0.1", MASTER_PORT: "29500" };
const slurm = { SLURM_PROCID: "1", SLURM_NTASKS: "2", SLURM_LOCALID: "1", SLURM_STEP_TASKS_PER_NODE: "2", SLURM_JOB_ID: "4242", SLURM_LAUNCH_NODE_IPADDR: "10.0.0.2" };
const ompi = { OMPI_COMM_WORLD_RANK: "1", OMPI_COMM_WORLD_SIZE: "2", OMPI_COMM_WORLD_LOCAL_RANK: "1", OMPI_COMM_WORLD_LOCAL_SIZE: "2", MASTER_ADDR: "h", MASTER_PORT: "29500" };

type Env = Record<string, string | undefined>;

function envCase(name: string, env: Env, names: string): BadInputCase {
  return { name: `rankEnvFromProcess ${name}`, run: () => rankEnvFromProcess(env), error: ArgumentError, names };
}

function tokenCase(name: string, token: string): BadInputCase {
  return { name: `storeOptionsFromEnv ${name}`, run: () => storeOptionsFromEnv({ ...torchrun, WEFT_STORE_TOKEN: token }), error: ArgumentError, names: "WEFT_STORE_TOKEN" };
}

export const cases: BadInputCase[] = [
  envCase("with no launcher variables", {}, "RANK"),
  envCase("RANK=0x1", { ...torchrun, RANK: "0x1" }, "RANK"),
  envCase("RANK=1.0", { ...torchrun, RANK: "1.0" }, "RANK"),
  envCase("RANK=1e0", { ...torchrun, RANK: "1e0" }, "RANK"),
  envCase("RANK=+1", { ...torchrun, RANK: "+1" }, "RANK"),
  envCase("RANK=-1", { ...torchrun, RANK: "-1" }, "RANK"),
  envCase("RANK=' 1'", { ...torchrun, RANK: " 1" }, "RANK"),
  envCase("RANK='' with WORLD_SIZE set", { ...torchrun, RANK: "" }, "RANK"),
  envCase("RANK=WORLD_SIZE", { ...torchrun, RANK: "2", LOCAL_RANK: "0" }, "RANK"),
  envCase("WORLD_SIZE=2e0", { ...torchrun, WORLD_SIZE: "2e0" }, "WORLD_SIZE"),
  envCase("WORLD_SIZE=0", { ...torchrun, WORLD_SIZE: "0" }, "WORLD_SIZE"),
  envCase("WORLD_SIZE=Infinity", { ...torchrun, WORLD_SIZE: "Infinity" }, "WORLD_SIZE"),
  envCase("WORLD_SIZE=3000000000 (over int32)", { ...torchrun, WORLD_SIZE: "3000000000" }, "WORLD_SIZE"),
  envCase("MASTER_PORT=' 29500 '", { ...torchrun, MASTER_PORT: " 29500 " }, "MASTER_PORT"),
  envCase("MASTER_PORT=65536", { ...torchrun, MASTER_PORT: "65536" }, "MASTER_PORT"),
  envCase("MASTER_PORT=29500abc", { ...torchrun, MASTER_PORT: "29500abc" }, "MASTER_PORT"),
  envCase("MASTER_PORT=0 with WORLD_SIZE=2", { ...torchrun, MASTER_PORT: "0" }, "MASTER_PORT"),
  envCase("MASTER_PORT unset", { ...torchrun, MASTER_PORT: undefined }, "MASTER_PORT"),
  envCase("MASTER_ADDR=' node0'", { ...torchrun, MASTER_ADDR: " node0" }, "MASTER_ADDR"),
  envCase("MASTER_ADDR='a b'", { ...torchrun, MASTER_ADDR: "a b" }, "MASTER_ADDR"),
  envCase("MASTER_ADDR unset", { ...torchrun, MASTER_ADDR: undefined }, "MASTER_ADDR"),
  envCase("LOCAL_RANK=0b1", { ...torchrun, LOCAL_RANK: "0b1" }, "LOCAL_RANK"),
  envCase("LOCAL_RANK=LOCAL_WORLD_SIZE", { ...torchrun, LOCAL_RANK: "2" }, "LOCAL_RANK"),
  envCase("LOCAL_WORLD_SIZE=0x2", { ...torchrun, LOCAL_WORLD_SIZE: "0x2" }, "LOCAL_WORLD_SIZE"),
  envCase("LOCAL_WORLD_SIZE > WORLD_SIZE", { ...torchrun, LOCAL_WORLD_SIZE: "3" }, "LOCAL_WORLD_SIZE"),
  envCase("LOCAL_RANK without LOCAL_WORLD_SIZE", { ...torchrun, LOCAL_WORLD_SIZE: undefined }, "LOCAL_WORLD_SIZE"),
  envCase("SLURM_PROCID=0x0", { ...slurm, SLURM_PROCID: "0x0" }, "SLURM_PROCID"),
  envCase("SLURM_NTASKS=two", { ...slurm, SLURM_NTASKS: "two" }, "SLURM_NTASKS"),
  envCase("SLURM_LOCALID=-1", { ...slurm, SLURM_LOCALID: "-1" }, "SLURM_LOCALID"),
  envCase("SLURM_STEP_TASKS_PER_NODE='4(x2'", { ...slurm, SLURM_STEP_TASKS_PER_NODE: "4(x2" }, "SLURM_STEP_TASKS_PER_NODE"),
  envCase("SLURM_STEP_TASKS_PER_NODE='2, 2'", { ...slurm, SLURM_STEP_TASKS_PER_NODE: "2, 2" }, "SLURM_STEP_TASKS_PER_NODE"),
  envCase("SLURM_JOB_ID=12a", { ...slurm, SLURM_JOB_ID: "12a" }, "SLURM_JOB_ID"),
  envCase("SLURM_LAUNCH_NODE_IPADDR with a space", { ...slurm, SLURM_LAUNCH_NODE_IPADDR: "10.0.0.2 " }, "SLURM_LAUNCH_NODE_IPADDR"),
  envCase("OMPI_COMM_WORLD_SIZE=-4", { ...ompi, OMPI_COMM_WORLD_SIZE: "-4" }, "OMPI_COMM_WORLD_SIZE"),
  envCase("OMPI_COMM_WORLD_LOCAL_RANK=' 0'", { ...ompi, OMPI_COMM_WORLD_LOCAL_RANK: " 0" }, "OMPI_COMM_WORLD_LOCAL_RANK"),
  envCase("OMPI_COMM_WORLD_LOCAL_SIZE unset", { ...ompi, OMPI_COMM_WORLD_LOCAL_SIZE: undefined }, "LOCAL_WORLD_SIZE"),
  envCase("WEFT_NODE_ID of 300 bytes", { ...torchrun, WEFT_NODE_ID: "n".repeat(300) }, "WEFT_NODE_ID"),
  tokenCase("WEFT_STORE_TOKEN shorter than 16 characters", "short"),
  tokenCase("WEFT_STORE_TOKEN=''", ""),
  tokenCase("WEFT_STORE_TOKEN with a trailing newline", "0123456789abcdef0123\n"),
  tokenCase("WEFT_STORE_TOKEN with a tab inside", "0123456789\tabcdef0123"),
];
