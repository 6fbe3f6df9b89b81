// attention_params.hpp — validation of WeftAttentionParams and the launch it implies (tile shape,
// grid, tile order, tensor maps), shared by weft_attention, weft_attention_choose and the reference.
#pragma once

#include "attention/attention.h"
#include "weft.h"

namespace weft::attn_abi {

struct Validated {
  int device;
  bool varlen;
  int64_t rows_q, rows_k;  // rows of q / out and of k / v
};

// Checks every field (pointers, shapes, alignment, devices, stream) and throws WEFT_E_INVALID
// naming the field and the rule.
Validated validate(const WeftAttentionParams* p);

// The problem the kernel reads (problem.h) for the validated params, on the current device.
attn::Problem problem(const WeftAttentionParams& p, const Validated& v, const attn::TileShape& t);

// The persistent grid: one CTA per SM at most, at most one per tile, at most max_ctas.
int grid_ctas(const WeftAttentionParams& p, const attn::Problem& problem);

// The launch of the validated params on the current device (tensor maps encoded; untracked: the
// caller sets the completion words from its WeftOpLaunch).
attn::LocalLaunch local_launch(const WeftAttentionParams& p, const Validated& v);

}  // namespace weft::attn_abi
