// inter_node.cpp — weft_abi_layout's part for the transport, the command FIFO
// and proxy, the multi-node communicator (builder.hpp).
#include "abi_layout/builder.hpp"

namespace weft::abi_layout {

void inter_node_layout(Builder& l) {
  WEFT_LAYOUT_STRUCT(WeftTransportParams, WEFT_TRANSPORT_PARAMS_INIT, size, version, rank, world_size, device,
                     same_host, timeout_ms, reserved, provider);
  WEFT_LAYOUT_STRUCT(WeftTransportCounters, WEFT_TRANSPORT_COUNTERS_INIT, size, version, transports, regions,
                     proxy_threads, host_buffers);
  WEFT_LAYOUT_STRUCT(WeftProxyParams, WEFT_PROXY_PARAMS_INIT, size, version, fifo_slots, batch, max_inflight,
                     timeout_ms, device, reserved);
  WEFT_LAYOUT_STRUCT(WeftProxyCommand, WEFT_PROXY_COMMAND_INIT, size, version, opcode, flags, peer, src_region,
                     dst_region, signal_region, src_offset, dst_offset, bytes, signal_offset, signal_value, cookie);
  WEFT_LAYOUT_STRUCT(WeftProxyFifo, WEFT_PROXY_FIFO_INIT, size, version, capacity, slot_bytes, host_control,
                     host_slots, device_control_host, device_control, device_slots, device_head);
  WEFT_LAYOUT_STRUCT(WeftProxyStats, WEFT_PROXY_STATS_INIT, size, version, pushed, consumed, completed, puts, signals,
                     fences, barriers, passes, idle_sleeps, max_batch, transport_writes, transport_bytes,
                     transport_signal_writes);
  WEFT_LAYOUT_STRUCT(WeftCommInterNode, WEFT_COMM_INTER_NODE_INIT, size, version, rank, world_size, node, nodes,
                     send_region, recv_region, send_staging, send_bytes, recv_staging, recv_bytes, slot_bytes,
                     fifo_slots, fifo_head, fifo_control, fifo_capacity, reserved);
  WEFT_LAYOUT_ENUM(WeftProxyOpcode, WEFT_PROXY_PUT, WEFT_PROXY_SIGNAL, WEFT_PROXY_FENCE, WEFT_PROXY_BARRIER);
  WEFT_LAYOUT_CONSTANTS(WeftProxyFlags);
  WEFT_LAYOUT_CONSTANT(WEFT_PROXY_FLAG_SIGNAL);
}

}  // namespace weft::abi_layout
