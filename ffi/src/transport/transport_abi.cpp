// transport_abi.cpp — the weft_transport_* C ABI over weft::Transport.
#include <cstring>
#include <string>
#include <vector>

#include "status.hpp"
#include "transport/host_memory.hpp"
#include "transport/live_counters.hpp"
#include "transport/transport_handle.hpp"
#include "weft.h"

namespace weft {

LiveCounters& live_counters() {
  static LiveCounters c;
  return c;
}

}  // namespace weft

using namespace weft;

namespace {

Transport& get(WeftTransport* t) {
  WEFT_REQUIRE(t && t->transport, "transport must be an open WeftTransport");
  return *t->transport;
}

std::vector<std::vector<uint8_t>> split(const uint8_t* blobs, uint64_t stride, int32_t count,
                                        const char* what) {
  WEFT_REQUIRE(blobs && stride > 0 && count > 0, "%s: blobs must not be NULL, stride and count > 0",
               what);
  std::vector<std::vector<uint8_t>> out(count);
  for (int32_t i = 0; i < count; ++i) out[i].assign(blobs + i * stride, blobs + (i + 1) * stride);
  return out;
}

}  // namespace

extern "C" {

WEFT_API int weft_transport_open(const WeftTransportParams* params, WeftTransport** out) {
  return guard([&] {
    WEFT_REQUIRE(params && out, "params and out must not be NULL");
    WEFT_REQUIRE(params->size >= sizeof(WeftTransportParams) && params->version == 1,
                 "params must be a WeftTransportParams version 1 (size %u, version %u)",
                 params->size, params->version);
    TransportOptions o;
    o.rank = params->rank;
    o.world_size = params->world_size;
    o.device = params->device;
    o.same_host = params->same_host != 0;
    o.timeout_ms = params->timeout_ms ? params->timeout_ms : 30000;
    if (params->provider) o.provider = reinterpret_cast<const char*>(params->provider);
    WEFT_REQUIRE(o.device >= -1, "device must be -1 (host memory only) or a GPU index (got %d)",
                 o.device);
    auto handle = std::make_unique<WeftTransport>();
    handle->transport = open_fabric_transport(o);
    *out = handle.release();
  });
}

WEFT_API int weft_transport_close(WeftTransport* transport) {
  return guard([&] {
    if (!transport) return;
    WEFT_REQUIRE(transport->proxies.load() == 0,
                 "the transport still has %d running prox%s: stop them first",
                 transport->proxies.load(), transport->proxies.load() == 1 ? "y" : "ies");
    delete transport;
  });
}

WEFT_API int weft_transport_info(WeftTransport* transport, const char** out_json) {
  return guard([&] {
    WEFT_REQUIRE(out_json, "out_json must not be NULL");
    Transport& t = get(transport);
    static thread_local std::string json;
    json = t.info_json();
    *out_json = json.c_str();
  });
}

WEFT_API int weft_transport_address(WeftTransport* transport, const uint8_t** out_blob,
                                    uint64_t* out_bytes) {
  return guard([&] {
    WEFT_REQUIRE(out_blob && out_bytes, "out_blob and out_bytes must not be NULL");
    const auto& a = get(transport).local_address();
    *out_blob = a.data();
    *out_bytes = a.size();
  });
}

WEFT_API int weft_transport_connect(WeftTransport* transport, const uint8_t* blobs, uint64_t stride,
                                    int32_t count) {
  return guard([&] {
    Transport& t = get(transport);
    t.connect(split(blobs, stride, count, "weft_transport_connect"));
  });
}

WEFT_API int weft_transport_register(WeftTransport* transport, void* base, uint64_t bytes,
                                     int32_t device, int32_t* out_region) {
  return guard([&] {
    WEFT_REQUIRE(out_region, "out_region must not be NULL");
    Transport& t = get(transport);
    std::lock_guard<std::recursive_mutex> lock(t.lock());
    *out_region = t.register_region(base, bytes, device);
  });
}

WEFT_API int weft_transport_region_descriptor(WeftTransport* transport, int32_t region,
                                              const uint8_t** out_blob, uint64_t* out_bytes) {
  return guard([&] {
    WEFT_REQUIRE(out_blob && out_bytes, "out_blob and out_bytes must not be NULL");
    Transport& t = get(transport);
    std::lock_guard<std::recursive_mutex> lock(t.lock());
    const auto& d = t.region_descriptor(region);
    *out_blob = d.data();
    *out_bytes = d.size();
  });
}

WEFT_API int weft_transport_region_connect(WeftTransport* transport, int32_t region,
                                           const uint8_t* blobs, uint64_t stride, int32_t count) {
  return guard([&] {
    Transport& t = get(transport);
    t.connect_region(region, split(blobs, stride, count, "weft_transport_region_connect"));
  });
}

WEFT_API int weft_transport_deregister(WeftTransport* transport, int32_t region) {
  return guard([&] { get(transport).deregister_region(region); });
}

WEFT_API int weft_transport_host_alloc(uint64_t bytes, void** out_host, void** out_device) {
  return guard([&] {
    WEFT_REQUIRE(out_host, "out_host must not be NULL");
    WEFT_REQUIRE(bytes > 0, "bytes must be > 0");
    HostMemory m(bytes);
    void* device = m.device();
    *out_host = m.release();
    if (out_device) *out_device = device;
  });
}

WEFT_API int weft_transport_host_free(void* host) {
  return guard([&] {
    if (host) HostMemory::free_released(host);
  });
}

WEFT_API int weft_transport_counters(WeftTransportCounters* out) {
  return guard([&] {
    WEFT_REQUIRE(out && out->size >= sizeof(WeftTransportCounters),
                 "out must be a WeftTransportCounters with size set");
    LiveCounters& c = live_counters();
    out->version = 1;
    out->transports = c.transports.load();
    out->regions = c.regions.load();
    out->proxy_threads = c.proxy_threads.load();
    out->host_buffers = c.host_buffers.load();
  });
}

}  // extern "C"
