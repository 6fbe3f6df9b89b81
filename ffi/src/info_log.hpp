// info_log.hpp — whether WEFT_LOG (README, "Environment variables") asks the native library to say on
// stderr what it chose or gave up on: "info" or "debug". Read once per process.
#pragma once

#include <cstdlib>
#include <cstring>

namespace weft {

inline bool info_log_enabled() {
  static const bool enabled = [] {
    const char* log = std::getenv("WEFT_LOG");
    return log && (std::strcmp(log, "info") == 0 || std::strcmp(log, "debug") == 0);
  }();
  return enabled;
}

}  // namespace weft
