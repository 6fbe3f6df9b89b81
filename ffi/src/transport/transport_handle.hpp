// transport_handle.hpp — what a WeftTransport* points at.
#pragma once

#include <atomic>
#include <memory>

#include "transport/transport.hpp"

struct WeftTransport {
  std::unique_ptr<weft::Transport> transport;
  std::atomic<int> proxies{0};  // running proxies: the transport cannot close under them
};
