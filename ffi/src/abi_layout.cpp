// abi_layout.cpp — publishes sizeof and offsetof of every ABI struct, as the C compiler lays them
// out, so test/abi.test.ts can check lib/'s packing field by field. Add each new ABI struct here.
#include <cstddef>
#include <string>

#include "status.hpp"
#include "weft.h"

namespace {

struct Layout {
  std::string json = "{";
  bool first_struct = true;
  bool first_field = true;

  void begin(const char* name, size_t size) {
    json += (first_struct ? "\"" : "}},\"") + std::string(name) + "\":{\"sizeof\":" +
            std::to_string(size) + ",\"fields\":{";
    first_struct = false;
    first_field = true;
  }
  void field(const char* name, size_t offset) {
    json += (first_field ? "\"" : ",\"") + std::string(name) + "\":" + std::to_string(offset);
    first_field = false;
  }
  std::string end() { return json + (first_struct ? "}" : "}}}"); }
};

#define STRUCT(S) l.begin(#S, sizeof(S))
#define FIELD(S, f) l.field(#f, offsetof(S, f))

std::string build() {
  Layout l;
  STRUCT(WeftDeviceProps);
  FIELD(WeftDeviceProps, size);
  FIELD(WeftDeviceProps, version);
  FIELD(WeftDeviceProps, name);
  FIELD(WeftDeviceProps, pci_bus_id);
  FIELD(WeftDeviceProps, total_memory);
  FIELD(WeftDeviceProps, free_memory);
  FIELD(WeftDeviceProps, sm_count);
  FIELD(WeftDeviceProps, cc_major);
  FIELD(WeftDeviceProps, cc_minor);
  FIELD(WeftDeviceProps, l2_bytes);
  FIELD(WeftDeviceProps, smem_per_block_optin);
  FIELD(WeftDeviceProps, clock_khz);
  FIELD(WeftDeviceProps, memory_clock_khz);
  FIELD(WeftDeviceProps, memory_bus_width);
  // communicator, symmetric heap, collectives (issue 3)
  STRUCT(WeftCommConfig);
  FIELD(WeftCommConfig, size);
  FIELD(WeftCommConfig, version);
  FIELD(WeftCommConfig, device);
  FIELD(WeftCommConfig, rank);
  FIELD(WeftCommConfig, world_size);
  FIELD(WeftCommConfig, sm_budget);
  FIELD(WeftCommConfig, heap_bytes);
  FIELD(WeftCommConfig, staged_bytes);
  FIELD(WeftCommConfig, timeout_ns);
  STRUCT(WeftCommInfo);
  FIELD(WeftCommInfo, size);
  FIELD(WeftCommInfo, version);
  FIELD(WeftCommInfo, heap_base);
  FIELD(WeftCommInfo, heap_bytes);
  FIELD(WeftCommInfo, arena_base);
  FIELD(WeftCommInfo, arena_bytes);
  FIELD(WeftCommInfo, staged_bytes);
  FIELD(WeftCommInfo, sm_count);
  FIELD(WeftCommInfo, max_ctas);
  STRUCT(WeftPeerHandle);
  FIELD(WeftPeerHandle, size);
  FIELD(WeftPeerHandle, version);
  FIELD(WeftPeerHandle, process_token);
  FIELD(WeftPeerHandle, device);
  FIELD(WeftPeerHandle, rank);
  FIELD(WeftPeerHandle, arena_base);
  FIELD(WeftPeerHandle, arena_bytes);
  FIELD(WeftPeerHandle, ipc);
  STRUCT(WeftCollectiveParams);
  FIELD(WeftCollectiveParams, size);
  FIELD(WeftCollectiveParams, version);
  FIELD(WeftCollectiveParams, kind);
  FIELD(WeftCollectiveParams, dtype);
  FIELD(WeftCollectiveParams, count);
  FIELD(WeftCollectiveParams, input);
  FIELD(WeftCollectiveParams, output);
  FIELD(WeftCollectiveParams, root);
  FIELD(WeftCollectiveParams, ctas);
  FIELD(WeftCollectiveParams, algorithm);
  FIELD(WeftCollectiveParams, reserved);
  FIELD(WeftCollectiveParams, send_counts);
  FIELD(WeftCollectiveParams, recv_counts);
  FIELD(WeftCollectiveParams, stream);
  FIELD(WeftCollectiveParams, done);
  FIELD(WeftCollectiveParams, seq);
  FIELD(WeftCollectiveParams, arrivals);
  STRUCT(WeftNcclParams);
  FIELD(WeftNcclParams, size);
  FIELD(WeftNcclParams, version);
  FIELD(WeftNcclParams, kind);
  FIELD(WeftNcclParams, dtype);
  FIELD(WeftNcclParams, count);
  FIELD(WeftNcclParams, inputs);
  FIELD(WeftNcclParams, outputs);
  FIELD(WeftNcclParams, streams);
  FIELD(WeftNcclParams, root);
  FIELD(WeftNcclParams, reserved);

  // GEMM engine (issue 4)
  STRUCT(WeftGemmParams);
  FIELD(WeftGemmParams, size);
  FIELD(WeftGemmParams, version);
  FIELD(WeftGemmParams, a);
  FIELD(WeftGemmParams, b);
  FIELD(WeftGemmParams, c);
  FIELD(WeftGemmParams, m);
  FIELD(WeftGemmParams, n);
  FIELD(WeftGemmParams, k);
  FIELD(WeftGemmParams, lda);
  FIELD(WeftGemmParams, ldb);
  FIELD(WeftGemmParams, ldc);
  FIELD(WeftGemmParams, flags);
  FIELD(WeftGemmParams, tile_n);
  FIELD(WeftGemmParams, cluster_m);
  FIELD(WeftGemmParams, cluster_n);
  FIELD(WeftGemmParams, group_m);
  FIELD(WeftGemmParams, max_ctas);
  FIELD(WeftGemmParams, done);
  FIELD(WeftGemmParams, seq);
  FIELD(WeftGemmParams, arrivals);
  FIELD(WeftGemmParams, stream);
  STRUCT(WeftGemmChoice);
  FIELD(WeftGemmChoice, size);
  FIELD(WeftGemmChoice, version);
  FIELD(WeftGemmChoice, tile_m);
  FIELD(WeftGemmChoice, tile_n);
  FIELD(WeftGemmChoice, tile_k);
  FIELD(WeftGemmChoice, cluster_m);
  FIELD(WeftGemmChoice, cluster_n);
  FIELD(WeftGemmChoice, group_m);
  FIELD(WeftGemmChoice, stages);
  FIELD(WeftGemmChoice, ctas);

  // fused tensor-parallel ops over NVLink (issue 5)
  STRUCT(WeftTpParams);
  FIELD(WeftTpParams, size);
  FIELD(WeftTpParams, version);
  FIELD(WeftTpParams, op);
  FIELD(WeftTpParams, flags);
  FIELD(WeftTpParams, m);
  FIELD(WeftTpParams, n);
  FIELD(WeftTpParams, k);
  FIELD(WeftTpParams, a);
  FIELD(WeftTpParams, b);
  FIELD(WeftTpParams, out);
  FIELD(WeftTpParams, gathered);
  FIELD(WeftTpParams, path);
  FIELD(WeftTpParams, mover);
  FIELD(WeftTpParams, comm_ctas);
  FIELD(WeftTpParams, tile_n);
  FIELD(WeftTpParams, group_m);
  FIELD(WeftTpParams, reserved);
  FIELD(WeftTpParams, workspace);
  FIELD(WeftTpParams, workspace_bytes);
  FIELD(WeftTpParams, stream);
  STRUCT(WeftTpChoice);
  FIELD(WeftTpChoice, size);
  FIELD(WeftTpChoice, version);
  FIELD(WeftTpChoice, path);
  FIELD(WeftTpChoice, mover);
  FIELD(WeftTpChoice, comm_ctas);
  FIELD(WeftTpChoice, gemm_ctas);
  FIELD(WeftTpChoice, tile_n);
  FIELD(WeftTpChoice, group_m);
  FIELD(WeftTpChoice, chunk_rows);
  FIELD(WeftTpChoice, fused_available);
  FIELD(WeftTpChoice, workspace_bytes);
  FIELD(WeftTpChoice, predicted_fused_us);
  FIELD(WeftTpChoice, predicted_sequential_us);
  FIELD(WeftTpChoice, reason);
  STRUCT(WeftTpLaunch);
  FIELD(WeftTpLaunch, size);
  FIELD(WeftTpLaunch, version);
  FIELD(WeftTpLaunch, done);
  FIELD(WeftTpLaunch, seq);
  FIELD(WeftTpLaunch, arrivals);

  // inter-node: command FIFO, proxy, transport (issue 6)
  STRUCT(WeftTransportParams);
  FIELD(WeftTransportParams, size);
  FIELD(WeftTransportParams, version);
  FIELD(WeftTransportParams, rank);
  FIELD(WeftTransportParams, world_size);
  FIELD(WeftTransportParams, device);
  FIELD(WeftTransportParams, same_host);
  FIELD(WeftTransportParams, timeout_ms);
  FIELD(WeftTransportParams, reserved);
  FIELD(WeftTransportParams, provider);
  STRUCT(WeftTransportCounters);
  FIELD(WeftTransportCounters, size);
  FIELD(WeftTransportCounters, version);
  FIELD(WeftTransportCounters, transports);
  FIELD(WeftTransportCounters, regions);
  FIELD(WeftTransportCounters, proxy_threads);
  FIELD(WeftTransportCounters, host_buffers);
  STRUCT(WeftProxyParams);
  FIELD(WeftProxyParams, size);
  FIELD(WeftProxyParams, version);
  FIELD(WeftProxyParams, fifo_slots);
  FIELD(WeftProxyParams, batch);
  FIELD(WeftProxyParams, max_inflight);
  FIELD(WeftProxyParams, timeout_ms);
  FIELD(WeftProxyParams, device);
  FIELD(WeftProxyParams, reserved);
  STRUCT(WeftProxyCommand);
  FIELD(WeftProxyCommand, size);
  FIELD(WeftProxyCommand, version);
  FIELD(WeftProxyCommand, opcode);
  FIELD(WeftProxyCommand, flags);
  FIELD(WeftProxyCommand, peer);
  FIELD(WeftProxyCommand, src_region);
  FIELD(WeftProxyCommand, dst_region);
  FIELD(WeftProxyCommand, signal_region);
  FIELD(WeftProxyCommand, src_offset);
  FIELD(WeftProxyCommand, dst_offset);
  FIELD(WeftProxyCommand, bytes);
  FIELD(WeftProxyCommand, signal_offset);
  FIELD(WeftProxyCommand, signal_value);
  FIELD(WeftProxyCommand, cookie);
  STRUCT(WeftProxyFifo);
  FIELD(WeftProxyFifo, size);
  FIELD(WeftProxyFifo, version);
  FIELD(WeftProxyFifo, capacity);
  FIELD(WeftProxyFifo, slot_bytes);
  FIELD(WeftProxyFifo, host_control);
  FIELD(WeftProxyFifo, host_slots);
  FIELD(WeftProxyFifo, device_control_host);
  FIELD(WeftProxyFifo, device_control);
  FIELD(WeftProxyFifo, device_slots);
  FIELD(WeftProxyFifo, device_head);
  STRUCT(WeftProxyStats);
  FIELD(WeftProxyStats, size);
  FIELD(WeftProxyStats, version);
  FIELD(WeftProxyStats, pushed);
  FIELD(WeftProxyStats, consumed);
  FIELD(WeftProxyStats, completed);
  FIELD(WeftProxyStats, puts);
  FIELD(WeftProxyStats, signals);
  FIELD(WeftProxyStats, fences);
  FIELD(WeftProxyStats, barriers);
  FIELD(WeftProxyStats, passes);
  FIELD(WeftProxyStats, idle_sleeps);
  FIELD(WeftProxyStats, max_batch);
  FIELD(WeftProxyStats, transport_writes);
  FIELD(WeftProxyStats, transport_bytes);
  FIELD(WeftProxyStats, transport_signal_writes);
  STRUCT(WeftCommInterNode);
  FIELD(WeftCommInterNode, size);
  FIELD(WeftCommInterNode, version);
  FIELD(WeftCommInterNode, rank);
  FIELD(WeftCommInterNode, world_size);
  FIELD(WeftCommInterNode, node);
  FIELD(WeftCommInterNode, nodes);
  FIELD(WeftCommInterNode, send_region);
  FIELD(WeftCommInterNode, recv_region);
  FIELD(WeftCommInterNode, send_staging);
  FIELD(WeftCommInterNode, send_bytes);
  FIELD(WeftCommInterNode, recv_staging);
  FIELD(WeftCommInterNode, recv_bytes);
  FIELD(WeftCommInterNode, slot_bytes);
  FIELD(WeftCommInterNode, fifo_slots);
  FIELD(WeftCommInterNode, fifo_head);
  FIELD(WeftCommInterNode, fifo_control);
  FIELD(WeftCommInterNode, fifo_capacity);
  FIELD(WeftCommInterNode, reserved);
  // attention (issue 25)
  STRUCT(WeftAttentionParams);
  FIELD(WeftAttentionParams, size);
  FIELD(WeftAttentionParams, version);
  FIELD(WeftAttentionParams, q);
  FIELD(WeftAttentionParams, k);
  FIELD(WeftAttentionParams, v);
  FIELD(WeftAttentionParams, out);
  FIELD(WeftAttentionParams, lse);
  FIELD(WeftAttentionParams, cu_seqlens_q);
  FIELD(WeftAttentionParams, cu_seqlens_k);
  FIELD(WeftAttentionParams, batch);
  FIELD(WeftAttentionParams, heads);
  FIELD(WeftAttentionParams, kv_heads);
  FIELD(WeftAttentionParams, head_dim);
  FIELD(WeftAttentionParams, seqlen_q);
  FIELD(WeftAttentionParams, seqlen_k);
  FIELD(WeftAttentionParams, total_q);
  FIELD(WeftAttentionParams, total_k);
  FIELD(WeftAttentionParams, flags);
  FIELD(WeftAttentionParams, scale);
  FIELD(WeftAttentionParams, max_ctas);
  FIELD(WeftAttentionParams, reserved);
  FIELD(WeftAttentionParams, done);
  FIELD(WeftAttentionParams, seq);
  FIELD(WeftAttentionParams, arrivals);
  FIELD(WeftAttentionParams, stream);
  STRUCT(WeftAttentionChoice);
  FIELD(WeftAttentionChoice, size);
  FIELD(WeftAttentionChoice, version);
  FIELD(WeftAttentionChoice, block_m);
  FIELD(WeftAttentionChoice, block_n);
  FIELD(WeftAttentionChoice, stages);
  FIELD(WeftAttentionChoice, ctas);
  FIELD(WeftAttentionChoice, tiles);
  FIELD(WeftAttentionChoice, section);
  STRUCT(WeftRingAttentionParams);
  FIELD(WeftRingAttentionParams, size);
  FIELD(WeftRingAttentionParams, version);
  FIELD(WeftRingAttentionParams, q);
  FIELD(WeftRingAttentionParams, k);
  FIELD(WeftRingAttentionParams, v);
  FIELD(WeftRingAttentionParams, out);
  FIELD(WeftRingAttentionParams, lse);
  FIELD(WeftRingAttentionParams, batch);
  FIELD(WeftRingAttentionParams, heads);
  FIELD(WeftRingAttentionParams, kv_heads);
  FIELD(WeftRingAttentionParams, head_dim);
  FIELD(WeftRingAttentionParams, seqlen);
  FIELD(WeftRingAttentionParams, kv_rows);
  FIELD(WeftRingAttentionParams, comm_ctas);
  FIELD(WeftRingAttentionParams, layout);
  FIELD(WeftRingAttentionParams, flags);
  FIELD(WeftRingAttentionParams, scale);
  FIELD(WeftRingAttentionParams, mover);
  FIELD(WeftRingAttentionParams, group_heads);
  FIELD(WeftRingAttentionParams, memory_bytes);
  FIELD(WeftRingAttentionParams, workspace);
  FIELD(WeftRingAttentionParams, workspace_bytes);
  FIELD(WeftRingAttentionParams, stream);
  STRUCT(WeftRingAttentionChoice);
  FIELD(WeftRingAttentionChoice, size);
  FIELD(WeftRingAttentionChoice, version);
  FIELD(WeftRingAttentionChoice, mover);
  FIELD(WeftRingAttentionChoice, comm_ctas);
  FIELD(WeftRingAttentionChoice, reserved);
  FIELD(WeftRingAttentionChoice, group_heads);
  FIELD(WeftRingAttentionChoice, groups);
  FIELD(WeftRingAttentionChoice, slots);
  FIELD(WeftRingAttentionChoice, ctas);
  FIELD(WeftRingAttentionChoice, shard);
  FIELD(WeftRingAttentionChoice, workspace_bytes);
  FIELD(WeftRingAttentionChoice, receive_bytes);
  FIELD(WeftRingAttentionChoice, predicted_us);

  return l.end();
}

}  // namespace

extern "C" WEFT_API int weft_abi_layout(const char** out_json) {
  return weft::guard([&] {
    WEFT_REQUIRE(out_json, "out_json must not be NULL");
    static const std::string json = build();
    *out_json = json.c_str();
  });
}
