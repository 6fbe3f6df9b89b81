// comm.cpp — weft_abi_layout's part for the communicator, collectives,
// tensor-parallel ops (builder.hpp).
#include "abi_layout/builder.hpp"

namespace weft::abi_layout {

void comm_layout(Builder& l) {
  WEFT_LAYOUT_STRUCT(WeftCommConfig, WEFT_COMM_CONFIG_INIT, size, version, device, rank, world_size, sm_budget,
                     heap_bytes, staged_bytes, timeout_ns);
  WEFT_LAYOUT_STRUCT(WeftCommInfo, WEFT_COMM_INFO_INIT, size, version, heap_base, heap_bytes, arena_base, arena_bytes,
                     staged_bytes, sm_count, max_ctas, shares_device, reserved);
  WEFT_LAYOUT_STRUCT(WeftPeerHandle, WEFT_PEER_HANDLE_INIT, size, version, process_token, device, rank, arena_base,
                     arena_bytes, ipc);
  WEFT_LAYOUT_STRUCT(WeftCollectiveParams, WEFT_COLLECTIVE_PARAMS_INIT, size, version, kind, dtype, count, input,
                     output, root, ctas, algorithm, reserved, send_counts, recv_counts, stream, done, seq, arrivals);
  WEFT_LAYOUT_STRUCT(WeftTpParams, WEFT_TP_PARAMS_INIT, size, version, op, flags, m, n, k, a, b, out, gathered, path,
                     mover, comm_ctas, tile_n, group_m, reserved, workspace, workspace_bytes, stream);
  WEFT_LAYOUT_STRUCT(WeftTpChoice, WEFT_TP_CHOICE_INIT, size, version, path, mover, comm_ctas, gemm_ctas, tile_n,
                     group_m, chunk_rows, fused_available, workspace_bytes, predicted_fused_us,
                     predicted_sequential_us, reason);
  WEFT_LAYOUT_STRUCT(WeftTestingTpMachine, WEFT_TESTING_TP_MACHINE_INIT, size, version, world, rank, sm_count,
                     sm_budget, nodes, shares_device, slot_bytes);
  WEFT_LAYOUT_ENUM(WeftCollectiveKind, WEFT_ALL_GATHER, WEFT_REDUCE_SCATTER, WEFT_ALL_REDUCE, WEFT_ALL_TO_ALL,
                     WEFT_BROADCAST, WEFT_BARRIER);
  WEFT_LAYOUT_ENUM(WeftAlgorithm, WEFT_ALGO_AUTO, WEFT_ALGO_STAGED, WEFT_ALGO_DIRECT);
  WEFT_LAYOUT_CONSTANTS(WeftCollectiveStage);
  WEFT_LAYOUT_CONSTANT(WEFT_STAGE_ENTRY);
  WEFT_LAYOUT_CONSTANT(WEFT_STAGE_CHECK);
  WEFT_LAYOUT_CONSTANT(WEFT_STAGE_DONE);
  WEFT_LAYOUT_CONSTANT(WEFT_STAGE_STAGED);
  WEFT_LAYOUT_CONSTANT(WEFT_STAGE_ABORTED);
  WEFT_LAYOUT_CONSTANT(WEFT_STAGE_REMOTE);
  WEFT_LAYOUT_ENUM(WeftAbortSource, WEFT_ABORT_PEER, WEFT_ABORT_HOST);
  WEFT_LAYOUT_ENUM(WeftCollectiveField, WEFT_FIELD_KIND, WEFT_FIELD_DTYPE, WEFT_FIELD_COUNT, WEFT_FIELD_CTAS,
                     WEFT_FIELD_ROOT, WEFT_FIELD_WORLD, WEFT_FIELD_ALGORITHM, WEFT_FIELD_EPOCH,
                     WEFT_FIELD_PAIR_COUNT);
  WEFT_LAYOUT_ENUM(WeftTpOp, WEFT_TP_ALL_GATHER_GEMM, WEFT_TP_GEMM_REDUCE_SCATTER, WEFT_TP_GEMM_ALL_REDUCE);
  WEFT_LAYOUT_ENUM(WeftTpPath, WEFT_TP_PATH_AUTO, WEFT_TP_PATH_FUSED, WEFT_TP_PATH_SEQUENTIAL);
  WEFT_LAYOUT_ENUM(WeftTpMover, WEFT_TP_MOVER_AUTO, WEFT_TP_MOVER_CTAS, WEFT_TP_MOVER_COPY_ENGINE, WEFT_TP_MOVER_NONE,
                     WEFT_TP_MOVER_EXCHANGE);
  WEFT_LAYOUT_ENUM(WeftTpFailure, WEFT_TP_FAIL_BARRIER, WEFT_TP_FAIL_PEER_WAIT, WEFT_TP_FAIL_STAGE_MISSING);
}

}  // namespace weft::abi_layout
