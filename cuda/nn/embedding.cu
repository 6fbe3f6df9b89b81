// embedding.cu — out[r, :] = table[ids[r], :], one 16-byte vector per thread.
//
// Napkin: a decode step of 64 rows of 4096 reads 512 KiB and writes 512 KiB: 0.3 us at 3.3 TB/s,
// so the launch (~3 us) is the cost; a 2048-token prefill moves 32 MiB, ~10 us.
#include <cmath>

#include "nn.h"
#include "vec.cuh"

namespace weft::nn {

namespace {

__global__ void embedding_kernel(const bf16* table, const int32_t* ids, bf16* out, int64_t rows, int64_t vocab,
                                 int64_t dim) {
  const int64_t per_row = dim / kVec, total = rows * per_row;
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < total; v += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = v / per_row, c = (v % per_row) * kVec;
    const int32_t id = ids[r];
    bf16* dst = out + r * dim + c;
    if (id < 0 || id >= vocab) fill8(dst, NAN);  // loud, and never a read outside the table
    else copy8(dst, table + int64_t(id) * dim + c);
  }
}

}  // namespace

cudaError_t embedding(const WeftEmbeddingParams& p) {
  constexpr int kThreads = 256;
  const uint64_t vectors = uint64_t(p.rows) * uint64_t(p.dim / kVec);
  embedding_kernel<<<grid_for(vectors, kThreads), kThreads, 0, reinterpret_cast<cudaStream_t>(p.stream)>>>(
      reinterpret_cast<const bf16*>(p.table), reinterpret_cast<const int32_t*>(p.ids), reinterpret_cast<bf16*>(p.out),
      p.rows, p.vocab, p.dim);
  return cudaGetLastError();
}

}  // namespace weft::nn
