// fabric_info.cpp — which libfabric providers this machine offers, for `weft info` and provider
// selection. libfabric is dlopen'ed: its absence is reported, never a load failure.
#include <string>

#include "status.hpp"
#include "transport/libfabric.hpp"
#include "weft.h"

namespace {

// The text as a JSON string literal (a load failure quotes dlerror()).
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += (static_cast<unsigned char>(ch) < 0x20) ? ' ' : ch;
  }
  return out + "\"";
}

std::string probe() {
#ifndef WEFT_HAVE_FABRIC_HEADERS
  return "{\"libfabric\":null,\"reason\":\"built without libfabric headers\",\"providers\":[]}";
#else
  try {
    std::string json = "{\"libfabric\":" + quoted(weft::fabric::version_string()) + ",\"providers\":[";
    bool first = true;
    for (const weft::fabric::Provider& p : weft::fabric::rdm_rma_providers()) {
      json += std::string(first ? "" : ",") + "{\"name\":" + quoted(p.name) + ",\"hmem\":" + (p.hmem ? "true" : "false") + "}";
      first = false;
    }
    return json + "]}";
  } catch (const weft::Error& e) {
    return "{\"libfabric\":null,\"reason\":" + quoted(e.message) + ",\"providers\":[]}";
  }
#endif
}

}  // namespace

extern "C" WEFT_API int weft_fabric_providers(const char** out_json) {
  return weft::guard([&] {
    WEFT_REQUIRE(out_json, "out_json must not be NULL");
    static const std::string json = probe();
    *out_json = json.c_str();
  });
}
