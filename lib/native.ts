// native.ts — finds and loads libweft.so, declares every symbol of ffi/include/weft.h in one table
// (in lib/runtime's type names, from which the TypeScript signatures are derived), turns status
// codes into WeftErrors, and hands out the pointer helpers. It touches no runtime itself: the
// adapter that lib/runtime/index.ts picked (Bun or Deno) does the loading and the memory views.
//
// WEFT_TRACE_FFI=1 wraps every symbol: each call is logged to stderr and p50/p99 per symbol are
// printed at exit. When unset, the raw symbols are used and tracing costs nothing.
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { errorFromStatus, LibraryError } from "./errors.ts";
import { runtime, T, type NativeLibrary, type SymbolTable } from "./runtime/index.ts";

/** weft.h WEFT_ABI_VERSION this package was written against. */
export const ABI_VERSION = 6;

// Pointers are T.ptr: a JS number (device/host address), a TypedArray (passed by the address of its
// bytes for the duration of the call) or null. 64-bit sizes are T.u64 (number or bigint). offThread:
// the call can block in native code, so runtimes that can (Deno) also offer it on a worker thread.
export const symbols = {
  // library
  weft_abi_version: { args: [T.ptr /* int32_t* out */], returns: T.i32 },
  weft_last_error: { args: [], returns: T.cstring },
  weft_version: { args: [T.ptr /* const char** */, T.ptr /* int32_t* runtime */, T.ptr /* int32_t* driver */], returns: T.i32 },
  weft_abi_layout: { args: [T.ptr /* const char** json */], returns: T.i32 },
  // devices and topology
  weft_device_count: { args: [T.ptr /* int32_t* */], returns: T.i32 },
  weft_device_props: { args: [T.i32 /* device */, T.ptr /* WeftDeviceProps* */], returns: T.i32 },
  weft_peer_matrix: { args: [T.i32 /* n */, T.ptr /* int32_t[n*n] */], returns: T.i32 },
  weft_peer_enable: { args: [T.i32 /* device */, T.i32 /* peer */], returns: T.i32 },
  weft_device_synchronize: { args: [T.i32], returns: T.i32, offThread: true },
  // memory
  weft_malloc: { args: [T.i32 /* device */, T.u64 /* bytes */, T.ptr /* void** */], returns: T.i32 },
  weft_free: { args: [T.ptr], returns: T.i32 },
  weft_host_alloc: { args: [T.u64 /* bytes */, T.ptr /* void** host */, T.ptr /* void** device */], returns: T.i32 },
  weft_host_free: { args: [T.ptr], returns: T.i32 },
  weft_memset: { args: [T.ptr /* dst */, T.i32 /* value */, T.u64 /* bytes */, T.ptr /* stream */], returns: T.i32 },
  weft_fill: { args: [T.ptr /* dst */, T.u64 /* count */, T.i32 /* elem_bytes */, T.u64 /* pattern */, T.ptr /* stream */], returns: T.i32 },
  weft_memcpy: { args: [T.ptr /* dst */, T.ptr /* src */, T.u64 /* bytes */, T.i32 /* WeftCopyKind */, T.ptr /* stream */], returns: T.i32 },
  weft_memcpy_2d: { args: [T.ptr /* dst */, T.u64 /* dst_pitch */, T.ptr /* src */, T.u64 /* src_pitch */, T.u64 /* width_bytes */, T.u64 /* rows */, T.i32 /* WeftCopyKind */, T.ptr /* stream */], returns: T.i32 },
  weft_memcpy_peer: { args: [T.ptr /* dst */, T.i32 /* dst_device */, T.ptr /* src */, T.i32 /* src_device */, T.u64 /* bytes */, T.ptr /* stream */], returns: T.i32 },
  // streams and events
  weft_stream_create: { args: [T.i32 /* device */, T.ptr /* void** */], returns: T.i32 },
  weft_stream_destroy: { args: [T.ptr], returns: T.i32 },
  weft_stream_synchronize: { args: [T.ptr], returns: T.i32, offThread: true },
  weft_stream_query: { args: [T.ptr /* stream */, T.ptr /* int32_t* done */], returns: T.i32 },
  weft_event_create: { args: [T.i32 /* device */, T.ptr /* void** */], returns: T.i32 },
  weft_event_destroy: { args: [T.ptr], returns: T.i32 },
  weft_event_record: { args: [T.ptr /* event */, T.ptr /* stream */], returns: T.i32 },
  weft_event_synchronize: { args: [T.ptr], returns: T.i32, offThread: true },
  weft_event_elapsed: { args: [T.ptr /* start */, T.ptr /* end */, T.ptr /* float* ms */], returns: T.i32 },
  weft_stream_order: { args: [T.i32 /* device */, T.ptr /* producer stream */, T.ptr /* consumer stream */], returns: T.i32 },
  // transports
  weft_fabric_providers: { args: [T.ptr /* const char** json */], returns: T.i32 },
  // test support
  weft_fill_random: { args: [T.ptr /* dst */, T.i32 /* dtype */, T.u64 /* count */, T.u64 /* seed */, T.f32 /* lo */, T.f32 /* hi */, T.ptr /* stream */], returns: T.i32 },
  weft_diff_norms: { args: [T.ptr /* a */, T.i32, T.ptr /* b */, T.i32, T.u64 /* count */, T.ptr /* double[3] device */, T.ptr /* stream */], returns: T.i32 },
  // communicator, symmetric heap, collectives
  weft_comm_create: { args: [T.ptr /* const WeftCommConfig* */, T.ptr /* WeftComm** */], returns: T.i32 },
  weft_comm_info: { args: [T.ptr /* comm */, T.ptr /* WeftCommInfo* */], returns: T.i32 },
  weft_comm_export: { args: [T.ptr /* comm */, T.ptr /* WeftPeerHandle* */], returns: T.i32 },
  weft_comm_import: { args: [T.ptr /* comm */, T.ptr /* const WeftPeerHandle* */], returns: T.i32 },
  weft_comm_connect: { args: [T.ptr /* comm */], returns: T.i32 },
  weft_comm_close_peers: { args: [T.ptr /* comm */], returns: T.i32 },
  weft_comm_destroy: { args: [T.ptr /* comm */], returns: T.i32 },
  weft_comm_abort: { args: [T.ptr /* comm */, T.i32 /* failed_rank */], returns: T.i32 },
  weft_collective: { args: [T.ptr /* comm */, T.ptr /* const WeftCollectiveParams* */], returns: T.i32 },
  weft_accumulate: { args: [T.ptr /* float* acc */, T.ptr /* src */, T.i32 /* src dtype */, T.u64 /* count */, T.ptr /* stream */], returns: T.i32 },

  // GEMM engine
  weft_gemm_choose: { args: [T.ptr /* const WeftGemmParams* */, T.ptr /* WeftGemmChoice* out */], returns: T.i32 },
  weft_gemm_plan_create: { args: [T.ptr /* const WeftGemmParams* */, T.ptr /* WeftGemmPlan** */], returns: T.i32 },
  weft_gemm_plan_launch: { args: [T.ptr /* WeftGemmPlan* */, T.ptr /* const WeftOpLaunch* (or NULL) */], returns: T.i32 },
  weft_gemm_plan_destroy: { args: [T.ptr /* WeftGemmPlan* */], returns: T.i32 },
  weft_gemm: { args: [T.ptr /* const WeftGemmParams* */, T.ptr /* const WeftOpLaunch* (or NULL) */], returns: T.i32 },
  weft_reference_gemm: { args: [T.ptr /* a */, T.ptr /* b */, T.ptr /* float* c */, T.i64 /* m */, T.i64 /* n */, T.i64 /* k */, T.i64 /* lda */, T.i64 /* ldb */, T.i64 /* ldc */, T.i32 /* b_nk */, T.ptr /* stream */], returns: T.i32 },

  // fused tensor-parallel ops
  weft_tp_choose: { args: [T.ptr /* WeftComm* */, T.ptr /* const WeftTpParams* */, T.ptr /* WeftTpChoice* out */], returns: T.i32 },
  weft_tp_plan_create: { args: [T.ptr /* WeftComm* */, T.ptr /* const WeftTpParams* */, T.ptr /* WeftTpPlan** */], returns: T.i32 },
  weft_tp_plan_launch: { args: [T.ptr /* WeftTpPlan* */, T.ptr /* const WeftOpLaunch* */], returns: T.i32 },
  weft_tp_plans_launch: { args: [T.ptr /* WeftTpPlan* const* */, T.ptr /* const WeftOpLaunch* */, T.i32], returns: T.i32 },
  weft_tp_plan_destroy: { args: [T.ptr /* WeftTpPlan* */], returns: T.i32 },
  // Test support: the choice on a described machine (no GPU needed); never called by lib/.
  weft_testing_tp_choose: { args: [T.ptr /* const WeftTestingTpMachine* */, T.ptr /* const WeftTpParams* */, T.ptr /* WeftTpChoice* out */, T.ptr /* const char** detail */], returns: T.i32 },

  // inter-node: transport, command FIFO and proxy, multi-node communicator
  weft_transport_open: { args: [T.ptr /* const WeftTransportParams* */, T.ptr /* WeftTransport** */], returns: T.i32 },
  weft_transport_close: { args: [T.ptr /* WeftTransport* */], returns: T.i32 },
  weft_transport_info: { args: [T.ptr /* transport */, T.ptr /* const char** json */], returns: T.i32 },
  weft_transport_address: { args: [T.ptr /* transport */, T.ptr /* const uint8_t** blob */, T.ptr /* uint64_t* bytes */], returns: T.i32 },
  weft_transport_connect: { args: [T.ptr /* transport */, T.ptr /* const uint8_t* blobs */, T.u64 /* stride */, T.i32 /* count */], returns: T.i32 },
  weft_transport_register: { args: [T.ptr /* transport */, T.ptr /* base */, T.u64 /* bytes */, T.i32 /* device */, T.ptr /* int32_t* region */], returns: T.i32 },
  weft_transport_region_descriptor: { args: [T.ptr /* transport */, T.i32 /* region */, T.ptr /* const uint8_t** blob */, T.ptr /* uint64_t* bytes */], returns: T.i32 },
  weft_transport_region_connect: { args: [T.ptr /* transport */, T.i32 /* region */, T.ptr /* const uint8_t* blobs */, T.u64 /* stride */, T.i32 /* count */], returns: T.i32 },
  weft_transport_deregister: { args: [T.ptr /* transport */, T.i32 /* region */], returns: T.i32 },
  weft_transport_host_alloc: { args: [T.u64 /* bytes */, T.ptr /* void** host */, T.ptr /* void** device */], returns: T.i32 },
  weft_transport_host_free: { args: [T.ptr /* host */], returns: T.i32 },
  weft_transport_counters: { args: [T.ptr /* WeftTransportCounters* */], returns: T.i32 },
  // Test support: every `every`th data write dropped (0: off); never called by lib/.
  weft_testing_transport_drop_writes: { args: [T.ptr /* WeftTransport* */, T.u64 /* every */], returns: T.i32 },
  weft_proxy_start: { args: [T.ptr /* transport */, T.ptr /* const WeftProxyParams* */, T.ptr /* WeftProxy** */], returns: T.i32 },
  weft_proxy_stop: { args: [T.ptr /* WeftProxy* */], returns: T.i32 },
  weft_proxy_push: { args: [T.ptr /* proxy */, T.ptr /* const WeftProxyCommand* */, T.u32 /* count */, T.u32 /* timeout_ms */, T.ptr /* uint64_t* first_ticket */], returns: T.i32 },
  weft_proxy_wait: { args: [T.ptr /* proxy */, T.u64 /* ticket */, T.u32 /* timeout_ms */], returns: T.i32, offThread: true },
  weft_proxy_fifo: { args: [T.ptr /* proxy */, T.ptr /* WeftProxyFifo* */], returns: T.i32 },
  weft_proxy_error: { args: [T.ptr /* proxy */, T.ptr /* int32_t* code */, T.ptr /* const char** message */], returns: T.i32 },
  weft_proxy_stats: { args: [T.ptr /* proxy */, T.ptr /* WeftProxyStats* */], returns: T.i32 },
  weft_proxy_abort: { args: [T.ptr /* proxy */], returns: T.i32 },
  weft_proxy_set_paused: { args: [T.ptr /* proxy */, T.i32 /* paused */], returns: T.i32 },
  weft_proxy_device_push: { args: [T.ptr /* proxy */, T.ptr /* const WeftProxyCommand* tmpl */, T.u32 /* ctas */, T.u32 /* threads */, T.u32 /* per_thread */, T.u32 /* timeout_ms */, T.ptr /* uint64_t[2] failures (device) */, T.ptr /* stream */], returns: T.i32 },
  weft_comm_internode_bytes: { args: [T.i32 /* nodes */, T.u64 /* slot_bytes */, T.ptr /* uint64_t* send_bytes */, T.ptr /* uint64_t* recv_bytes */], returns: T.i32 },
  weft_comm_set_internode: { args: [T.ptr /* comm */, T.ptr /* const WeftCommInterNode* */], returns: T.i32 },

  // DLPack hand-over
  weft_dlpack_export: { args: [T.ptr /* const WeftDlpackDesc* */, T.u32 /* WeftDlpackFlags */, T.ptr /* WeftDlpackRelease */, T.ptr /* ctx */, T.ptr /* void** managed */], returns: T.i32 },
  weft_dlpack_import: { args: [T.ptr /* const managed tensor */, T.u32 /* WeftDlpackFlags */, T.ptr /* WeftDlpackDesc* */], returns: T.i32 },
  weft_dlpack_delete: { args: [T.ptr /* managed tensor */, T.u32 /* WeftDlpackFlags */], returns: T.i32 },
  weft_dlpack_live: { args: [T.ptr /* int64_t* */], returns: T.i32 },
  weft_dlpack_forget_release: { args: [T.ptr /* WeftDlpackRelease */], returns: T.i32 },

  // MoE expert parallelism
  weft_moe_route: { args: [T.ptr /* const WeftMoeRouteParams* */], returns: T.i32 },
  weft_moe_dispatch_choose: { args: [T.ptr /* WeftComm* */, T.ptr /* const WeftMoeDispatchParams* */, T.ptr /* WeftMoeDispatchChoice* out */], returns: T.i32 },
  weft_moe_dispatch_create: { args: [T.ptr /* WeftComm* */, T.ptr /* const WeftMoeDispatchParams* */, T.ptr /* WeftMoeDispatchPlan** */], returns: T.i32 },
  weft_moe_dispatch_launch: { args: [T.ptr /* WeftMoeDispatchPlan* */, T.ptr /* const WeftOpLaunch* */], returns: T.i32 },
  weft_moe_dispatch_destroy: { args: [T.ptr /* WeftMoeDispatchPlan* */], returns: T.i32 },
  weft_moe_dispatch_report: { args: [T.ptr /* WeftMoeDispatchPlan* */, T.ptr /* const uint64_t** */], returns: T.i32 },
  weft_moe_combine_choose: { args: [T.ptr /* WeftComm* */, T.ptr /* const WeftMoeCombineParams* */, T.ptr /* WeftMoeCombineChoice* out */], returns: T.i32 },
  weft_moe_combine_create: { args: [T.ptr /* WeftComm* */, T.ptr /* const WeftMoeCombineParams* */, T.ptr /* WeftMoeCombinePlan** */], returns: T.i32 },
  weft_moe_combine_launch: { args: [T.ptr /* WeftMoeCombinePlan* */, T.ptr /* const WeftOpLaunch* */], returns: T.i32 },
  weft_moe_combine_destroy: { args: [T.ptr /* WeftMoeCombinePlan* */], returns: T.i32 },
  weft_moe_combine_report: { args: [T.ptr /* WeftMoeCombinePlan* */, T.ptr /* const uint64_t** */], returns: T.i32 },
  weft_grouped_gemm: { args: [T.ptr /* const WeftGroupedGemmParams* */, T.ptr /* const WeftOpLaunch* (or NULL) */], returns: T.i32 },
  weft_grouped_gemm_choose: { args: [T.ptr /* const WeftGroupedGemmParams* */, T.ptr /* WeftGroupedGemmChoice* out */], returns: T.i32 },
  weft_moe_dispatch_gemm_choose: { args: [T.ptr /* WeftComm* */, T.ptr /* const WeftMoeDispatchParams* */, T.ptr /* const WeftMoeExpertGemmParams* */, T.ptr /* WeftMoeDispatchChoice* out */, T.ptr /* WeftMoeExpertGemmChoice* out */], returns: T.i32 },
  weft_moe_dispatch_gemm_create: { args: [T.ptr /* WeftComm* */, T.ptr /* const WeftMoeDispatchParams* */, T.ptr /* const WeftMoeExpertGemmParams* */, T.ptr /* WeftMoeDispatchGemmPlan** */], returns: T.i32 },
  weft_moe_dispatch_gemm_launch: { args: [T.ptr /* WeftMoeDispatchGemmPlan* */, T.ptr /* const WeftOpLaunch* */], returns: T.i32 },
  weft_moe_dispatch_gemm_destroy: { args: [T.ptr /* WeftMoeDispatchGemmPlan* */], returns: T.i32 },
  weft_moe_dispatch_gemm_report: { args: [T.ptr /* WeftMoeDispatchGemmPlan* */, T.ptr /* const uint64_t** */], returns: T.i32 },
  weft_moe_gemm_combine_choose: { args: [T.ptr /* WeftComm* */, T.ptr /* const WeftMoeCombineParams* */, T.ptr /* const WeftMoeExpertGemmParams* */, T.ptr /* WeftMoeCombineChoice* out */, T.ptr /* WeftMoeExpertGemmChoice* out */], returns: T.i32 },
  weft_moe_gemm_combine_create: { args: [T.ptr /* WeftComm* */, T.ptr /* const WeftMoeCombineParams* */, T.ptr /* const WeftMoeExpertGemmParams* */, T.ptr /* WeftMoeGemmCombinePlan** */], returns: T.i32 },
  weft_moe_gemm_combine_launch: { args: [T.ptr /* WeftMoeGemmCombinePlan* */, T.ptr /* const WeftOpLaunch* */], returns: T.i32 },
  weft_moe_gemm_combine_destroy: { args: [T.ptr /* WeftMoeGemmCombinePlan* */], returns: T.i32 },
  weft_moe_gemm_combine_report: { args: [T.ptr /* WeftMoeGemmCombinePlan* */, T.ptr /* const uint64_t** */], returns: T.i32 },
  weft_graph_capture_begin: { args: [T.ptr /* stream */], returns: T.i32 },
  weft_graph_capture_end: { args: [T.ptr /* stream */, T.ptr /* void** graph_exec */], returns: T.i32 },
  weft_graph_launch: { args: [T.ptr /* graph_exec */, T.ptr /* stream */], returns: T.i32 },
  weft_graph_destroy: { args: [T.ptr /* graph_exec */], returns: T.i32 },
  weft_moe_reference_route: { args: [T.ptr /* logits */, T.i32 /* dtype */, T.i64 /* tokens */, T.i32 /* experts */, T.i32 /* topk */, T.i32 /* normalize */, T.ptr /* int32_t* ids */, T.ptr /* float* weights */, T.ptr /* stream */], returns: T.i32 },
  weft_moe_reference_gather: { args: [T.ptr /* src */, T.i64 /* src_rows */, T.i64 /* cols */, T.ptr /* const int32_t* index */, T.i64 /* rows */, T.ptr /* out */, T.ptr /* stream */], returns: T.i32 },
  weft_moe_reference_combine: { args: [T.ptr /* rows */, T.i32 /* rows_dtype */, T.i64 /* nrows */, T.i64 /* hidden */, T.ptr /* const int32_t* index */, T.ptr /* const float* weights */, T.i64 /* tokens */, T.i32 /* topk */, T.ptr /* float* out */, T.ptr /* stream */], returns: T.i32 },
  weft_moe_reference_rows_gemm: { args: [T.ptr /* a */, T.i32 /* a_dtype */, T.i64 /* lda */, T.ptr /* a_index */, T.ptr /* b */, T.i64 /* ldb */, T.i32 /* b_nk */, T.ptr /* float* c */, T.i64 /* ldc */, T.ptr /* c_index */, T.i64 /* m */, T.i64 /* n */, T.i64 /* k */, T.ptr /* stream */], returns: T.i32 },
  weft_moe_reference_swiglu: { args: [T.ptr /* h */, T.i32 /* h_dtype */, T.i64 /* rows */, T.i64 /* inter */, T.ptr /* out */, T.i32 /* out_dtype */, T.ptr /* stream */], returns: T.i32 },
  // decoder layers (nn)
  weft_nn_embedding: { args: [T.ptr /* const WeftEmbeddingParams* */], returns: T.i32 },
  weft_nn_rms_norm: { args: [T.ptr /* const WeftRmsNormParams* */], returns: T.i32 },
  weft_nn_rope: { args: [T.ptr /* const WeftRopeParams* */], returns: T.i32 },
  weft_nn_swiglu: { args: [T.ptr /* const WeftSwigluParams* */], returns: T.i32 },
  weft_nn_kv_append: { args: [T.ptr /* const WeftKvAppendParams* */], returns: T.i32 },
  weft_nn_cache_attention: { args: [T.ptr /* const WeftCacheAttentionParams* */], returns: T.i32 },
  weft_nn_sample: { args: [T.ptr /* const WeftSampleParams* */, T.ptr /* const WeftOpLaunch* (or NULL) */], returns: T.i32 },
  // attention
  weft_attention: { args: [T.ptr /* const WeftAttentionParams* */, T.ptr /* const WeftOpLaunch* (or NULL) */], returns: T.i32 },
  weft_attention_choose: { args: [T.ptr /* const WeftAttentionParams* */, T.ptr /* WeftAttentionChoice* out */], returns: T.i32 },
  weft_reference_attention: { args: [T.ptr /* const WeftAttentionParams* */, T.u64 /* float* out_f32 */, T.u64 /* float* lse_f32 */], returns: T.i32 },

  weft_ring_chunks: { args: [T.i32 /* seqlen */, T.i32 /* world */, T.i32 /* layout */, T.ptr /* int32_t* starts */, T.ptr /* int32_t* out_chunks */], returns: T.i32 },
  weft_ring_attention_choose: { args: [T.ptr /* WeftComm* */, T.ptr /* const WeftRingAttentionParams* */, T.ptr /* WeftRingAttentionChoice* out */], returns: T.i32 },
  weft_ring_attention_plan_create: { args: [T.ptr /* WeftComm* */, T.ptr /* const WeftRingAttentionParams* */, T.ptr /* WeftRingAttentionPlan** */], returns: T.i32 },
  weft_ring_attention_plan_connect: { args: [T.ptr /* WeftRingAttentionPlan* */], returns: T.i32 },
  weft_ring_attention_plan_launch: { args: [T.ptr /* WeftRingAttentionPlan* */, T.ptr /* const WeftOpLaunch* */], returns: T.i32 },
  weft_ring_attention_plans_launch: { args: [T.ptr /* WeftRingAttentionPlan* const* */, T.ptr /* const WeftOpLaunch* */, T.i32 /* count */], returns: T.i32 },
  weft_ring_attention_plan_destroy: { args: [T.ptr /* WeftRingAttentionPlan* */], returns: T.i32 },
  weft_testing_attention_walk: { args: [T.ptr /* const int32_t* config */, T.ptr /* const int32_t* cu_q */, T.ptr /* const int32_t* cu_k */, T.ptr /* const int32_t* used_k */, T.ptr /* int32_t* out */, T.i64 /* capacity */, T.ptr /* int64_t* out_rows */], returns: T.i32 },

  // baselines for benchmarks (dlopen'ed cuBLASLt, NCCL)
  weft_cublaslt_available: { args: [T.ptr /* int32_t* */, T.ptr /* const char** path */], returns: T.i32 },
  weft_cublaslt_gemm: { args: [T.ptr /* const WeftGemmParams* */], returns: T.i32 },

  weft_nccl_version: { args: [T.ptr /* int32_t* */], returns: T.i32 },
  weft_nccl_create: { args: [T.i32 /* ndev */, T.ptr /* const int32_t* devices */, T.ptr /* WeftNccl** */], returns: T.i32 },
  weft_nccl_destroy: { args: [T.ptr], returns: T.i32 },
  weft_nccl_collective: { args: [T.ptr /* nccl */, T.ptr /* const WeftNcclParams* */], returns: T.i32 },

} as const satisfies SymbolTable;

type Library = NativeLibrary<typeof symbols>;
type Symbols = Library["symbols"];
/** The offThread symbols as worker-thread calls returning Promises. */
export type OffThreadSymbols = NonNullable<Library["offThread"]>;

/** The build outputs that are searched after WEFT_LIBRARY, in order. */
export function libraryCandidates(): string[] {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
  return [join(root, "build", "libweft.so"), join(root, "build", "Release", "libweft.so")];
}

const BUILD_HINT = "Build it with `npm run build` (or `cmake -S ffi -B build -G Ninja && cmake --build build`), " +
  "or point WEFT_LIBRARY at an existing libweft.so.";

function open(): Library {
  const forced = process.env.WEFT_LIBRARY;
  let path: string | undefined;
  if (forced) {
    if (!existsSync(forced)) {
      throw new LibraryError(`WEFT_LIBRARY is set to '${forced}', which does not exist. ` +
        `Unset WEFT_LIBRARY to use the build output, or point it at a libweft.so.`, { code: "E_LIBRARY_MISSING", op: "load" });
    }
    path = forced;
  } else {
    path = libraryCandidates().find((p) => existsSync(p));
    if (!path) {
      throw new LibraryError(`libweft.so was not found (looked in ${libraryCandidates().join(", ")}). ${BUILD_HINT}`,
        { code: "E_LIBRARY_MISSING", op: "load" });
    }
  }
  let lib: Library;
  try {
    lib = runtime.open(path, symbols);
  } catch (cause) {
    throw new LibraryError(`'${path}' could not be loaded as libweft.so (${(cause as Error).message}). ` +
      `It may be damaged, built for another machine, or not a shared library. ${BUILD_HINT}`,
      { code: "E_LIBRARY_LOAD", op: "load", cause });
  }
  const v = new Int32Array(1);
  lib.symbols.weft_abi_version(v);
  if (v[0] !== ABI_VERSION) {
    lib.close();
    throw new LibraryError(`'${path}' has ABI version ${v[0]} but this package needs ${ABI_VERSION}: ` +
      `the library and lib/ are from different versions. Rebuild with \`npm run build\`.`,
      { code: "E_ABI_MISMATCH", op: "load" });
  }
  loadedPath = path;
  return process.env.WEFT_TRACE_FFI === "1" ? { ...lib, symbols: traced(lib.symbols) } : lib;
}

let loaded: Library | undefined;
let loadedPath: string | undefined;

/** The loaded symbol table; loads libweft.so on first use and throws LibraryError if it cannot. */
export function native(): Symbols {
  return (loaded ??= open()).symbols;
}

/** The offThread symbols as calls that run on a worker thread and return a Promise, or undefined
 * where the runtime has none (Bun): callers then poll, so that the event loop stays free. A failed
 * worker-thread call leaves its weft_last_error() message on that thread: repeat the call on this
 * one (it returns at once once the work has ended) to get the message. */
export function offThread(): OffThreadSymbols | undefined {
  return (loaded ??= open()).offThread;
}

/** The runtime this process runs in, as "bun 1.4.5" or "deno 2.9.6". */
export function runtimeLabel(): string {
  return `${runtime.name} ${runtime.version}`;
}

/** Where the library was loaded from, or undefined before the first load. */
export function nativePath(): string | undefined {
  return loadedPath;
}

/** Throws the WeftError matching a non-zero status, with weft_last_error()'s message. */
export function check(status: number, op: string): void {
  if (status !== 0) throw errorFromStatus(status, op, String(native().weft_last_error() ?? ""));
}

// ---- pointer helpers (the runtime adapter's, under lib/'s names) ---------------------------------

/** Address of a typed array's bytes, valid only while the array is referenced and not resized. */
export function addressOf(view: ArrayBufferView): number {
  return runtime.addressOf(view);
}

/** A zero-copy view of `bytes` bytes of native memory at `address` (pinned host memory). The
 * owner of that memory must detachNative() the buffer before it frees the memory. */
export function viewNative(address: number, bytes: number): ArrayBuffer {
  return runtime.viewNative(address, bytes);
}

/** Detaches a buffer made by viewNative, so that no JS view reaches the native memory behind it
 * any more: every typed array over it reads as length 0 (indexing gives undefined, writes are
 * dropped, methods throw TypeError). ArrayBuffer.prototype.transfer(0) does it in Bun and in Deno
 * (V8) without touching the memory: the buffer was made without a deallocator, so nothing is freed.
 * Returns false where the runtime cannot detach such a buffer; the owner must then keep the memory
 * until the buffer is garbage-collected (HostBuffer does). */
export function detachNative(buffer: ArrayBuffer): boolean {
  if (buffer.detached) return true;
  try {
    buffer.transfer(0);
  } catch {
    return false; // not detachable here: the caller's fallback applies
  }
  return buffer.detached;
}

/** The NUL-terminated string at `address`. */
export function readCString(address: number): string {
  return runtime.readCString(address);
}

/** Reads one pointer-sized out-parameter. */
export function outPointer(cell: BigUint64Array): number {
  return Number(cell[0]);
}

/** Makes a native call whose last argument is one pointer-sized out-parameter (a new handle, an
 * address), checks its status (errors name `op`) and returns what it wrote. */
export function checkedOut(op: string, call: (out: BigUint64Array) => number): number {
  const out = new BigUint64Array(1);
  check(call(out), op);
  return outPointer(out);
}

// ---- WEFT_TRACE_FFI -------------------------------------------------------------------------------

function traced(raw: Symbols): Symbols {
  const times = new Map<string, number[]>();
  const wrapped: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(raw) as [string, (...a: unknown[]) => unknown][]) {
    const samples: number[] = [];
    times.set(name, samples);
    wrapped[name] = (...args: unknown[]) => {
      const t0 = performance.now();
      const r = fn(...args);
      const dt = performance.now() - t0;
      samples.push(dt);
      process.stderr.write(`[weft ffi] ${name}(${args.map(fmtArg).join(", ")}) -> ${fmtArg(r)} ${(dt * 1000).toFixed(1)}us\n`);
      return r;
    };
  }
  process.on("exit", () => {
    const rows = [...times].filter(([, s]) => s.length > 0).map(([name, s]) => {
      s.sort((a, b) => a - b);
      const q = (p: number) => (s[Math.min(s.length - 1, Math.floor(p * s.length))]! * 1000).toFixed(1);
      return `  ${name.padEnd(28)} calls ${String(s.length).padStart(7)}  p50 ${q(0.5).padStart(8)}us  p99 ${q(0.99).padStart(8)}us`;
    });
    process.stderr.write(`[weft ffi] per-symbol latency\n${rows.join("\n")}\n`);
  });
  return wrapped as Symbols;
}

function fmtArg(a: unknown): string {
  if (ArrayBuffer.isView(a)) return `<${a.constructor.name}[${a.byteLength}B]>`;
  if (typeof a === "number" && a > 0xffffffff) return `0x${a.toString(16)}`;
  return String(a);
}
