#include "transport/libfabric.hpp"

#ifdef WEFT_HAVE_FABRIC_HEADERS

#include <dlfcn.h>

#include "status.hpp"

namespace weft::fabric {

namespace {

struct Loaded {
  Api api{};
  std::string failure;  // empty when loaded

  Loaded() {
    // Never closed: providers start threads and register atexit handlers inside the library.
    void* h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      failure = std::string("libfabric.so.1 could not be loaded (") + dlerror() +
                "): install libfabric (Debian/Ubuntu: libfabric1) to use the inter-node transport";
      return;
    }
    auto sym = [&](const char* name) { return dlsym(h, name); };
    api.version = reinterpret_cast<decltype(api.version)>(sym("fi_version"));
    api.getinfo = reinterpret_cast<decltype(api.getinfo)>(sym("fi_getinfo"));
    api.freeinfo = reinterpret_cast<decltype(api.freeinfo)>(sym("fi_freeinfo"));
    api.dupinfo = reinterpret_cast<decltype(api.dupinfo)>(sym("fi_dupinfo"));
    api.fabric = reinterpret_cast<decltype(api.fabric)>(sym("fi_fabric"));
    api.strerror = reinterpret_cast<decltype(api.strerror)>(sym("fi_strerror"));
    if (!api.version || !api.getinfo || !api.freeinfo || !api.dupinfo || !api.fabric ||
        !api.strerror)
      failure = "libfabric.so.1 lacks one of fi_version, fi_getinfo, fi_freeinfo, fi_dupinfo, "
                "fi_fabric, fi_strerror";
  }
};

const Loaded& loaded() {
  static const Loaded l;
  return l;
}

}  // namespace

const Api& api() {
  const Loaded& l = loaded();
  if (!l.failure.empty()) WEFT_FAIL(WEFT_E_UNSUPPORTED, "%s", l.failure.c_str());
  return l.api;
}

std::string version_string() {
  uint32_t v = api().version();
  return std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v));
}

std::vector<Provider> rdm_rma_providers() {
  const Api& fi = api();
  fi_info* hints = fi.dupinfo(nullptr);  // fi_allocinfo is a macro over fi_dupinfo(NULL)
  hints->caps = FI_RMA;
  hints->ep_attr->type = FI_EP_RDM;
  hints->mode = ~0ULL;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                                FI_MR_ENDPOINT | FI_MR_HMEM;
  fi_info* info = nullptr;
  std::vector<Provider> out;
  if (fi.getinfo(kApiVersion, nullptr, nullptr, 0, hints, &info) == 0) {
    for (fi_info* i = info; i; i = i->next) {
      const std::string name = i->fabric_attr && i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "?";
      bool seen = false;
      for (const Provider& p : out) seen = seen || p.name == name;
      if (!seen) out.push_back({name, (i->caps & FI_HMEM) != 0});
    }
    fi.freeinfo(info);
  }
  fi.freeinfo(hints);
  return out;
}

std::string error_text(const char* what, long rc) {
  const char* text = loaded().failure.empty() ? loaded().api.strerror(static_cast<int>(-rc)) : "?";
  return format("%s failed: %s (%ld)", what, text ? text : "?", rc);
}

}  // namespace weft::fabric

#endif
