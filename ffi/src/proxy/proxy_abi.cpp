// proxy_abi.cpp — the weft_proxy_* C ABI over weft::proxy::Proxy.
#include <memory>
#include <string>

#include <cuda_runtime_api.h>

#include "device_guard.hpp"
#include "primitives/proxy_command.h"
#include "proxy/device_push.h"
#include "proxy/proxy.hpp"
#include "status.hpp"
#include "transport/transport_handle.hpp"
#include "weft.h"

using namespace weft;
using namespace weft::proxy;

struct WeftProxy {
  WeftTransport* owner = nullptr;
  std::unique_ptr<Proxy> proxy;
};

namespace {

Proxy& get(WeftProxy* p) {
  WEFT_REQUIRE(p && p->proxy, "proxy must be a running WeftProxy");
  return *p->proxy;
}

Command to_command(const WeftProxyCommand& c, uint32_t index) {
  WEFT_REQUIRE(c.version == 1, "commands[%u].version must be 1 (got %u)", index, c.version);
  WEFT_REQUIRE(c.opcode >= WEFT_PROXY_PUT && c.opcode <= WEFT_PROXY_BARRIER,
               "commands[%u].opcode %u is not a WeftProxyOpcode", index, c.opcode);
  WEFT_REQUIRE((c.flags & ~WEFT_PROXY_FLAG_SIGNAL) == 0, "commands[%u].flags %#x has unknown bits",
               index, c.flags);
  auto region = [&](int32_t r, const char* name) {
    WEFT_REQUIRE(r >= 0 && r <= 255, "commands[%u].%s %d is not a region index", index, name, r);
    return static_cast<uint8_t>(r);
  };
  WEFT_REQUIRE(c.peer >= 0, "commands[%u].peer %d is negative", index, c.peer);
  Command out{};
  out.header = c.opcode;
  out.peer = static_cast<uint32_t>(c.peer);
  out.src_region = region(c.src_region, "src_region");
  out.dst_region = region(c.dst_region, "dst_region");
  out.signal_region = region(c.signal_region, "signal_region");
  out.flags = static_cast<uint8_t>(c.flags);
  out.src_offset = c.src_offset;
  out.dst_offset = c.dst_offset;
  out.bytes = c.bytes;
  out.signal_offset = c.signal_offset;
  out.signal_value = c.signal_value;
  out.cookie = c.cookie;
  return out;
}

}  // namespace

extern "C" {

WEFT_API int weft_proxy_start(WeftTransport* transport, const WeftProxyParams* params,
                              WeftProxy** out) {
  return guard([&] {
    WEFT_REQUIRE(transport && transport->transport, "transport must be an open WeftTransport");
    WEFT_REQUIRE(params && out, "params and out must not be NULL");
    WEFT_REQUIRE(params->size >= sizeof(WeftProxyParams) && params->version == 1,
                 "params must be a WeftProxyParams version 1 (size %u, version %u)", params->size,
                 params->version);
    ProxyOptions o;
    if (params->fifo_slots) o.fifo_slots = params->fifo_slots;
    if (params->batch) o.batch = params->batch;
    if (params->max_inflight) o.max_inflight = params->max_inflight;
    o.timeout_ms = params->timeout_ms ? params->timeout_ms
                                      : transport->transport->options().timeout_ms;
    o.device = params->device;
    WEFT_REQUIRE(o.device >= -1, "device must be -1 or a GPU index (got %d)", o.device);
    auto handle = std::make_unique<WeftProxy>();
    handle->owner = transport;
    handle->proxy = std::make_unique<Proxy>(*transport->transport, o);
    transport->proxies.fetch_add(1);
    *out = handle.release();
  });
}

WEFT_API int weft_proxy_stop(WeftProxy* proxy) {
  return guard([&] {
    if (!proxy) return;
    std::unique_ptr<WeftProxy> owned(proxy);
    if (owned->proxy) owned->proxy->stop();
    owned->proxy.reset();
    owned->owner->proxies.fetch_sub(1);
  });
}

WEFT_API int weft_proxy_push(WeftProxy* proxy, const WeftProxyCommand* commands, uint32_t count,
                             uint32_t timeout_ms, uint64_t* out_first_ticket) {
  return guard([&] {
    Proxy& p = get(proxy);
    WEFT_REQUIRE(commands && count >= 1, "commands must not be NULL and count >= 1");
    WEFT_REQUIRE(commands[0].size >= sizeof(WeftProxyCommand),
                 "commands[0].size %u is smaller than sizeof(WeftProxyCommand) %zu",
                 commands[0].size, sizeof(WeftProxyCommand));
    WEFT_REQUIRE(count <= p.host_fifo().capacity(),
                 "count %u exceeds the FIFO's %u slots: push in smaller batches", count,
                 p.host_fifo().capacity());
    uint32_t stride = commands[0].size;
    std::unique_ptr<Command[]> converted(new Command[count]);
    for (uint32_t i = 0; i < count; ++i) {
      auto* c = reinterpret_cast<const WeftProxyCommand*>(reinterpret_cast<const char*>(commands) +
                                                          size_t(i) * stride);
      converted[i] = to_command(*c, i);
    }
    uint64_t first = p.push(converted.get(), count, timeout_ms);
    if (out_first_ticket) *out_first_ticket = first;
  });
}

WEFT_API int weft_proxy_wait(WeftProxy* proxy, uint64_t ticket, uint32_t timeout_ms) {
  return guard([&] { get(proxy).wait(ticket, timeout_ms); });
}

WEFT_API int weft_proxy_fifo(WeftProxy* proxy, WeftProxyFifo* out) {
  return guard([&] {
    WEFT_REQUIRE(out && out->size >= sizeof(WeftProxyFifo), "out must be a WeftProxyFifo with size set");
    Proxy& p = get(proxy);
    out->version = 1;
    out->capacity = p.host_fifo().capacity();
    out->slot_bytes = sizeof(Command);
    const auto addr = [](const void* a) { return reinterpret_cast<uint64_t>(a); };
    out->host_control = addr(p.host_fifo().control());
    out->host_slots = addr(p.host_fifo().slots());
    CommandFifo* d = p.device_fifo();
    out->device_control_host = d ? addr(d->control()) : 0;
    out->device_control = d ? addr(d->control_device()) : 0;
    out->device_slots = d ? addr(d->slots_device()) : 0;
    out->device_head = d ? addr(d->device_head()) : 0;
  });
}

WEFT_API int weft_proxy_error(WeftProxy* proxy, int32_t* out_code, const char** out_message) {
  return guard([&] {
    WEFT_REQUIRE(out_code, "out_code must not be NULL");
    Proxy& p = get(proxy);
    *out_code = p.error_code();
    if (out_message) {
      static thread_local std::string message;
      message = p.error_message();
      *out_message = message.c_str();
    }
  });
}

WEFT_API int weft_proxy_stats(WeftProxy* proxy, WeftProxyStats* out) {
  return guard([&] {
    WEFT_REQUIRE(out && out->size >= sizeof(WeftProxyStats), "out must be a WeftProxyStats with size set");
    Proxy& p = get(proxy);
    ProxyStats s = p.stats();
    TransportStats t;
    {
      std::lock_guard<std::recursive_mutex> lock(p.transport().lock());
      t = p.transport().stats();
    }
    out->version = 1;
    out->pushed = s.pushed;
    out->consumed = s.consumed;
    out->completed = s.completed;
    out->puts = s.puts;
    out->signals = s.signals;
    out->fences = s.fences;
    out->barriers = s.barriers;
    out->passes = s.passes;
    out->idle_sleeps = s.idle_sleeps;
    out->max_batch = s.max_batch;
    out->transport_writes = t.writes;
    out->transport_bytes = t.bytes;
    out->transport_signal_writes = t.signal_writes;
  });
}

WEFT_API int weft_proxy_abort(WeftProxy* proxy) {
  return guard([&] { get(proxy).abort("the proxy was aborted by the host"); });
}

WEFT_API int weft_proxy_set_paused(WeftProxy* proxy, int32_t paused) {
  return guard([&] { get(proxy).set_paused(paused != 0); });
}

WEFT_API int weft_proxy_device_push(WeftProxy* proxy, const WeftProxyCommand* tmpl, uint32_t ctas,
                                    uint32_t threads, uint32_t per_thread, uint32_t timeout_ms,
                                    void* failures, void* stream) {
  return guard([&] {
    Proxy& p = get(proxy);
    CommandFifo* lane = p.device_fifo();
    WEFT_REQUIRE(lane, "the proxy has no device lane: start it with a device (WeftProxyParams.device)");
    WEFT_REQUIRE(tmpl && tmpl->size >= sizeof(WeftProxyCommand), "tmpl must be a WeftProxyCommand");
    WEFT_REQUIRE(failures, "failures must be 2 uint64 of device memory");
    WEFT_REQUIRE(ctas >= 1 && threads >= 1 && threads <= 1024 && per_thread >= 1,
                 "ctas >= 1, threads in [1, 1024] and per_thread >= 1 (got %u, %u, %u)", ctas,
                 threads, per_thread);
    Command c = to_command(*tmpl, 0);
    // Every thread's word must exist at the peer: validate the first and the last one.
    {
      std::lock_guard<std::recursive_mutex> lock(p.transport().lock());
      Command last = c;
      last.signal_offset = c.signal_offset + 8 * (uint64_t(ctas) * threads - 1);
      last.signal_value = per_thread;
      p.validate_command(c, "tmpl");
      p.validate_command(last, "tmpl (last thread's word)");
    }
    FifoDevice f{};
    f.slots = static_cast<Command*>(lane->slots_device());
    f.head = reinterpret_cast<unsigned long long*>(lane->device_head());
    f.control = static_cast<const uint64_t*>(lane->control_device());
    f.capacity = lane->capacity();
    int dev = p.device();
    DeviceGuard g(dev);
    WEFT_CUDA(kernels::push_commands(f, c, ctas, threads, per_thread,
                                     static_cast<unsigned long long*>(failures),
                                     uint64_t(timeout_ms ? timeout_ms : 10000) * 1000000ull,
                                     static_cast<cudaStream_t>(stream)));
  });
}

}  // extern "C"
