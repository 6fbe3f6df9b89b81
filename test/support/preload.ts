// Preloaded by bun test (bunfig.toml). NVLink multicast must never be touched on the shared GPU
// hosts: set the off switches for anything that loads NCCL, torch or NVSHMEM from a test.
process.env.NCCL_NVLS_ENABLE = "0";
process.env.TORCH_SYMM_MEM_DISABLE_MULTICAST = "1";
process.env.NVSHMEM_DISABLE_NVLS = "1";
