// runtime.cpp — weft_abi_layout's part for the library, devices, memory, launch and completion, test support, the GEMM engine (builder.hpp).
#include "abi_layout/builder.hpp"

namespace weft::abi_layout {

void runtime_layout(Builder& l) {
  WEFT_LAYOUT_STRUCT(l, WeftDeviceProps, WEFT_DEVICE_PROPS_INIT);
  WEFT_LAYOUT_FIELD(l, WeftDeviceProps, size);
  WEFT_LAYOUT_FIELD(l, WeftDeviceProps, version);
  WEFT_LAYOUT_FIELD(l, WeftDeviceProps, name);
  WEFT_LAYOUT_FIELD(l, WeftDeviceProps, pci_bus_id);
  WEFT_LAYOUT_FIELD(l, WeftDeviceProps, total_memory);
  WEFT_LAYOUT_FIELD(l, WeftDeviceProps, free_memory);
  WEFT_LAYOUT_FIELD(l, WeftDeviceProps, sm_count);
  WEFT_LAYOUT_FIELD(l, WeftDeviceProps, cc_major);
  WEFT_LAYOUT_FIELD(l, WeftDeviceProps, cc_minor);
  WEFT_LAYOUT_FIELD(l, WeftDeviceProps, l2_bytes);
  WEFT_LAYOUT_FIELD(l, WeftDeviceProps, smem_per_block_optin);
  WEFT_LAYOUT_FIELD(l, WeftDeviceProps, clock_khz);
  WEFT_LAYOUT_FIELD(l, WeftDeviceProps, memory_clock_khz);
  WEFT_LAYOUT_FIELD(l, WeftDeviceProps, memory_bus_width);
  WEFT_LAYOUT_STRUCT(l, WeftOpLaunch, WEFT_OP_LAUNCH_INIT);
  WEFT_LAYOUT_FIELD(l, WeftOpLaunch, size);
  WEFT_LAYOUT_FIELD(l, WeftOpLaunch, version);
  WEFT_LAYOUT_FIELD(l, WeftOpLaunch, done);
  WEFT_LAYOUT_FIELD(l, WeftOpLaunch, seq);
  WEFT_LAYOUT_FIELD(l, WeftOpLaunch, arrivals);
  WEFT_LAYOUT_STRUCT(l, WeftGemmParams, WEFT_GEMM_PARAMS_INIT);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, size);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, version);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, a);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, b);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, c);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, m);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, n);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, k);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, lda);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, ldb);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, ldc);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, flags);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, tile_n);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, cluster_m);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, cluster_n);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, group_m);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, max_ctas);
  WEFT_LAYOUT_FIELD(l, WeftGemmParams, stream);
  WEFT_LAYOUT_STRUCT(l, WeftGemmChoice, WEFT_GEMM_CHOICE_INIT);
  WEFT_LAYOUT_FIELD(l, WeftGemmChoice, size);
  WEFT_LAYOUT_FIELD(l, WeftGemmChoice, version);
  WEFT_LAYOUT_FIELD(l, WeftGemmChoice, tile_m);
  WEFT_LAYOUT_FIELD(l, WeftGemmChoice, tile_n);
  WEFT_LAYOUT_FIELD(l, WeftGemmChoice, tile_k);
  WEFT_LAYOUT_FIELD(l, WeftGemmChoice, cluster_m);
  WEFT_LAYOUT_FIELD(l, WeftGemmChoice, cluster_n);
  WEFT_LAYOUT_FIELD(l, WeftGemmChoice, group_m);
  WEFT_LAYOUT_FIELD(l, WeftGemmChoice, stages);
  WEFT_LAYOUT_FIELD(l, WeftGemmChoice, ctas);
  WEFT_LAYOUT_ENUM(l, WeftStatus);
  WEFT_LAYOUT_VALUE(l, WEFT_OK);
  WEFT_LAYOUT_VALUE(l, WEFT_E_INVALID);
  WEFT_LAYOUT_VALUE(l, WEFT_E_CUDA);
  WEFT_LAYOUT_VALUE(l, WEFT_E_NO_DEVICE);
  WEFT_LAYOUT_VALUE(l, WEFT_E_OOM);
  WEFT_LAYOUT_VALUE(l, WEFT_E_TIMEOUT);
  WEFT_LAYOUT_VALUE(l, WEFT_E_PEER);
  WEFT_LAYOUT_VALUE(l, WEFT_E_UNSUPPORTED);
  WEFT_LAYOUT_VALUE(l, WEFT_E_TRANSPORT);
  WEFT_LAYOUT_VALUE(l, WEFT_E_INTERNAL);
  WEFT_LAYOUT_ENUM(l, WeftCopyKind);
  WEFT_LAYOUT_VALUE(l, WEFT_COPY_DEFAULT);
  WEFT_LAYOUT_VALUE(l, WEFT_COPY_H2D);
  WEFT_LAYOUT_VALUE(l, WEFT_COPY_D2H);
  WEFT_LAYOUT_VALUE(l, WEFT_COPY_D2D);
  WEFT_LAYOUT_ENUM(l, WeftDtype);
  WEFT_LAYOUT_VALUE(l, WEFT_BF16);
  WEFT_LAYOUT_VALUE(l, WEFT_F16);
  WEFT_LAYOUT_VALUE(l, WEFT_F32);
  WEFT_LAYOUT_VALUE(l, WEFT_I32);
  WEFT_LAYOUT_VALUE(l, WEFT_U8);
  WEFT_LAYOUT_ENUM(l, WeftGemmFlags);
  WEFT_LAYOUT_VALUE(l, WEFT_GEMM_B_NK);
  WEFT_LAYOUT_VALUE(l, WEFT_GEMM_OUT_F32);
  WEFT_LAYOUT_ENUM(l, WeftGemmFailure);
  WEFT_LAYOUT_VALUE(l, WEFT_GEMM_FAIL_BARRIER_TIMEOUT);
  WEFT_LAYOUT_VALUE(l, WEFT_GEMM_FAIL_HOOK_WAIT);
  WEFT_LAYOUT_ENUM(l, WeftGemmStage);
  WEFT_LAYOUT_VALUE(l, WEFT_GEMM_STAGE_PRODUCER);
  WEFT_LAYOUT_VALUE(l, WEFT_GEMM_STAGE_CONSUMER);
  WEFT_LAYOUT_VALUE(l, WEFT_GEMM_STAGE_EPILOGUE);
  WEFT_LAYOUT_VALUE(l, WEFT_GEMM_STAGE_FINISH);
  WEFT_LAYOUT_ENUM(l, WeftAbi);
  WEFT_LAYOUT_VALUE(l, WEFT_ABI_VERSION);
}

}  // namespace weft::abi_layout
