// nn.cpp — weft_nn_*: the decoder layers' C entry points. Each validates its params (sizes,
// alignment, which memory every address is in) and launches one kernel from cuda/nn on the
// params' stream, with that stream's device current.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "device_guard.hpp"
#include "nn/nn.h"
#include "op_launch.hpp"
#include "status.hpp"
#include "weft.h"

using namespace weft;

namespace {

constexpr int64_t kMaxRows = (int64_t(1) << 31) - 1;  // rows index the grid's x dimension
constexpr int64_t kMaxDim = int64_t(1) << 16;         // RMSNorm keeps a row in one CTA's registers

template <typename P>
void require_header(const P* p, const char* type, uint32_t version = 1) {
  WEFT_REQUIRE(p, "params must not be NULL");
  WEFT_REQUIRE(p->size == sizeof(P), "params->size is %u but this library's %s has %zu bytes", p->size, type, sizeof(P));
  WEFT_REQUIRE(p->version == version, "params->version is %u; this library reads version %u of %s", p->version, version,
               type);
}

void require_count(const char* name, int64_t v, int64_t max) {
  WEFT_REQUIRE(v >= 1 && v <= max, "%s must be in [1, %lld] (got %lld)", name, static_cast<long long>(max),
               static_cast<long long>(v));
}

void require_vec(const char* name, int64_t elems) {
  WEFT_REQUIRE(elems % 8 == 0, "%s (%lld) must be a multiple of 8 elements: the kernels move 16-byte vectors",
               name, static_cast<long long>(elems));
}

// Where an address lives: device memory of one GPU (>= 0), pinned host memory mapped into the GPUs'
// address space (kHostMapped), or neither (kUnusable: pageable memory, or no allocation at all).
constexpr int kHostMapped = -1;
constexpr int kUnusable = -2;

int memory_of(uint64_t address) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, reinterpret_cast<const void*>(address)) != cudaSuccess) {
    (void)cudaGetLastError();
    return kUnusable;
  }
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) return attr.device;
  if (attr.type == cudaMemoryTypeHost && attr.devicePointer == reinterpret_cast<void*>(address)) return kHostMapped;
  return kUnusable;
}

// The device every operand of one call shares: the first device address fixes it, the stream (when
// given) must agree.
class Operands {
 public:
  explicit Operands(uint64_t stream) : stream_(stream) {}

  // Device memory of the call's device, 16-byte aligned unless `align` says otherwise.
  Operands& device(const char* name, uint64_t address, uint64_t align = 16) {
    const int where = memory_of(aligned(name, address, align));
    WEFT_REQUIRE(where >= 0, "%s (%#llx) must be device memory", name, static_cast<unsigned long long>(address));
    join(name, where);
    return *this;
  }

  // Device memory of the call's device, or pinned host memory mapped for the GPU.
  Operands& readable(const char* name, uint64_t address, uint64_t align) {
    const int where = memory_of(aligned(name, address, align));
    WEFT_REQUIRE(where != kUnusable,
                 "%s (%#llx) must be device memory or pinned, mapped host memory (the GPU cannot reach pageable memory)",
                 name, static_cast<unsigned long long>(address));
    if (where >= 0) join(name, where);
    return *this;
  }

  int resolve() {
    if (stream_) {
      int sd = -1;
      WEFT_CUDA(cudaStreamGetDevice(reinterpret_cast<cudaStream_t>(stream_), &sd));
      WEFT_REQUIRE(device_ < 0 || sd == device_, "stream belongs to device %d but the operands are on device %d", sd,
                   device_);
      return sd;
    }
    WEFT_REQUIRE(device_ >= 0, "at least one operand must be device memory, or a stream must be given");
    return device_;
  }

 private:
  // Every operand: set, and aligned as its kernel reads it.
  static uint64_t aligned(const char* name, uint64_t address, uint64_t align) {
    WEFT_REQUIRE(address != 0, "%s must not be NULL", name);
    WEFT_REQUIRE(address % align == 0, "%s (%#llx) must be %llu-byte aligned", name,
                 static_cast<unsigned long long>(address), static_cast<unsigned long long>(align));
    return address;
  }

  void join(const char* name, int where) {
    if (device_ < 0) {
      device_ = where;
      first_ = name;
    }
    WEFT_REQUIRE(where == device_, "%s is on device %d but %s is on device %d: operands must share a device", name,
                 where, first_, device_);
  }

  uint64_t stream_;
  int device_ = -1;
  const char* first_ = "";
};

void require_disjoint(const char* a, uint64_t pa, const char* b, uint64_t pb) {
  WEFT_REQUIRE(pa != pb, "%s and %s must not be the same memory", a, b);
}

// Every entry point's frame: the params' header, then rules(p, ops), the op's own checks, which name
// its operands in ops; then launch(p) on the device the operands share (their stream's).
template <typename P, typename Rules, typename Launch>
int checked_launch(const P* params, const char* type, Rules&& rules, Launch&& launch, uint32_t version = 1) {
  return guard([&] {
    require_header(params, type, version);
    const P& p = *params;
    Operands ops(p.stream);
    rules(p, ops);
    DeviceGuard g(ops.resolve());
    launch(p);
  });
}

}  // namespace

extern "C" {

WEFT_API int weft_nn_embedding(const WeftEmbeddingParams* params) {
  return checked_launch(
      params, "WeftEmbeddingParams",
      [](const WeftEmbeddingParams& p, Operands& ops) {
        require_count("rows", p.rows, kMaxRows);
        require_count("vocab", p.vocab, kMaxRows);
        require_count("dim", p.dim, kMaxRows);
        require_vec("dim", p.dim);
        ops.device("table", p.table).device("ids", p.ids, 4).device("out", p.out);
      },
      [](const WeftEmbeddingParams& p) { WEFT_CUDA(nn::embedding(p)); });
}

WEFT_API int weft_nn_rms_norm(const WeftRmsNormParams* params) {
  return checked_launch(
      params, "WeftRmsNormParams",
      [](const WeftRmsNormParams& p, Operands& ops) {
        require_count("rows", p.rows, kMaxRows);
        require_count("dim", p.dim, kMaxDim);
        require_vec("dim", p.dim);
        WEFT_REQUIRE(p.eps > 0.0f && p.eps < 1.0f, "eps must be in (0, 1) (got %g)", double(p.eps));
        WEFT_REQUIRE(p.reserved == 0, "reserved must be 0");
        ops.device("x", p.x).device("weight", p.weight).device("out", p.out);
        if (p.residual) {
          ops.device("residual", p.residual);
          require_disjoint("residual", p.residual, "x", p.x);
          require_disjoint("residual", p.residual, "out", p.out);
        }
      },
      [](const WeftRmsNormParams& p) { WEFT_CUDA(nn::rms_norm(p)); });
}

WEFT_API int weft_nn_rope(const WeftRopeParams* params) {
  return checked_launch(
      params, "WeftRopeParams",
      [](const WeftRopeParams& p, Operands& ops) {
        require_count("rows", p.rows, kMaxRows);
        require_count("heads", p.heads, 1 << 16);
        require_count("head_dim", p.head_dim, 1 << 12);
        WEFT_REQUIRE(p.head_dim % 16 == 0,
                     "head_dim (%lld) must be a multiple of 16: each half of a head moves as 16-byte vectors",
                     static_cast<long long>(p.head_dim));
        WEFT_REQUIRE(p.row_stride >= p.heads * p.head_dim, "row_stride (%lld) must be >= heads x head_dim (%lld)",
                     static_cast<long long>(p.row_stride), static_cast<long long>(p.heads * p.head_dim));
        require_vec("row_stride", p.row_stride);
        WEFT_REQUIRE(p.theta > 1.0f, "theta must be > 1 (got %g)", double(p.theta));
        WEFT_REQUIRE(p.reserved == 0, "reserved must be 0");
        ops.device("x", p.x).device("positions", p.positions, 4);
      },
      [](const WeftRopeParams& p) { WEFT_CUDA(nn::rope(p)); });
}

WEFT_API int weft_nn_swiglu(const WeftSwigluParams* params) {
  return checked_launch(
      params, "WeftSwigluParams",
      [](const WeftSwigluParams& p, Operands& ops) {
        require_count("rows", p.rows, kMaxRows);
        require_count("dim", p.dim, kMaxRows);
        require_vec("dim", p.dim);
        ops.device("x", p.x).device("out", p.out);
        require_disjoint("x", p.x, "out", p.out);
      },
      [](const WeftSwigluParams& p) { WEFT_CUDA(nn::swiglu(p)); });
}

WEFT_API int weft_nn_kv_append(const WeftKvAppendParams* params) {
  return checked_launch(
      params, "WeftKvAppendParams",
      [](const WeftKvAppendParams& p, Operands& ops) {
        require_count("rows", p.rows, kMaxRows);
        require_count("width", p.width, kMaxRows);
        require_vec("width", p.width);
        WEFT_REQUIRE(p.src_stride >= p.width, "src_stride (%lld) must be >= width (%lld)",
                     static_cast<long long>(p.src_stride), static_cast<long long>(p.width));
        require_vec("src_stride", p.src_stride);
        require_count("slots", p.slots, kMaxRows);
        require_count("max_seq", p.max_seq, kMaxRows);
        ops.device("k", p.k).device("v", p.v).device("k_cache", p.k_cache).device("v_cache", p.v_cache);
        ops.device("slot_ids", p.slot_ids, 4).device("positions", p.positions, 4);
        require_disjoint("k_cache", p.k_cache, "v_cache", p.v_cache);
      },
      [](const WeftKvAppendParams& p) { WEFT_CUDA(nn::kv_append(p)); });
}

WEFT_API int weft_nn_cache_attention(const WeftCacheAttentionParams* params) {
  return checked_launch(
      params, "WeftCacheAttentionParams",
      [](const WeftCacheAttentionParams& p, Operands& ops) {
        require_count("rows", p.rows, kMaxRows);
        require_count("heads", p.heads, 65535);  // the grid's y dimension
        require_count("kv_heads", p.kv_heads, p.heads);
        WEFT_REQUIRE(p.heads % p.kv_heads == 0, "heads (%lld) must be a multiple of kv_heads (%lld)",
                     static_cast<long long>(p.heads), static_cast<long long>(p.kv_heads));
        require_count("head_dim", p.head_dim, 256);
        require_vec("head_dim", p.head_dim);
        WEFT_REQUIRE(p.q_stride >= p.heads * p.head_dim && p.out_stride >= p.heads * p.head_dim,
                     "q_stride (%lld) and out_stride (%lld) must be >= heads x head_dim (%lld)",
                     static_cast<long long>(p.q_stride), static_cast<long long>(p.out_stride),
                     static_cast<long long>(p.heads * p.head_dim));
        require_vec("q_stride", p.q_stride);
        require_vec("out_stride", p.out_stride);
        require_count("slots", p.slots, kMaxRows);
        require_count("max_seq", p.max_seq, kMaxRows);
        WEFT_REQUIRE(p.scale > 0.0f, "scale must be > 0 (got %g)", double(p.scale));
        WEFT_REQUIRE(p.reserved == 0, "reserved must be 0");
        ops.device("q", p.q).device("k_cache", p.k_cache).device("v_cache", p.v_cache).device("out", p.out);
        ops.device("slot_ids", p.slot_ids, 4).device("positions", p.positions, 4);
        require_disjoint("q", p.q, "out", p.out);
      },
      [](const WeftCacheAttentionParams& p) { WEFT_CUDA(nn::cache_attention(p)); });
}

WEFT_API int weft_nn_sample(const WeftSampleParams* params, const WeftOpLaunch* launch) {
  nn::CompletionWords completion{};
  return checked_launch(
      params, "WeftSampleParams",
      [&](const WeftSampleParams& p, Operands& ops) {
        WEFT_REQUIRE(p.dtype == WEFT_BF16 || p.dtype == WEFT_F32, "dtype must be WEFT_BF16 or WEFT_F32 (got %d)", p.dtype);
        WEFT_REQUIRE(p.reserved == 0, "reserved must be 0");
        require_count("rows", p.rows, kMaxRows);
        // Counts and indices are exact in fp32 below 2^24.
        require_count("vocab", p.vocab, (int64_t(1) << 24) - 1);
        WEFT_REQUIRE(p.row_stride >= p.vocab, "row_stride (%lld) must be >= vocab (%lld)",
                     static_cast<long long>(p.row_stride), static_cast<long long>(p.vocab));
        completion = completion_words<nn::CompletionWords>(launch);
        ops.device("logits", p.logits, p.dtype == WEFT_BF16 ? 2 : 4);
        ops.readable("temperature", p.temperature, 4).readable("top_k", p.top_k, 4).readable("top_p", p.top_p, 4);
        ops.readable("seed", p.seed, 8).readable("counter", p.counter, 8).readable("tokens", p.tokens, 4);
        if (p.logprobs) ops.readable("logprobs", p.logprobs, 4);
        if (completion.done) {
          ops.readable("launch->done", reinterpret_cast<uint64_t>(completion.done), 8);
          ops.device("launch->arrivals", reinterpret_cast<uint64_t>(completion.arrivals), 4);
        }
      },
      [&](const WeftSampleParams& p) { WEFT_CUDA(nn::sample(p, completion)); },
      2);  // version 2: the completion is the launch's
}

}  // extern "C"
