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
import { runtime, type NativeLibrary, type SymbolTable } from "./runtime/index.ts";

/** weft.h WEFT_ABI_VERSION this package was written against. */
export const ABI_VERSION = 4;

// Pointers are "ptr": a JS number (device/host address), a TypedArray (passed by the address of its
// bytes for the duration of the call) or null. 64-bit sizes are "u64" (number or bigint). offThread:
// the call can block in native code, so runtimes that can (Deno) also offer it on a worker thread.
export const symbols = {
  // library
  weft_abi_version: { args: ["ptr" /* int32_t* out */], returns: "i32" },
  weft_last_error: { args: [], returns: "cstring" },
  weft_version: { args: ["ptr" /* const char** */, "ptr" /* int32_t* runtime */, "ptr" /* int32_t* driver */], returns: "i32" },
  weft_abi_layout: { args: ["ptr" /* const char** json */], returns: "i32" },
  // devices and topology
  weft_device_count: { args: ["ptr" /* int32_t* */], returns: "i32" },
  weft_device_props: { args: ["i32" /* device */, "ptr" /* WeftDeviceProps* */], returns: "i32" },
  weft_peer_matrix: { args: ["i32" /* n */, "ptr" /* int32_t[n*n] */], returns: "i32" },
  weft_peer_enable: { args: ["i32" /* device */, "i32" /* peer */], returns: "i32" },
  weft_device_synchronize: { args: ["i32"], returns: "i32", offThread: true },
  // memory
  weft_malloc: { args: ["i32" /* device */, "u64" /* bytes */, "ptr" /* void** */], returns: "i32" },
  weft_free: { args: ["ptr"], returns: "i32" },
  weft_host_alloc: { args: ["u64" /* bytes */, "ptr" /* void** host */, "ptr" /* void** device */], returns: "i32" },
  weft_host_free: { args: ["ptr"], returns: "i32" },
  weft_memset: { args: ["ptr" /* dst */, "i32" /* value */, "u64" /* bytes */, "ptr" /* stream */], returns: "i32" },
  weft_fill: { args: ["ptr" /* dst */, "u64" /* count */, "i32" /* elem_bytes */, "u64" /* pattern */, "ptr" /* stream */], returns: "i32" },
  weft_memcpy: { args: ["ptr" /* dst */, "ptr" /* src */, "u64" /* bytes */, "i32" /* WeftCopyKind */, "ptr" /* stream */], returns: "i32" },
  weft_memcpy_peer: { args: ["ptr" /* dst */, "i32" /* dst_device */, "ptr" /* src */, "i32" /* src_device */, "u64" /* bytes */, "ptr" /* stream */], returns: "i32" },
  // streams and events
  weft_stream_create: { args: ["i32" /* device */, "ptr" /* void** */], returns: "i32" },
  weft_stream_destroy: { args: ["ptr"], returns: "i32" },
  weft_stream_synchronize: { args: ["ptr"], returns: "i32", offThread: true },
  weft_stream_query: { args: ["ptr" /* stream */, "ptr" /* int32_t* done */], returns: "i32" },
  weft_event_create: { args: ["i32" /* device */, "ptr" /* void** */], returns: "i32" },
  weft_event_destroy: { args: ["ptr"], returns: "i32" },
  weft_event_record: { args: ["ptr" /* event */, "ptr" /* stream */], returns: "i32" },
  weft_event_synchronize: { args: ["ptr"], returns: "i32", offThread: true },
  weft_event_elapsed: { args: ["ptr" /* start */, "ptr" /* end */, "ptr" /* float* ms */], returns: "i32" },
  weft_stream_order: { args: ["i32" /* device */, "ptr" /* producer stream */, "ptr" /* consumer stream */], returns: "i32" },
  // transports
  weft_fabric_providers: { args: ["ptr" /* const char** json */], returns: "i32" },
  // test support
  weft_fill_random: { args: ["ptr" /* dst */, "i32" /* dtype */, "u64" /* count */, "u64" /* seed */, "f32" /* lo */, "f32" /* hi */, "ptr" /* stream */], returns: "i32" },
  weft_diff_norms: { args: ["ptr" /* a */, "i32", "ptr" /* b */, "i32", "u64" /* count */, "ptr" /* double[3] device */, "ptr" /* stream */], returns: "i32" },
  // communicator, symmetric heap, collectives (issue 3)
  weft_comm_create: { args: ["ptr" /* const WeftCommConfig* */, "ptr" /* WeftComm** */], returns: "i32" },
  weft_comm_info: { args: ["ptr" /* comm */, "ptr" /* WeftCommInfo* */], returns: "i32" },
  weft_comm_export: { args: ["ptr" /* comm */, "ptr" /* WeftPeerHandle* */], returns: "i32" },
  weft_comm_import: { args: ["ptr" /* comm */, "ptr" /* const WeftPeerHandle* */], returns: "i32" },
  weft_comm_connect: { args: ["ptr" /* comm */], returns: "i32" },
  weft_comm_close_peers: { args: ["ptr" /* comm */], returns: "i32" },
  weft_comm_destroy: { args: ["ptr" /* comm */], returns: "i32" },
  weft_collective: { args: ["ptr" /* comm */, "ptr" /* const WeftCollectiveParams* */], returns: "i32" },
  weft_accumulate: { args: ["ptr" /* float* acc */, "ptr" /* src */, "i32" /* src dtype */, "u64" /* count */, "ptr" /* stream */], returns: "i32" },

  // GEMM engine (issue 4)
  weft_gemm: { args: ["ptr" /* const WeftGemmParams* */], returns: "i32" },
  weft_gemm_choose: { args: ["ptr" /* const WeftGemmParams* */, "ptr" /* WeftGemmChoice* out */], returns: "i32" },
  weft_reference_gemm: { args: ["ptr" /* a */, "ptr" /* b */, "ptr" /* float* c */, "i64" /* m */, "i64" /* n */, "i64" /* k */, "i64" /* lda */, "i64" /* ldb */, "i64" /* ldc */, "i32" /* b_nk */, "ptr" /* stream */], returns: "i32" },

  // fused tensor-parallel ops over NVLink (issue 5)
  weft_tp_choose: { args: ["ptr" /* WeftComm* */, "ptr" /* const WeftTpParams* */, "ptr" /* WeftTpChoice* out */], returns: "i32" },
  weft_tp_plan_create: { args: ["ptr" /* WeftComm* */, "ptr" /* const WeftTpParams* */, "ptr" /* WeftTpPlan** */], returns: "i32" },
  weft_tp_plan_launch: { args: ["ptr" /* WeftTpPlan* */, "ptr" /* const WeftTpLaunch* */], returns: "i32" },
  weft_tp_plans_launch: { args: ["ptr" /* WeftTpPlan* const* */, "ptr" /* const WeftTpLaunch* */, "i32"], returns: "i32" },
  weft_tp_plan_destroy: { args: ["ptr" /* WeftTpPlan* */], returns: "i32" },

  // inter-node: command FIFO, proxy, transport (issue 6)
  weft_transport_open: { args: ["ptr" /* const WeftTransportParams* */, "ptr" /* WeftTransport** */], returns: "i32" },
  weft_transport_close: { args: ["ptr" /* WeftTransport* */], returns: "i32" },
  weft_transport_info: { args: ["ptr" /* transport */, "ptr" /* const char** json */], returns: "i32" },
  weft_transport_address: { args: ["ptr" /* transport */, "ptr" /* const uint8_t** blob */, "ptr" /* uint64_t* bytes */], returns: "i32" },
  weft_transport_connect: { args: ["ptr" /* transport */, "ptr" /* const uint8_t* blobs */, "u64" /* stride */, "i32" /* count */], returns: "i32" },
  weft_transport_register: { args: ["ptr" /* transport */, "ptr" /* base */, "u64" /* bytes */, "i32" /* device */, "ptr" /* int32_t* region */], returns: "i32" },
  weft_transport_region_descriptor: { args: ["ptr" /* transport */, "i32" /* region */, "ptr" /* const uint8_t** blob */, "ptr" /* uint64_t* bytes */], returns: "i32" },
  weft_transport_region_connect: { args: ["ptr" /* transport */, "i32" /* region */, "ptr" /* const uint8_t* blobs */, "u64" /* stride */, "i32" /* count */], returns: "i32" },
  weft_transport_deregister: { args: ["ptr" /* transport */, "i32" /* region */], returns: "i32" },
  weft_transport_host_alloc: { args: ["u64" /* bytes */, "ptr" /* void** host */, "ptr" /* void** device */], returns: "i32" },
  weft_transport_host_free: { args: ["ptr" /* host */], returns: "i32" },
  weft_transport_counters: { args: ["ptr" /* WeftTransportCounters* */], returns: "i32" },
  weft_proxy_start: { args: ["ptr" /* transport */, "ptr" /* const WeftProxyParams* */, "ptr" /* WeftProxy** */], returns: "i32" },
  weft_proxy_stop: { args: ["ptr" /* WeftProxy* */], returns: "i32" },
  weft_proxy_push: { args: ["ptr" /* proxy */, "ptr" /* const WeftProxyCommand* */, "u32" /* count */, "u32" /* timeout_ms */, "ptr" /* uint64_t* first_ticket */], returns: "i32" },
  weft_proxy_wait: { args: ["ptr" /* proxy */, "u64" /* ticket */, "u32" /* timeout_ms */], returns: "i32", offThread: true },
  weft_proxy_fifo: { args: ["ptr" /* proxy */, "ptr" /* WeftProxyFifo* */], returns: "i32" },
  weft_proxy_error: { args: ["ptr" /* proxy */, "ptr" /* int32_t* code */, "ptr" /* const char** message */], returns: "i32" },
  weft_proxy_stats: { args: ["ptr" /* proxy */, "ptr" /* WeftProxyStats* */], returns: "i32" },
  weft_proxy_abort: { args: ["ptr" /* proxy */], returns: "i32" },
  weft_proxy_set_paused: { args: ["ptr" /* proxy */, "i32" /* paused */], returns: "i32" },
  weft_proxy_device_push: { args: ["ptr" /* proxy */, "ptr" /* const WeftProxyCommand* tmpl */, "u32" /* ctas */, "u32" /* threads */, "u32" /* per_thread */, "u32" /* timeout_ms */, "ptr" /* uint64_t[2] failures (device) */, "ptr" /* stream */], returns: "i32" },
  weft_comm_internode_bytes: { args: ["i32" /* nodes */, "u64" /* slot_bytes */, "ptr" /* uint64_t* send_bytes */, "ptr" /* uint64_t* recv_bytes */], returns: "i32" },
  weft_comm_set_internode: { args: ["ptr" /* comm */, "ptr" /* const WeftCommInterNode* */], returns: "i32" },

  // DLPack hand-over (issue 27)
  weft_dlpack_export: { args: ["ptr" /* const WeftDlpackDesc* */, "u32" /* WeftDlpackFlags */, "ptr" /* WeftDlpackRelease */, "ptr" /* ctx */, "ptr" /* void** managed */], returns: "i32" },
  weft_dlpack_import: { args: ["ptr" /* const managed tensor */, "u32" /* WeftDlpackFlags */, "ptr" /* WeftDlpackDesc* */], returns: "i32" },
  weft_dlpack_delete: { args: ["ptr" /* managed tensor */, "u32" /* WeftDlpackFlags */], returns: "i32" },
  weft_dlpack_live: { args: ["ptr" /* int64_t* */], returns: "i32" },

  // MoE expert parallelism (issue 26)
  weft_moe_route: { args: ["ptr" /* const WeftMoeRouteParams* */], returns: "i32" },
  weft_moe_dispatch_choose: { args: ["ptr" /* WeftComm* */, "ptr" /* const WeftMoeDispatchParams* */, "ptr" /* WeftMoeDispatchChoice* out */], returns: "i32" },
  weft_moe_dispatch_create: { args: ["ptr" /* WeftComm* */, "ptr" /* const WeftMoeDispatchParams* */, "ptr" /* WeftMoeDispatchPlan** */], returns: "i32" },
  weft_moe_dispatch_launch: { args: ["ptr" /* WeftMoeDispatchPlan* */, "ptr" /* const WeftTpLaunch* */], returns: "i32" },
  weft_moe_dispatch_destroy: { args: ["ptr" /* WeftMoeDispatchPlan* */], returns: "i32" },
  weft_moe_dispatch_report: { args: ["ptr" /* WeftMoeDispatchPlan* */, "ptr" /* const uint64_t** */], returns: "i32" },
  weft_moe_combine_choose: { args: ["ptr" /* WeftComm* */, "ptr" /* const WeftMoeCombineParams* */, "ptr" /* WeftMoeCombineChoice* out */], returns: "i32" },
  weft_moe_combine_create: { args: ["ptr" /* WeftComm* */, "ptr" /* const WeftMoeCombineParams* */, "ptr" /* WeftMoeCombinePlan** */], returns: "i32" },
  weft_moe_combine_launch: { args: ["ptr" /* WeftMoeCombinePlan* */, "ptr" /* const WeftTpLaunch* */], returns: "i32" },
  weft_moe_combine_destroy: { args: ["ptr" /* WeftMoeCombinePlan* */], returns: "i32" },
  weft_moe_combine_report: { args: ["ptr" /* WeftMoeCombinePlan* */, "ptr" /* const uint64_t** */], returns: "i32" },
  weft_graph_capture_begin: { args: ["ptr" /* stream */], returns: "i32" },
  weft_graph_capture_end: { args: ["ptr" /* stream */, "ptr" /* void** graph_exec */], returns: "i32" },
  weft_graph_launch: { args: ["ptr" /* graph_exec */, "ptr" /* stream */], returns: "i32" },
  weft_graph_destroy: { args: ["ptr" /* graph_exec */], returns: "i32" },
  weft_moe_reference_route: { args: ["ptr" /* logits */, "i32" /* dtype */, "i64" /* tokens */, "i32" /* experts */, "i32" /* topk */, "i32" /* normalize */, "ptr" /* int32_t* ids */, "ptr" /* float* weights */, "ptr" /* stream */], returns: "i32" },
  weft_moe_reference_gather: { args: ["ptr" /* src */, "i64" /* src_rows */, "i64" /* cols */, "ptr" /* const int32_t* index */, "i64" /* rows */, "ptr" /* out */, "ptr" /* stream */], returns: "i32" },
  weft_moe_reference_combine: { args: ["ptr" /* rows */, "i32" /* rows_dtype */, "i64" /* nrows */, "i64" /* hidden */, "ptr" /* const int32_t* index */, "ptr" /* const float* weights */, "i64" /* tokens */, "i32" /* topk */, "ptr" /* float* out */, "ptr" /* stream */], returns: "i32" },
  weft_moe_reference_rows_gemm: { args: ["ptr" /* a */, "i32" /* a_dtype */, "i64" /* lda */, "ptr" /* a_index */, "ptr" /* b */, "i64" /* ldb */, "i32" /* b_nk */, "ptr" /* float* c */, "i64" /* ldc */, "ptr" /* c_index */, "i64" /* m */, "i64" /* n */, "i64" /* k */, "ptr" /* stream */], returns: "i32" },
  weft_moe_reference_swiglu: { args: ["ptr" /* h */, "i32" /* h_dtype */, "i64" /* rows */, "i64" /* inter */, "ptr" /* out */, "i32" /* out_dtype */, "ptr" /* stream */], returns: "i32" },

  // baselines for benchmarks (dlopen'ed cuBLASLt, NCCL)
  weft_cublaslt_available: { args: ["ptr" /* int32_t* */, "ptr" /* const char** path */], returns: "i32" },
  weft_cublaslt_gemm: { args: ["ptr" /* const WeftGemmParams* */], returns: "i32" },

  weft_nccl_version: { args: ["ptr" /* int32_t* */], returns: "i32" },
  weft_nccl_create: { args: ["i32" /* ndev */, "ptr" /* const int32_t* devices */, "ptr" /* WeftNccl** */], returns: "i32" },
  weft_nccl_destroy: { args: ["ptr"], returns: "i32" },
  weft_nccl_collective: { args: ["ptr" /* nccl */, "ptr" /* const WeftNcclParams* */], returns: "i32" },

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
