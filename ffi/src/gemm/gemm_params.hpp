// gemm_params.hpp — validation of WeftGemmParams and the configuration heuristic, shared by
// weft_gemm, weft_gemm_choose and the cuBLASLt baseline (which takes the same struct).
#pragma once

#include "gemm/gemm.h"
#include "weft.h"

namespace weft::gemm_abi {

struct Validated {
  int device;
  bool b_nk;
  bool out_f32;
};

// Checks the problem part of params (pointers, sizes, strides, alignment, devices, stream) and
// throws WEFT_E_INVALID naming the field and the rule.
Validated validate_problem(const WeftGemmParams* p);

struct Choice {
  gemm::TileConfig tile;
  int group_m;
  int stages;
  int ctas;
};

// Applies the override fields (each validated) and chooses the rest for this device.
Choice choose(const WeftGemmParams& p, const Validated& v);

}  // namespace weft::gemm_abi
