// tensor_map.hpp — encoding the 2-D TMA tensor maps the GEMM engine reads and writes (weft_gemm and
// the fused ops both use it; the pointer may be a peer's memory as this process maps it).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace weft {

// A 2-D row-major tensor [outer, inner] with row stride `ld` elements, read or written in boxes of
// box[0] x box[1] elements through 128-byte swizzled shared memory. Out-of-range box parts read as
// zero and are not written. Throws WEFT_E_CUDA naming `name` when the driver rejects it.
void encode_2d(CUtensorMap* map, CUtensorMapDataType type, uint64_t elem_bytes, const void* ptr, uint64_t inner,
               uint64_t outer, uint64_t ld, const uint32_t box[2], const char* name);

// The same for bf16, the fused ops' only element type.
inline void encode_bf16(CUtensorMap* map, const void* ptr, uint64_t inner, uint64_t outer, uint64_t ld,
                        const uint32_t box[2], const char* name) {
  encode_2d(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, ptr, inner, outer, ld, box, name);
}

}  // namespace weft
