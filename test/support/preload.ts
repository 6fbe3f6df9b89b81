// Preloaded by bun test (bunfig.toml). NVLink multicast must never be touched on the shared GPU
// hosts: set the off switches for anything that loads NCCL, torch or NVSHMEM from a test, in the C
// environment too (NCCL reads them with getenv; see native-env.ts).
import { setNativeEnv } from "./native-env.ts";

setNativeEnv("NCCL_NVLS_ENABLE", "0");
setNativeEnv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1");
setNativeEnv("NVSHMEM_DISABLE_NVLS", "1");
