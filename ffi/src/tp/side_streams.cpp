// side_streams.cpp — what every tensor-parallel path shares: the copy-engine movers' side streams,
// the stream memory operations they wait and signal with, and the completion words of a launch.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "driver.hpp"
#include "status.hpp"
#include "tp/plan.hpp"

namespace weft::tp {

// The copy-engine movers' side streams, one per peer. They start behind the kernel's entered word
// (all-gather, reduce-scatter / all-reduce), or its first wave's ready word (the exchange:
// exchange.cpp, copies()), never behind an event recorded before the kernel.
void create_side_streams(WeftTpPlan& plan) {
  for (int j = 0; j + 1 < plan.problem.world; ++j) {
    cudaStream_t side = nullptr;
    WEFT_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    plan.side.push_back(side);
  }
}

// Stream memory operations on a side stream: wait until `word` passes `value` (CU_STREAM_WAIT_VALUE_*
// `flags`), or write `value` once the stream's earlier work is done.
void stream_wait(cudaStream_t st, const uint64_t* word, uint64_t value, unsigned flags) {
  const CUresult r = driver::streamWaitValue64()(st, reinterpret_cast<CUdeviceptr>(word), value, flags);
  WEFT_REQUIRE(r == CUDA_SUCCESS, "cuStreamWaitValue64 failed (CUresult %d)", int(r));
}
void stream_write(cudaStream_t st, uint64_t* word, uint64_t value) {
  const CUresult r = driver::streamWriteValue64()(st, reinterpret_cast<CUdeviceptr>(word), value, 0);
  WEFT_REQUIRE(r == CUDA_SUCCESS, "cuStreamWriteValue64 failed (CUresult %d)", int(r));
}


gemm::TileConfig tile_of(int tile_n) { return gemm::TileConfig{tile_n, 1, 1}; }

gemm::CompletionWords scratch_words(const WeftTpPlan& plan) {
  return gemm::CompletionWords{plan.scratch_dev, plan.epoch, plan.scratch_arrivals};
}

gemm::CompletionWords launch_words(const WeftOpLaunch& l) {
  return gemm::CompletionWords{reinterpret_cast<uint64_t*>(l.done), l.seq, reinterpret_cast<uint32_t*>(l.arrivals)};
}

}  // namespace weft::tp
