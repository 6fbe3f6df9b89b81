#include "ring_mover.hpp"

#include <cuda.h>

#include "driver.hpp"
#include "status.hpp"

namespace weft::attn_abi {

namespace {

void stream_wait(cudaStream_t st, const uint64_t* word, uint64_t value) {
  const CUresult r = driver::streamWaitValue64()(st, reinterpret_cast<CUdeviceptr>(word), value, CU_STREAM_WAIT_VALUE_GEQ);
  WEFT_REQUIRE(r == CUDA_SUCCESS, "cuStreamWaitValue64 failed (CUresult %d)", int(r));
}

void stream_write(cudaStream_t st, uint64_t* word, uint64_t value) {
  const CUresult r = driver::streamWriteValue64()(st, reinterpret_cast<CUdeviceptr>(word), value, 0);
  WEFT_REQUIRE(r == CUDA_SUCCESS, "cuStreamWriteValue64 failed (CUresult %d)", int(r));
}

class CopyEngineMover final : public RingMover {
 public:
  explicit CopyEngineMover(const RingBuffers& b) : b_(b) {
    for (int32_t s = 0; s < b.world; ++s) {
      cudaStream_t st = nullptr;
      if (s != b.rank) WEFT_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
      side_.push_back(st);
    }
  }

  ~CopyEngineMover() override {
    for (cudaStream_t st : side_) {
      if (st) (void)cudaStreamDestroy(st);
    }
  }

  void enqueue(uint64_t epoch) override {
    const uint64_t row = uint64_t(b_.group_heads) * b_.head_dim * 2;  // bytes of one slot row
    const uint64_t src_pitch = uint64_t(b_.kv_heads) * b_.head_dim * 2;
    // Upstream peers first, in the order the kernel reads them (r - 1, r - 2, ...); each on its own
    // stream, so the copies from different peers run at once.
    for (int32_t n = 1; n < b_.world; ++n) {
      const int32_t s = (b_.rank - n + b_.world) % b_.world;
      cudaStream_t st = side_[s];
      stream_wait(st, b_.go, epoch);
      const uint64_t height = uint64_t(b_.shard[s]);
      for (int32_t g = 0; g < b_.groups; ++g) {
        if (g >= b_.slots) stream_wait(st, b_.group_done + (g - b_.slots), epoch * uint64_t(b_.ctas));
        const int32_t heads = std::min(b_.group_heads, b_.kv_heads - g * b_.group_heads);
        const uint64_t width = uint64_t(heads) * b_.head_dim * 2;
        const uint64_t head0 = uint64_t(g) * b_.group_heads * b_.head_dim * 2;
        const uint64_t dst = (uint64_t(g % b_.slots) * b_.slot_rows + b_.source_row[s]) * row;
        // Per sequence: the peer's first shard rows of its kv_rows (k and v may have spare rows).
        for (int32_t seq = 0; seq < b_.batch; ++seq) {
          const uint64_t to = dst + uint64_t(seq) * b_.shard[s] * row;
          const uint64_t from = head0 + uint64_t(seq) * b_.kv_rows[s] * src_pitch;
          WEFT_CUDA(cudaMemcpy2DAsync(b_.recv_k + to, row, b_.peer_k[s] + from, src_pitch, width, height, cudaMemcpyDefault, st));
          WEFT_CUDA(cudaMemcpy2DAsync(b_.recv_v + to, row, b_.peer_v[s] + from, src_pitch, width, height, cudaMemcpyDefault, st));
        }
        stream_write(st, b_.flags + int64_t(g) * b_.world + s, epoch);
      }
      stream_write(st, b_.pulled + s, epoch);
    }
  }

  cudaError_t drain() override {
    cudaError_t first = cudaSuccess;
    for (cudaStream_t st : side_) {
      if (!st) continue;
      const cudaError_t e = cudaStreamSynchronize(st);
      if (first == cudaSuccess) first = e;
    }
    return first;
  }

 private:
  RingBuffers b_;
  std::vector<cudaStream_t> side_;
};

}  // namespace

std::unique_ptr<RingMover> copy_engine_mover(const RingBuffers& b) { return std::make_unique<CopyEngineMover>(b); }

}  // namespace weft::attn_abi
