// libfabric.hpp — libfabric, loaded at run time. libweft.so never links it: a machine without
// libfabric.so.1 still loads the library, and the transport then reports WEFT_E_UNSUPPORTED.
//
// Only the exported entry points are looked up here. Everything else in the libfabric API
// (fi_domain, fi_writemsg, fi_cq_read, fi_close, ...) is an inline function in the headers that
// calls through the ops tables of objects these entry points return, so it works unchanged.
#pragma once

#if __has_include(<rdma/fabric.h>) && !defined(WEFT_NO_FABRIC)
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#define WEFT_HAVE_FABRIC_HEADERS 1

#include <string>
#include <vector>

namespace weft::fabric {

constexpr uint32_t kApiVersion = FI_VERSION(1, 10);  // fi_mr_attr.iface (FI_HMEM) appeared in 1.10

struct Api {
  uint32_t (*version)();
  int (*getinfo)(uint32_t version, const char* node, const char* service, uint64_t flags,
                 const fi_info* hints, fi_info** info);
  void (*freeinfo)(fi_info* info);
  fi_info* (*dupinfo)(const fi_info* info);
  int (*fabric)(fi_fabric_attr* attr, fid_fabric** fabric, void* context);
  const char* (*strerror)(int errnum);
};

// The loaded library. Throws WEFT_E_UNSUPPORTED (with the reason) when it cannot be loaded.
const Api& api();

// "1.20" for the loaded library.
std::string version_string();

// "fi_xxx failed: <fi_strerror> (-N)" for a negative libfabric return code.
std::string error_text(const char* what, long rc);

// The providers that offer what the proxy needs (reliable-datagram endpoints with RMA), each once,
// in libfabric's order of preference, and whether they register GPU memory (FI_HMEM).
struct Provider {
  std::string name;
  bool hmem;
};
std::vector<Provider> rdm_rma_providers();

}  // namespace weft::fabric

#endif
