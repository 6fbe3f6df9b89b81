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

std::string error_text(const char* what, long rc) {
  const char* text = loaded().failure.empty() ? loaded().api.strerror(static_cast<int>(-rc)) : "?";
  return format("%s failed: %s (%ld)", what, text ? text : "?", rc);
}

}  // namespace weft::fabric

#endif
