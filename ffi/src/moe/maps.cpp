// maps.cpp — see maps.hpp.
#include "moe/maps.hpp"

#include "driver.hpp"
#include "status.hpp"

namespace weft::moe {

void encode_weights(CUtensorMap* map, const void* w, int64_t groups, int64_t n, int64_t k, bool n_major, int64_t first,
                    int64_t cols, int tile_n, bool paired, const char* name) {
  // Element (g, row, col) of the row-major [groups, rows, inner] tensor, inner = N (n_major) or K.
  const uint64_t inner = uint64_t(n_major ? n : k), rows = uint64_t(n_major ? k : n);
  const char* base = static_cast<const char*>(w) + (n_major ? first : first * k) * 2;
  const cuuint64_t dims[3] = {n_major ? uint64_t(cols) : uint64_t(k), n_major ? uint64_t(k) : uint64_t(cols), uint64_t(groups)};
  const cuuint64_t strides[2] = {inner * 2, rows * inner * 2};
  const cuuint32_t box[3] = {64, n_major ? 64u : uint32_t(paired ? tile_n / 2 : tile_n), 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult r = driver::tensorMapEncodeTiled()(
      map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<char*>(base), dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    WEFT_FAIL(WEFT_E_CUDA, "cuTensorMapEncodeTiled for %s failed (CUresult %d): [%lld, %llu, %llu] bf16", name,
              static_cast<int>(r), static_cast<long long>(groups), static_cast<unsigned long long>(rows),
              static_cast<unsigned long long>(inner));
}

}  // namespace weft::moe
