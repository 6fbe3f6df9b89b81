// out_struct.hpp — the check a *_choose entry point makes of the ABI struct it fills (weft.h): given,
// and of the size and version this library writes, so that an older or newer caller's struct is
// never written past its end.
#pragma once

#include "status.hpp"

namespace weft {

template <class T>
void require_out_struct(const T* out, const char* type, const char* name = "out") {
  WEFT_REQUIRE(out, "%s must not be NULL", name);
  WEFT_REQUIRE(out->size == sizeof(T) && out->version == 1, "%s must be a %s with size %zu and version 1 (got size %u, version %u)",
               name, type, sizeof(T), unsigned(out->size), unsigned(out->version));
}

}  // namespace weft
