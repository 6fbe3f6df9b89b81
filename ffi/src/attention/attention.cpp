// attention.cpp — weft_attention: validates, picks the configuration, encodes the four tensor maps
// and launches the attention engine (cuda/attention) with the local KV source; its choose and
// reference entry points.
#include <cuda_runtime_api.h>

#include "attention/attention.h"
#include "attention_params.hpp"
#include "device_guard.hpp"
#include "op_launch.hpp"
#include "out_struct.hpp"
#include "status.hpp"
#include "weft.h"

using namespace weft;

extern "C" {

WEFT_API int weft_attention(const WeftAttentionParams* params, const WeftOpLaunch* launch) {
  return guard([&] {
    const attn_abi::Validated v = attn_abi::validate(params);
    const attn::CompletionWords completion = completion_words<attn::CompletionWords>(launch);
    DeviceGuard g(v.device);
    attn::LocalLaunch l = attn_abi::local_launch(*params, v);
    l.completion = completion;
    // The completion slot's third word (weft.h, WeftOpLaunch: 0 between launches, one launch at a
    // time): the tile scheduler's counter. Without a completion, the static tile order.
    l.tile_counter = completion.arrivals != nullptr ? completion.arrivals + 2 : nullptr;
    WEFT_CUDA(attn::launch_local(l));
  });
}

WEFT_API int weft_attention_choose(const WeftAttentionParams* params, WeftAttentionChoice* out) {
  return guard([&] {
    require_out_struct(out, "WeftAttentionChoice");
    const attn_abi::Validated v = attn_abi::validate(params);
    DeviceGuard g(v.device);
    const attn::TileShape t = attn::tile_shape(params->head_dim);
    const attn::Problem q = attn_abi::problem(*params, v, t);
    out->block_m = t.block_m;
    out->block_n = t.block_n;
    out->stages = t.stages;
    out->tiles = q.tiles;
    out->section = q.section;
    out->ctas = attn_abi::grid_ctas(*params, q);
  });
}

WEFT_API int weft_reference_attention(const WeftAttentionParams* params, uint64_t out_f32, uint64_t lse_f32) {
  return guard([&] {
    const attn_abi::Validated v = attn_abi::validate(params);
    WEFT_REQUIRE(out_f32 != 0 && out_f32 % 4 == 0, "out_f32 must be a 4-byte aligned device address");
    DeviceGuard g(v.device);
    attn::Problem q = attn_abi::problem(*params, v, attn::tile_shape(params->head_dim));
    q.lse = reinterpret_cast<float*>(lse_f32);
    auto s = reinterpret_cast<cudaStream_t>(params->stream);
    WEFT_CUDA(attn::reference_attention(q, params->head_dim, reinterpret_cast<const void*>(params->q),
                                        reinterpret_cast<const void*>(params->k), reinterpret_cast<const void*>(params->v),
                                        reinterpret_cast<float*>(out_f32), s));
    if (!s) WEFT_CUDA(cudaStreamSynchronize(nullptr));
  });
}

}  // extern "C"
