// fabric_info.cpp — which libfabric providers this machine offers, for `weft info` and provider
// selection. libfabric is dlopen'ed: its absence is reported, never a load failure.
#include <dlfcn.h>

#include <set>
#include <string>

#include "status.hpp"
#include "weft.h"

#if __has_include(<rdma/fabric.h>)
#include <rdma/fabric.h>
#define WEFT_HAVE_FABRIC_HEADERS 1
#endif

namespace {

std::string probe() {
#ifndef WEFT_HAVE_FABRIC_HEADERS
  return "{\"libfabric\":null,\"reason\":\"built without libfabric headers\",\"providers\":[]}";
#else
  void* h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return "{\"libfabric\":null,\"reason\":\"libfabric.so.1 not found\",\"providers\":[]}";
  auto version = reinterpret_cast<uint32_t (*)()>(dlsym(h, "fi_version"));
  auto getinfo = reinterpret_cast<int (*)(uint32_t, const char*, const char*, uint64_t,
                                          const fi_info*, fi_info**)>(dlsym(h, "fi_getinfo"));
  auto freeinfo = reinterpret_cast<void (*)(fi_info*)>(dlsym(h, "fi_freeinfo"));
  auto dupinfo = reinterpret_cast<fi_info* (*)(const fi_info*)>(dlsym(h, "fi_dupinfo"));
  if (!version || !getinfo || !freeinfo || !dupinfo)
    return "{\"libfabric\":null,\"reason\":\"libfabric.so.1 lacks fi_getinfo\",\"providers\":[]}";
  uint32_t v = version();
  std::string json = "{\"libfabric\":\"" + std::to_string(v >> 16) + "." +
                     std::to_string(v & 0xffff) + "\",\"providers\":[";
  // Reliable datagram endpoints with RMA: what the proxy needs. fi_allocinfo is a macro over
  // fi_dupinfo(NULL).
  fi_info* hints = dupinfo(nullptr);
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_RMA;
  hints->mode = ~0ULL;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                                FI_MR_ENDPOINT | FI_MR_HMEM;
  fi_info* info = nullptr;
  std::set<std::string> seen;
  bool first = true;
  if (getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &info) == 0) {
    for (fi_info* i = info; i; i = i->next) {
      std::string name = i->fabric_attr && i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "?";
      if (!seen.insert(name).second) continue;
      json += std::string(first ? "" : ",") + "{\"name\":\"" + name + "\",\"hmem\":" +
              ((i->caps & FI_HMEM) ? "true" : "false") + "}";
      first = false;
    }
    freeinfo(info);
  }
  freeinfo(hints);
  return json + "]}";
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
