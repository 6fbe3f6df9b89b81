#include "tensor_map.hpp"

#include "driver.hpp"
#include "status.hpp"

namespace weft {

void encode_2d(CUtensorMap* map, CUtensorMapDataType type, uint64_t elem_bytes, const void* ptr, uint64_t inner,
               uint64_t outer, uint64_t ld, const uint32_t box[2], const char* name) {
  const cuuint64_t dims[2] = {inner, outer};
  const cuuint64_t strides[1] = {ld * elem_bytes};
  const cuuint32_t box_dims[2] = {box[0], box[1]};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = driver::tensorMapEncodeTiled()(
      map, type, 2, const_cast<void*>(ptr), dims, strides, box_dims, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    WEFT_FAIL(WEFT_E_CUDA, "cuTensorMapEncodeTiled for %s failed (CUresult %d): %llu x %llu, stride %llu bytes", name,
              static_cast<int>(r), static_cast<unsigned long long>(outer), static_cast<unsigned long long>(inner),
              static_cast<unsigned long long>(ld * elem_bytes));
}

}  // namespace weft
