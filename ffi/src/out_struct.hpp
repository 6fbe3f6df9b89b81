// out_struct.hpp — the check a *_choose entry point makes of the ABI struct it fills (weft.h): given,
// and of the size and version this library writes, so that an older or newer caller's struct is
// never written past its end.
#pragma once

#include "status.hpp"

namespace weft {

template <class T>
void require_out_struct(const T* out, const char* type) {
  WEFT_REQUIRE(out, "out must not be NULL");
  WEFT_REQUIRE(out->size == sizeof(T) && out->version == 1, "out->size/version must be sizeof(%s) (%zu) and 1", type,
               sizeof(T));
}

}  // namespace weft
