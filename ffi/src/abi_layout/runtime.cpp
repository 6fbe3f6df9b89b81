// runtime.cpp — weft_abi_layout's part for the library, devices, launch and completion,
// test support, the GEMM engine (builder.hpp).
#include "abi_layout/builder.hpp"

namespace weft::abi_layout {

void runtime_layout(Builder& l) {
  WEFT_LAYOUT_STRUCT(WeftDeviceProps, WEFT_DEVICE_PROPS_INIT, size, version, name, pci_bus_id, total_memory,
                     free_memory, sm_count, cc_major, cc_minor, l2_bytes, smem_per_block_optin, clock_khz,
                     memory_clock_khz, memory_bus_width);
  WEFT_LAYOUT_STRUCT(WeftOpLaunch, WEFT_OP_LAUNCH_INIT, size, version, done, seq, arrivals);
  WEFT_LAYOUT_STRUCT(WeftGemmParams, WEFT_GEMM_PARAMS_INIT, size, version, a, b, c, m, n, k, lda, ldb, ldc, flags,
                     tile_n, cluster_m, cluster_n, group_m, max_ctas, stream);
  WEFT_LAYOUT_STRUCT(WeftGemmChoice, WEFT_GEMM_CHOICE_INIT, size, version, tile_m, tile_n, tile_k, cluster_m,
                     cluster_n, group_m, stages, ctas);
  WEFT_LAYOUT_ENUM(WeftStatus, WEFT_OK, WEFT_E_INVALID, WEFT_E_CUDA, WEFT_E_NO_DEVICE, WEFT_E_OOM, WEFT_E_TIMEOUT,
                     WEFT_E_PEER, WEFT_E_UNSUPPORTED, WEFT_E_TRANSPORT, WEFT_E_INTERNAL);
  WEFT_LAYOUT_ENUM(WeftCopyKind, WEFT_COPY_DEFAULT, WEFT_COPY_H2D, WEFT_COPY_D2H, WEFT_COPY_D2D);
  WEFT_LAYOUT_ENUM(WeftDtype, WEFT_BF16, WEFT_F16, WEFT_F32, WEFT_I32, WEFT_U8);
  WEFT_LAYOUT_ENUM(WeftGemmFlags, WEFT_GEMM_B_NK, WEFT_GEMM_OUT_F32);
  WEFT_LAYOUT_ENUM(WeftGemmFailure, WEFT_GEMM_FAIL_BARRIER_TIMEOUT, WEFT_GEMM_FAIL_HOOK_WAIT);
  WEFT_LAYOUT_ENUM(WeftGemmStage, WEFT_GEMM_STAGE_PRODUCER, WEFT_GEMM_STAGE_CONSUMER, WEFT_GEMM_STAGE_EPILOGUE,
                     WEFT_GEMM_STAGE_FINISH);
  WEFT_LAYOUT_CONSTANTS(WeftAbi);
  WEFT_LAYOUT_CONSTANT(WEFT_ABI_VERSION);
}

}  // namespace weft::abi_layout
