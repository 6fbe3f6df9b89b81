/*
 * weft.h — the one contract between the bindings (lib/native.ts, ffi/python) and the native library,
 * and the shared base of ffi/ and cuda/: device code includes it for the status, stage and dtype
 * codes its kernels report, so those codes are defined once, here.
 *
 * Rules (DESIGN.md, "Native library and build"):
 *   - Every function returns int status: WEFT_OK (0) or a negative WEFT_E_* code. Results come back
 *     through out-pointers. The one exception is weft_last_error(), which returns the calling
 *     thread's message for the most recent failure ("file:line: what happened").
 *   - Handles are opaque pointers. No struct crosses by value; ABI structs start with
 *     `uint32_t size, version` and have a WEFT_*_INIT default. The layout of every ABI struct is
 *     published by weft_abi_layout() so the TS packing can be checked against the C compiler.
 *   - The library never calls exit() or abort(), and it loads on a machine with no GPU and no driver
 *     (libcudart is linked statically; driver entry points are looked up at run time).
 *
 * Addresses inside ABI structs are uint64_t (device or host addresses in unified address space;
 * streams as their cudaStream_t value, 0 = the legacy default stream of that device); function
 * arguments may be pointers. Every enum value and constant below is published by weft_abi_layout()
 * too, so the bindings' mirrors are checked, never copied by hand unchecked.
 *
 * Every op has the same shape: a Params struct, `choose` (the configuration it would run, launching
 * nothing), a plan (`plan_create`, `plan_launch`, `plan_destroy`) where preparing once pays, and one
 * launch-and-completion struct, WeftOpLaunch, for every launch.
 */
#ifndef WEFT_H
#define WEFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define WEFT_API __declspec(dllexport)
#else
#define WEFT_API __attribute__((visibility("default")))
#endif

/* Bumped on any change to a signature or an ABI struct. lib/native.ts and ffi/python/weft/_native.py
 * refuse a mismatch. 6: WeftOpLaunch.arrivals points at 4 words (was 2). */
#define WEFT_ABI_VERSION 6

enum WeftStatus {
  WEFT_OK = 0,
  WEFT_E_INVALID = -1,     /* an argument broke a documented rule; the message names it */
  WEFT_E_CUDA = -2,        /* the CUDA runtime or driver returned an error */
  WEFT_E_NO_DEVICE = -3,   /* no usable GPU, no driver, or device index out of range */
  WEFT_E_OOM = -4,         /* device or pinned host allocation failed */
  WEFT_E_TIMEOUT = -5,     /* a bounded wait ran out (GPU spin, bootstrap, proxy) */
  WEFT_E_PEER = -6,        /* a peer rank is gone or reported failure */
  WEFT_E_UNSUPPORTED = -7, /* valid request this build or machine cannot serve */
  WEFT_E_TRANSPORT = -8,   /* the inter-node transport failed */
  WEFT_E_INTERNAL = -9     /* a bug in weft: please report the message */
};

/* ---- library --------------------------------------------------------------------------------- */

WEFT_API int weft_abi_version(int32_t* out_version);
WEFT_API const char* weft_last_error(void);
/* Library version string ("0.1.0"), CUDA runtime and driver versions (0 when no driver). */
WEFT_API int weft_version(const char** out_version, int32_t* out_runtime, int32_t* out_driver);
/* JSON {"structs": {"WeftX": {"sizeof": n, "init": {"size": s, "version": v}, "fields": {"f": offset,
 * ...}}, ...}, "enums": {"WeftTpMover": {"WEFT_TP_MOVER_AUTO": 0, ...}, ...}}: every ABI struct as the
 * C compiler lays it out (with its _INIT's size and version), every enum and constant. */
WEFT_API int weft_abi_layout(const char** out_json);

/* ---- launch and completion ------------------------------------------------------------------- */

/* One launch of an op (cuda/primitives/completion.cuh): the kernel's last CTA writes `seq` to done[0]
 * with release semantics (seq | 1<<63 on a device-side failure, the reason in done[1]: code in bits
 * 0..31, stage in 32..39, field in 40..47, peer rank in 48..63). done = 0: no completion (some ops
 * allow it, e.g. for CUDA-graph capture); `arrivals` is then unused. */
typedef struct WeftOpLaunch {
  uint32_t size;     /* sizeof(WeftOpLaunch) */
  uint32_t version;  /* 1 */
  uint64_t done;     /* device alias of 2 host-mapped uint64 words */
  uint64_t seq;
  uint64_t arrivals; /* 4 device uint32 words, 0 between launches (the kernel returns them to 0): CTAs
                        finished, failed flag, the attention engine's tile counter, spare */
} WeftOpLaunch;
#define WEFT_OP_LAUNCH_INIT {sizeof(WeftOpLaunch), 1, 0, 0, 0}

/* ---- devices and topology -------------------------------------------------------------------- */

/* 0 with status WEFT_OK when there is no driver or no GPU: absence is not an error. */
WEFT_API int weft_device_count(int32_t* out_count);

typedef struct WeftDeviceProps {
  uint32_t size;    /* sizeof(WeftDeviceProps), set by the caller */
  uint32_t version; /* 1 */
  char name[256];
  char pci_bus_id[32]; /* "0000:19:00.0" */
  uint64_t total_memory;
  uint64_t free_memory;
  int32_t sm_count;
  int32_t cc_major;
  int32_t cc_minor;
  int32_t l2_bytes;
  int32_t smem_per_block_optin;
  int32_t clock_khz;
  int32_t memory_clock_khz;
  int32_t memory_bus_width;
} WeftDeviceProps;
#define WEFT_DEVICE_PROPS_INIT {sizeof(WeftDeviceProps), 1, {0}, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

WEFT_API int weft_device_props(int32_t device, WeftDeviceProps* out);
/* out[i*n + j] for i, j < n = device count: 0 no peer access, 1 peer access over PCIe or unknown
 * link, k+1 for k NVLink links (NVML, dlopen'ed, when present). Diagonal is 0. */
WEFT_API int weft_peer_matrix(int32_t n, int32_t* out);
/* Enables device -> peer access (idempotent). */
WEFT_API int weft_peer_enable(int32_t device, int32_t peer);
WEFT_API int weft_device_synchronize(int32_t device);

/* ---- memory ---------------------------------------------------------------------------------- */

WEFT_API int weft_malloc(int32_t device, uint64_t bytes, void** out_ptr);
WEFT_API int weft_free(void* ptr);
/* Pinned host memory mapped into every device's address space (cudaHostAllocMapped|Portable).
 * out_device is the device-side alias of the same bytes (equal to the host pointer under UVA). */
WEFT_API int weft_host_alloc(uint64_t bytes, void** out_host, void** out_device);
WEFT_API int weft_host_free(void* host);

/* Byte-wise memset of device memory, stream-ordered. */
WEFT_API int weft_memset(void* dst, int32_t value, uint64_t bytes, void* stream);
/* Fills count elements of elem_bytes (1, 2, 4 or 8) each with the low bits of pattern. */
WEFT_API int weft_fill(void* dst, uint64_t count, int32_t elem_bytes, uint64_t pattern, void* stream);

enum WeftCopyKind {
  WEFT_COPY_DEFAULT = 0, /* inferred from the pointers (unified addressing) */
  WEFT_COPY_H2D = 1,
  WEFT_COPY_D2H = 2,
  WEFT_COPY_D2D = 3
};
/* Stream-ordered copy. With a NULL stream and pageable host memory it completes before returning. */
WEFT_API int weft_memcpy(void* dst, const void* src, uint64_t bytes, int32_t kind, void* stream);
/* Stream-ordered 2-D copy: `rows` rows of width_bytes each, row r from src + r x src_pitch to
 * dst + r x dst_pitch (a column range of a matrix into a dense one, say). NULL stream: as weft_memcpy. */
WEFT_API int weft_memcpy_2d(void* dst, uint64_t dst_pitch, const void* src, uint64_t src_pitch, uint64_t width_bytes,
                            uint64_t rows, int32_t kind, void* stream);
/* Copy between two devices' memory, over NVLink/PCIe peer access when enabled. */
WEFT_API int weft_memcpy_peer(void* dst, int32_t dst_device, const void* src, int32_t src_device,
                              uint64_t bytes, void* stream);

/* ---- streams and events ---------------------------------------------------------------------- */

WEFT_API int weft_stream_create(int32_t device, void** out_stream);
WEFT_API int weft_stream_destroy(void* stream);
WEFT_API int weft_stream_synchronize(void* stream);
/* out_done = 1 when all work on the stream has finished, 0 while some is pending. */
WEFT_API int weft_stream_query(void* stream, int32_t* out_done);

WEFT_API int weft_event_create(int32_t device, void** out_event);
WEFT_API int weft_event_destroy(void* event);
WEFT_API int weft_event_record(void* event, void* stream);
WEFT_API int weft_event_synchronize(void* event);
WEFT_API int weft_event_elapsed(void* start, void* end, float* out_ms);
/* Makes `consumer`'s later work wait for the work queued on `producer` so far (an event recorded on
 * one, waited on by the other; the host does not wait). Both are streams of `device`; NULL is that
 * device's legacy default stream. Equal streams: nothing to do. (DLPack's stream hand-over.) */
WEFT_API int weft_stream_order(int32_t device, void* producer, void* consumer);

/* ---- transport providers --------------------------------------------------------------------- */

/* JSON {"libfabric": "1.20" | null, "providers": [{"name": "tcp;ofi_rxm", "hmem": false}, ...]}:
 * the libfabric providers that offer reliable RMA endpoints here. */
WEFT_API int weft_fabric_providers(const char** out_json);

/* ---- test support: deterministic device-side data, simple references ------------------------- */

enum WeftDtype { WEFT_BF16 = 0, WEFT_F16 = 1, WEFT_F32 = 2, WEFT_I32 = 3, WEFT_U8 = 4 };

/* Fills count elements with uniform values in [lo, hi) from a counter-based hash of (seed, index):
 * the same seed gives the same tensor on every device and every run. Float dtypes only. */
WEFT_API int weft_fill_random(void* dst, int32_t dtype, uint64_t count, uint64_t seed, float lo,
                              float hi, void* stream);
/* sum((a-b)^2) and sum(b^2) in fp64 over count elements, plus the number of non-finite a's.
 * out is device memory of 3 doubles (nonfinite count stored as a double). */
WEFT_API int weft_diff_norms(const void* a, int32_t a_dtype, const void* b, int32_t b_dtype,
                             uint64_t count, double* out_device, void* stream);

/* GEMM reference for tests: C (fp32, row stride ldc) = A · op(B) on CUDA cores, same
 * layouts as weft_gemm (b_nk = 1: B is [N, K]). Slow and simple on purpose. */
WEFT_API int weft_reference_gemm(const void* a, const void* b, float* c, int64_t m, int64_t n, int64_t k,
                                 int64_t lda, int64_t ldb, int64_t ldc, int32_t b_nk, void* stream);

/* ---- communicator, symmetric heap, collectives ----------------------------------------------- */

/* A communicator is one rank's view of a group of GPUs on one host: a symmetric heap (one device
 * arena of the same size on every rank), the peers' arenas mapped into this process (CUDA IPC
 * across processes, direct peer access within one), and the epoch counter its collectives share.
 * Creation and teardown are collective; lib/comm.ts drives them through the bootstrap store:
 *   create -> export -> (all-gather the WeftPeerHandles) -> import every peer -> connect
 *   ... collectives ...
 *   (barrier) -> close_peers -> (barrier) -> destroy                                          */
typedef struct WeftComm WeftComm;

typedef struct WeftCommConfig {
  uint32_t size;    /* sizeof(WeftCommConfig) */
  uint32_t version; /* 1 */
  int32_t device;
  int32_t rank;
  int32_t world_size;
  int32_t sm_budget;     /* SMs this rank's kernels may use (0 = every SM): several ranks sharing one
                            GPU each take a share, so that their persistent kernels, which wait for
                            each other, are resident together */
  uint64_t heap_bytes;   /* user region of the symmetric heap; rounded up to 2 MiB */
  uint64_t staged_bytes; /* per-source staging for small one-shot ops; rounded up to 4 KiB */
  uint64_t timeout_ns;   /* bound of every GPU-side wait; 0 = 10 s */
} WeftCommConfig;
#define WEFT_COMM_CONFIG_INIT {sizeof(WeftCommConfig), 1, 0, 0, 1, 0, 1ull << 30, 1ull << 20, 0}

typedef struct WeftCommInfo {
  uint32_t size;
  uint32_t version;
  uint64_t heap_base;   /* device address of the user region (symmetric offset 0) */
  uint64_t heap_bytes;
  uint64_t arena_base;  /* the whole arena: control words, staging, then the user region */
  uint64_t arena_bytes;
  uint64_t staged_bytes;
  int32_t sm_count;
  int32_t max_ctas;     /* most CTAs one collective may use */
  int32_t shares_device; /* 1 (after connect): some two ranks run on the same GPU */
  int32_t reserved;
} WeftCommInfo;
#define WEFT_COMM_INFO_INIT {sizeof(WeftCommInfo), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/* What one rank tells the others so that they can map its arena. */
typedef struct WeftPeerHandle {
  uint32_t size;
  uint32_t version;
  uint64_t process_token; /* random per process: equal tokens map directly, others through IPC */
  int32_t device;
  int32_t rank;
  uint64_t arena_base;
  uint64_t arena_bytes;
  uint8_t ipc[64]; /* cudaIpcMemHandle_t of the arena */
} WeftPeerHandle;
#define WEFT_PEER_HANDLE_INIT {sizeof(WeftPeerHandle), 1, 0, 0, 0, 0, 0, {0}}

WEFT_API int weft_comm_create(const WeftCommConfig* config, WeftComm** out_comm);
WEFT_API int weft_comm_info(WeftComm* comm, WeftCommInfo* out);
WEFT_API int weft_comm_export(WeftComm* comm, WeftPeerHandle* out);
/* Maps peer `handle->rank`'s arena: direct peer access when it lives in this process, else CUDA
 * IPC. Fails with WEFT_E_UNSUPPORTED when this GPU cannot reach the peer's. */
WEFT_API int weft_comm_import(WeftComm* comm, const WeftPeerHandle* handle);
/* Every peer imported: publishes the peer table to the device. Then collectives may run. */
WEFT_API int weft_comm_connect(WeftComm* comm);
/* Waits for this rank's collectives, then unmaps every peer arena (IPC handles closed). */
WEFT_API int weft_comm_close_peers(WeftComm* comm);
/* Frees the arena and the handle. Call after every peer has closed its mappings (a barrier). */
WEFT_API int weft_comm_destroy(WeftComm* comm);
/* Declares rank `failed_rank` (0 <= failed_rank < 65535; a global rank on a multi-node communicator)
 * failed: one store into a host-mapped word that every kernel of this rank polls (collectives, fused
 * TP ops, MoE plans). Their waits give up at the next poll (within microseconds of the store reaching
 * the GPU) and fail with WEFT_E_PEER, stage WEFT_STAGE_ABORTED, field WEFT_ABORT_HOST, peer
 * failed_rank; every later launch and plan creation on this communicator fails with WEFT_E_PEER at
 * once. Teardown still works. Does not block and may be called from any thread, while kernels run;
 * the first declared rank is kept. (The failure watchdog calls it when the store reports a rank gone.) */
WEFT_API int weft_comm_abort(WeftComm* comm, int32_t failed_rank);

enum WeftCollectiveKind {
  WEFT_ALL_GATHER = 0,     /* in: count elements; out: world*count (symmetric) */
  WEFT_REDUCE_SCATTER = 1, /* in: world*count (symmetric); out: count; sum */
  WEFT_ALL_REDUCE = 2,     /* in, out: count (both symmetric, may alias); sum */
  WEFT_ALL_TO_ALL = 3,     /* in: sum(send_counts); out: sum(recv_counts) (symmetric) */
  WEFT_BROADCAST = 4,      /* root's in (count) -> every out (symmetric) */
  WEFT_BARRIER = 5
};
enum WeftAlgorithm { WEFT_ALGO_AUTO = 0, WEFT_ALGO_STAGED = 1, WEFT_ALGO_DIRECT = 2 };

/* One collective launch: one persistent kernel on `stream`. A collective is one call, so its
 * completion words (done, seq, arrivals: WeftOpLaunch's three) travel inside its params, where the
 * one-kernel launch graph compares the whole call bytewise (ffi/src/comm/collectives.cpp). */
typedef struct WeftCollectiveParams {
  uint32_t size;
  uint32_t version;
  int32_t kind;      /* WeftCollectiveKind */
  int32_t dtype;     /* WeftDtype: sums take bf16, f16, f32; data movement takes any */
  uint64_t count;    /* elements per rank, as described per kind (unused by all-to-all) */
  uint64_t input;    /* device address on this rank */
  uint64_t output;
  int32_t root;      /* broadcast */
  int32_t ctas;      /* 0 = chosen by size */
  int32_t algorithm; /* WeftAlgorithm */
  int32_t reserved;
  uint64_t send_counts; /* all-to-all: host address of world_size uint64 element counts */
  uint64_t recv_counts; /* all-to-all: host address of world_size uint64 element counts */
  uint64_t stream;      /* cudaStream_t on this rank's device */
  uint64_t done;        /* device alias of 2 host-mapped uint64 words, or 0 */
  uint64_t seq;
  uint64_t arrivals;    /* 2 device uint32 words, 0 between launches (required when done != 0) */
} WeftCollectiveParams;
#define WEFT_COLLECTIVE_PARAMS_INIT {sizeof(WeftCollectiveParams), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

WEFT_API int weft_collective(WeftComm* comm, const WeftCollectiveParams* params);
/* A failed collective's reason word (done[1]): code (a WEFT_E_*) in bits 0..31, then the stage
 * (WeftCollectiveStage) in bits 32..39, the disagreeing field (WeftCollectiveField) in bits
 * 40..47 and the peer rank in bits 48..63. */
enum WeftCollectiveStage {
  WEFT_STAGE_ENTRY = 1,   /* waiting for a peer to enter the same collective */
  WEFT_STAGE_CHECK = 2,   /* the peer entered a different collective (see the field) */
  WEFT_STAGE_DONE = 3,    /* waiting for a peer to finish its part */
  WEFT_STAGE_STAGED = 4,  /* waiting for a peer's staged data */
  WEFT_STAGE_ABORTED = 5  /* another rank failed this collective and told everyone to stop */
};
/* A WEFT_STAGE_ABORTED reason's field: who stopped the launch. PEER: another rank gave up on it and
 * raised this rank's abort word (the peer field names that rank where the op knows it); HOST: the
 * host declared the peer rank failed (weft_comm_abort). Collectives and fused ops report both so. */
enum WeftAbortSource { WEFT_ABORT_PEER = 0, WEFT_ABORT_HOST = 1 };
enum WeftCollectiveField {
  WEFT_FIELD_KIND = 1, WEFT_FIELD_DTYPE = 2, WEFT_FIELD_COUNT = 3, WEFT_FIELD_CTAS = 4,
  WEFT_FIELD_ROOT = 5, WEFT_FIELD_WORLD = 6, WEFT_FIELD_ALGORITHM = 7, WEFT_FIELD_EPOCH = 8,
  WEFT_FIELD_PAIR_COUNT = 9
};

/* Test support: acc[i] += float(src[i]) in fp32, the deliberately simple reference for sums. */
WEFT_API int weft_accumulate(float* acc, const void* src, int32_t src_dtype, uint64_t count,
                             void* stream);

/* ---- GEMM engine ------------------------------------------------------------------------------ */

/* C = A · op(B), bf16 inputs, fp32 accumulation, bf16 (or fp32) output, on one device.
 *   A [M, K] row-major, row stride lda elements (lda >= K)
 *   B [N, K] row-major when WEFT_GEMM_B_NK is set (y = x·Wᵀ, the weights layout), else [K, N]
 *     row-major; row stride ldb (>= K or >= N)
 *   C [M, N] row-major, row stride ldc (>= N); elements outside the M x N region are not touched.
 * Any M, N, K >= 1. The copy engine (TMA) needs 16-byte aligned base pointers and row strides
 * (lda, ldb multiples of 8; ldc a multiple of 8 for bf16, 4 for fp32): pad rows to get there.
 * The call is stream-ordered and returns after the launch; its completion is a WeftOpLaunch (or
 * NULL: none). */
enum WeftGemmFlags {
  WEFT_GEMM_B_NK = 1,    /* B is [N, K] row-major */
  WEFT_GEMM_OUT_F32 = 2  /* C is fp32 */
};
/* A failed launch of the engine (the plain GEMM, and the fused ops built on it): the reason word's
 * code and stage (the role of the CTA that gave up). */
enum WeftGemmFailure {
  WEFT_GEMM_FAIL_BARRIER_TIMEOUT = 1, /* a shared-memory pipeline barrier wait ran out */
  WEFT_GEMM_FAIL_HOOK_WAIT = 2        /* an op's wait (for a peer's signal) ran out */
};
enum WeftGemmStage {
  WEFT_GEMM_STAGE_PRODUCER = 1, /* the producer, before a tile's loads */
  WEFT_GEMM_STAGE_CONSUMER = 2, /* a consumer (shared-memory pipeline) */
  WEFT_GEMM_STAGE_EPILOGUE = 3, /* the epilogue, before a tile's stores */
  WEFT_GEMM_STAGE_FINISH = 4    /* the end of the kernel (before-finish) */
};

typedef struct WeftGemmParams {
  uint32_t size;    /* sizeof(WeftGemmParams) */
  uint32_t version; /* 2 */
  uint64_t a;       /* device addresses */
  uint64_t b;
  uint64_t c;
  int64_t m, n, k;
  int64_t lda, ldb, ldc; /* row strides in elements */
  uint32_t flags;        /* WeftGemmFlags */
  /* Configuration override; 0 = chosen by the heuristic. Validated together (weft_gemm_choose). */
  int32_t tile_n;    /* 64, 128 or 256 columns per CTA tile (rows are always 128) */
  int32_t cluster_m; /* 1 or 2: pairs of CTAs on neighbouring M tiles multicast the shared B tile */
  int32_t cluster_n; /* 1 or 2: pairs on neighbouring N tiles multicast the shared A tile */
  int32_t group_m;   /* tile-order band height in cluster tiles (L2 reuse), >= 1 */
  int32_t max_ctas;  /* cap on the persistent grid; 0 = every SM */
  uint64_t stream;   /* cudaStream_t on the operands' device; 0 = legacy default stream */
} WeftGemmParams;
#define WEFT_GEMM_PARAMS_INIT {sizeof(WeftGemmParams), 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/* The configuration a call with these params runs (override fields applied, the rest chosen). */
typedef struct WeftGemmChoice {
  uint32_t size;    /* sizeof(WeftGemmChoice) */
  uint32_t version; /* 1 */
  int32_t tile_m, tile_n, tile_k;
  int32_t cluster_m, cluster_n;
  int32_t group_m;
  int32_t stages; /* depth of the shared-memory ring */
  int32_t ctas;   /* CTAs of the persistent grid (co-resident clusters, tiles and max_ctas permitting) */
} WeftGemmChoice;
#define WEFT_GEMM_CHOICE_INIT {sizeof(WeftGemmChoice), 1, 0, 0, 0, 0, 0, 0, 0, 0}

/* Validates params exactly as weft_gemm does and reports the configuration, launching nothing. */
WEFT_API int weft_gemm_choose(const WeftGemmParams* params, WeftGemmChoice* out);
/* A GEMM prepared once (validated, configured, its tensor maps encoded) and launched as often as
 * needed on params->stream: the operands' addresses are fixed at creation. */
typedef struct WeftGemmPlan WeftGemmPlan;
WEFT_API int weft_gemm_plan_create(const WeftGemmParams* params, WeftGemmPlan** out_plan);
WEFT_API int weft_gemm_plan_launch(WeftGemmPlan* plan, const WeftOpLaunch* launch);
WEFT_API int weft_gemm_plan_destroy(WeftGemmPlan* plan);
/* One launch without a plan (the plan made, launched and freed in one call). launch may be NULL. */
WEFT_API int weft_gemm(const WeftGemmParams* params, const WeftOpLaunch* launch);

/* ---- fused tensor-parallel ops (one node over NVLink; across nodes through the proxy) --------- */

/* One rank's part of a tensor-parallel GEMM with its communication, as one persistent kernel
 * ("fused") or as our own GEMM and collective in sequence ("sequential"). W = world size, and
 * rank r owns rows [r * m_shard, min(m, (r + 1) * m_shard)) of the row-sharded side, with
 * m_shard = ceil(m / W). All matrices are bf16, row-major and contiguous:
 *   WEFT_TP_ALL_GATHER_GEMM      a [m_shard, k] (this rank's rows of A), b [k, n] (or [n, k] with
 *                                WEFT_GEMM_B_NK), out [m, n] = allgather(a) · b; gathered (optional,
 *                                0 = not wanted) [m, k] receives allgather(a).
 *   WEFT_TP_GEMM_REDUCE_SCATTER  a [m, k], b as above, out [m_shard, n] (symmetric) = rows of
 *                                sum over ranks of a · b that this rank owns (rows past m: zeros).
 *   WEFT_TP_GEMM_ALL_REDUCE      a [m, k], b as above, out [m, n] (symmetric) = sum over ranks of a · b.
 * n and k are this rank's local sizes (column-parallel: n = N / W; row-parallel: k = K / W).
 *
 * Plans: weft_tp_choose() reports the configuration and how many bytes of symmetric workspace the
 * plan needs; allocate them from the communicator's heap (every rank the same), then
 * weft_tp_plan_create() zeroes the workspace on `stream`. Order that zeroing before any peer's first
 * launch (a barrier on the same stream), then weft_tp_plan_launch() as often as needed: every rank
 * launches its plans in the same order. Each launch takes the plan's next epoch; nothing is reset. */
enum WeftTpOp { WEFT_TP_ALL_GATHER_GEMM = 0, WEFT_TP_GEMM_REDUCE_SCATTER = 1, WEFT_TP_GEMM_ALL_REDUCE = 2 };
enum WeftTpPath { WEFT_TP_PATH_AUTO = 0, WEFT_TP_PATH_FUSED = 1, WEFT_TP_PATH_SEQUENTIAL = 2 };
/* The fused path's data mover. All-gather: CTAs of the kernel storing 16-byte vectors into the
 * peers, or the copy engines (a cudaMemcpyAsync per chunk and peer on side streams, each followed by
 * a flag written with cuStreamWriteValue64 that the persistent GEMM polls; no SM is taken from the
 * GEMM). Reduce-scatter / all-reduce: CTAS = the GEMM's epilogue stores and adds into the peers'
 * outputs; COPY_ENGINE = the epilogue stages the peers' partials locally, side streams copy them to
 * their owners, the owner adds them in its epilogue (m a multiple of 128 x world size). All-reduce
 * only: EXCHANGE = every rank's epilogue stores each partial tile into every peer and adds the
 * peers' partials of the same tile (decode sizes). */
enum WeftTpMover {
  WEFT_TP_MOVER_AUTO = 0,
  WEFT_TP_MOVER_CTAS = 1,
  WEFT_TP_MOVER_COPY_ENGINE = 2,
  WEFT_TP_MOVER_NONE = 3,
  WEFT_TP_MOVER_EXCHANGE = 4
};

typedef struct WeftTpParams {
  uint32_t size;    /* sizeof(WeftTpParams) */
  uint32_t version; /* 1 */
  int32_t op;       /* WeftTpOp */
  uint32_t flags;   /* WEFT_GEMM_B_NK */
  int64_t m, n, k;  /* see above */
  uint64_t a, b, out, gathered; /* device addresses on this rank's device */
  /* Overrides; 0 = chosen by the cost model. */
  int32_t path;      /* WeftTpPath */
  int32_t mover;     /* WeftTpMover */
  int32_t comm_ctas; /* CTAs that move data (all-gather with the CTA mover) */
  int32_t tile_n;    /* 64 (all-reduce only), 128 or 256 (exchange mover: one wave only) */
  int32_t group_m;   /* tile-order band height in tile rows */
  int32_t reserved;
  uint64_t workspace;       /* symmetric device address (weft_tp_plan_create only) */
  uint64_t workspace_bytes; /* at least WeftTpChoice.workspace_bytes */
  uint64_t stream;          /* cudaStream_t on this rank's device: where the plan runs */
} WeftTpParams;
#define WEFT_TP_PARAMS_INIT {sizeof(WeftTpParams), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

typedef struct WeftTpChoice {
  uint32_t size;    /* sizeof(WeftTpChoice) */
  uint32_t version; /* 1 */
  int32_t path;     /* WEFT_TP_PATH_FUSED or WEFT_TP_PATH_SEQUENTIAL */
  int32_t mover;    /* WeftTpMover; NONE on the sequential path */
  int32_t comm_ctas;
  int32_t gemm_ctas;
  int32_t tile_n;
  int32_t group_m;
  int32_t chunk_rows; /* all-gather: rows per arrival flag */
  int32_t fused_available; /* 0: the shape or world size needs the sequential path (see reason) */
  uint64_t workspace_bytes;
  double predicted_fused_us;      /* the cost model's estimates (0 when not available) */
  double predicted_sequential_us;
  char reason[128]; /* why the fused path is not available, or "" */
} WeftTpChoice;
#define WEFT_TP_CHOICE_INIT {sizeof(WeftTpChoice), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, {0}}

typedef struct WeftTpPlan WeftTpPlan;
/* The configuration a plan with these params would run (workspace, stream ignored). */
WEFT_API int weft_tp_choose(WeftComm* comm, const WeftTpParams* params, WeftTpChoice* out);
WEFT_API int weft_tp_plan_create(WeftComm* comm, const WeftTpParams* params, WeftTpPlan** out_plan);
WEFT_API int weft_tp_plan_launch(WeftTpPlan* plan, const WeftOpLaunch* launch);
/* Several plans of this process (one per rank of a one-process communicator group) as one step:
 * every plan's kernels first, then every plan's copy-engine work, so that no rank's kernel is queued
 * behind another rank's host-side copy enqueue. Otherwise the same as weft_tp_plan_launch on each. */
WEFT_API int weft_tp_plans_launch(WeftTpPlan* const* plans, const WeftOpLaunch* launches, int32_t count);
/* Waits for the plan's work on its streams, then frees it (not the workspace, which the caller owns). */
WEFT_API int weft_tp_plan_destroy(WeftTpPlan* plan);
/* A failed launch's reason word: code in bits 0..31 (WEFT_TP_FAIL_*, the engine's WeftGemmFailure
 * codes, with a WeftGemmStage in bits 32..39; or a collective's WEFT_E_* with the collective's
 * stage/field/peer above it). */
enum WeftTpFailure { WEFT_TP_FAIL_BARRIER = 1, WEFT_TP_FAIL_PEER_WAIT = 2, WEFT_TP_FAIL_STAGE_MISSING = 3 };

/* Test support: the choice weft_tp_choose would make on a described machine, with no GPU and no
 * communicator (the cost model is a pure function of the call and the placement). out_detail
 * (optional): the configuration beside the choice as text (split tail, ownership, chunking,
 * padding, workspace regions), valid until the calling thread's next call; its form may change. */
typedef struct WeftTestingTpMachine {
  uint32_t size;         /* sizeof(WeftTestingTpMachine) */
  uint32_t version;      /* 1 */
  int32_t world;         /* ranks per node (the communicator's world) */
  int32_t rank;
  int32_t sm_count;      /* the device's SMs */
  int32_t sm_budget;     /* the communicator's smBudget (0 = every SM) */
  int32_t nodes;         /* 1, or the nodes of a multi-node communicator */
  int32_t shares_device; /* 1: some two ranks of the communicator run on the same GPU */
  uint64_t slot_bytes;   /* multi-node: inter-node staging per (rank, peer node) */
} WeftTestingTpMachine;
#define WEFT_TESTING_TP_MACHINE_INIT {sizeof(WeftTestingTpMachine), 1, 1, 0, 132, 0, 1, 0, 0}
WEFT_API int weft_testing_tp_choose(const WeftTestingTpMachine* machine, const WeftTpParams* params, WeftTpChoice* out,
                                    const char** out_detail);

/* ---- inter-node: transport, command FIFO and proxy, multi-node communicator ------------------- */

/* Transport: one libfabric RDM endpoint per rank (ffi/src/transport/). Set-up is collective:
 *   1. weft_transport_open on every rank;
 *   2. exchange weft_transport_address blobs (bootstrap store), weft_transport_connect with all;
 *   3. per memory region, on every rank in the same order: weft_transport_register, exchange
 *      weft_transport_region_descriptor blobs, weft_transport_region_connect with all.
 * Region indices are then the same on every rank; user regions start at 1 (0 is the transport's).
 * Provider: automatic (efa > verbs;ofi_rxm > shm when same_host > tcp;ofi_rxm), or forced by
 * `provider` or WEFT_FABRIC_PROVIDER. WEFT_LOG=info prints the choice on stderr. */
typedef struct WeftTransport WeftTransport;

typedef struct WeftTransportParams {
  uint32_t size;        /* sizeof(WeftTransportParams) */
  uint32_t version;     /* 1 */
  int32_t rank;
  int32_t world_size;
  int32_t device;       /* GPU whose memory may be registered (FI_HMEM); -1: host memory only */
  int32_t same_host;    /* 1 when every rank runs on this host: lets the shm provider qualify */
  uint32_t timeout_ms;  /* bound on every transport operation; 0 = 30000 */
  uint32_t reserved;    /* 0 */
  uint64_t provider;    /* address of a NUL-terminated provider name; 0 or "" = automatic */
} WeftTransportParams;
#define WEFT_TRANSPORT_PARAMS_INIT {sizeof(WeftTransportParams), 1, 0, 1, -1, 0, 0, 0, 0}

WEFT_API int weft_transport_open(const WeftTransportParams* params, WeftTransport** out);
/* WEFT_E_INVALID while a proxy still runs on it. Closes the endpoint first: no transfer touches
 * registered memory after this returns. */
WEFT_API int weft_transport_close(WeftTransport* transport);
/* JSON {"provider", "fabric", "domain", "libfabric", "hmem", "deliveryComplete", "mrMode",
 * "dataProgress", "maxMessage", "rank", "worldSize"}; valid until close. */
WEFT_API int weft_transport_info(WeftTransport* transport, const char** out_json);
/* This rank's address blob (valid until close); every rank's blob has the same length. */
WEFT_API int weft_transport_address(WeftTransport* transport, const uint8_t** out_blob,
                                    uint64_t* out_bytes);
/* blobs: `count` (= world size) addresses of `stride` bytes each, in rank order. */
WEFT_API int weft_transport_connect(WeftTransport* transport, const uint8_t* blobs, uint64_t stride,
                                    int32_t count);
/* device -1: host memory (weft_transport_host_alloc or pinned); >= 0: that GPU's memory (needs a
 * provider with FI_HMEM, else WEFT_E_UNSUPPORTED). */
WEFT_API int weft_transport_register(WeftTransport* transport, void* base, uint64_t bytes,
                                     int32_t device, int32_t* out_region);
WEFT_API int weft_transport_region_descriptor(WeftTransport* transport, int32_t region,
                                              const uint8_t** out_blob, uint64_t* out_bytes);
WEFT_API int weft_transport_region_connect(WeftTransport* transport, int32_t region,
                                           const uint8_t* blobs, uint64_t stride, int32_t count);
WEFT_API int weft_transport_deregister(WeftTransport* transport, int32_t region);

/* Host memory a NIC and (when present) every GPU can reach: pinned and mapped with a GPU
 * (out_device = its device alias), page-aligned host memory without one (out_device = NULL).
 * Zero-filled. */
WEFT_API int weft_transport_host_alloc(uint64_t bytes, void** out_host, void** out_device);
WEFT_API int weft_transport_host_free(void* host);

/* Live resources in this process, for leak checks after teardown. */
typedef struct WeftTransportCounters {
  uint32_t size;    /* sizeof(WeftTransportCounters) */
  uint32_t version; /* 1 */
  int64_t transports;
  int64_t regions;       /* registered memory regions, transports' own included */
  int64_t proxy_threads; /* proxy threads running */
  int64_t host_buffers;  /* FIFOs, control regions and weft_transport_host_alloc blocks */
} WeftTransportCounters;
#define WEFT_TRANSPORT_COUNTERS_INIT {sizeof(WeftTransportCounters), 1, 0, 0, 0, 0}
WEFT_API int weft_transport_counters(WeftTransportCounters* out);

/* Test support (fault injection; never called by the library itself): from now on every
 * `every`th data write of this transport is reported delivered but never sent, so a test can prove
 * that a receiver's checks catch a signal that arrives without its data. 0 turns it off. Call it
 * before the transport's proxy starts. */
WEFT_API int weft_testing_transport_drop_writes(WeftTransport* transport, uint64_t every);

/* Proxy: one thread per rank that drains the command FIFO into the transport (ffi/src/proxy/).
 * Slot layout and ordering rules: cuda/primitives/proxy_command.h. Host code pushes with
 * weft_proxy_push; kernels push into the device lane (cuda/primitives/fifo.cuh). */
typedef struct WeftProxy WeftProxy;

typedef struct WeftProxyParams {
  uint32_t size;         /* sizeof(WeftProxyParams) */
  uint32_t version;      /* 1 */
  uint32_t fifo_slots;   /* power of two in [2, 2^20]; 0 = 1024 */
  uint32_t batch;        /* commands taken per pass, [1, 4096]; 0 = 64 */
  uint32_t max_inflight; /* commands in flight per lane; 0 = 4096 */
  uint32_t timeout_ms;   /* barrier waits; 0 = the transport's timeout */
  int32_t device;        /* pin near this GPU and add a device lane; -1: host lane only */
  uint32_t reserved;     /* 0 */
} WeftProxyParams;
#define WEFT_PROXY_PARAMS_INIT {sizeof(WeftProxyParams), 1, 0, 0, 0, 0, -1, 0}

enum WeftProxyOpcode {
  WEFT_PROXY_PUT = 1,     /* bytes src_region[src_offset..] -> peer's dst_region[dst_offset..] */
  WEFT_PROXY_SIGNAL = 2,  /* raise the peer's signal word to signal_value after earlier data */
  WEFT_PROXY_FENCE = 3,   /* later commands start after every earlier one completed */
  WEFT_PROXY_BARRIER = 4  /* fence + barrier with every rank's proxy */
};
#define WEFT_PROXY_FLAG_SIGNAL 1u /* PUT: then raise the signal (signal_* fields) */

typedef struct WeftProxyCommand {
  uint32_t size;    /* sizeof(WeftProxyCommand) */
  uint32_t version; /* 1 */
  uint32_t opcode;  /* WeftProxyOpcode */
  uint32_t flags;   /* WEFT_PROXY_FLAG_* */
  int32_t peer;
  int32_t src_region;
  int32_t dst_region;
  int32_t signal_region;
  uint64_t src_offset;
  uint64_t dst_offset;
  uint64_t bytes;
  uint64_t signal_offset; /* 8-byte aligned */
  uint64_t signal_value;  /* epoch: values only grow */
  uint64_t cookie;        /* opaque, quoted in errors */
} WeftProxyCommand;
#define WEFT_PROXY_COMMAND_INIT {sizeof(WeftProxyCommand), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

typedef struct WeftProxyFifo {
  uint32_t size;       /* sizeof(WeftProxyFifo) */
  uint32_t version;    /* 1 */
  uint32_t capacity;   /* slots per lane */
  uint32_t slot_bytes; /* 64 */
  uint64_t host_control; /* host lane control block: head @0, tail @64, completed @128, error @192 */
  uint64_t host_slots;
  /* Device lane (all 0 without a GPU): its control block as the host sees it (for polling
   * `completed`), then the device addresses a kernel's FifoDevice (primitives/fifo.cuh) takes. */
  uint64_t device_control_host;
  uint64_t device_control;
  uint64_t device_slots;
  uint64_t device_head;  /* ticket counter, in device memory */
} WeftProxyFifo;
#define WEFT_PROXY_FIFO_INIT {sizeof(WeftProxyFifo), 1, 0, 0, 0, 0, 0, 0, 0, 0}

typedef struct WeftProxyStats {
  uint32_t size;    /* sizeof(WeftProxyStats) */
  uint32_t version; /* 1 */
  uint64_t pushed;    /* host lane tickets claimed */
  uint64_t consumed;  /* commands taken from the FIFOs */
  uint64_t completed; /* commands complete */
  uint64_t puts;
  uint64_t signals;
  uint64_t fences;
  uint64_t barriers;
  uint64_t passes;      /* proxy loop passes that did work */
  uint64_t idle_sleeps; /* times the idle proxy slept */
  uint64_t max_batch;   /* most commands taken in one pass */
  uint64_t transport_writes;        /* write ops posted for data (chunks) */
  uint64_t transport_bytes;         /* data bytes */
  uint64_t transport_signal_writes; /* signal writes posted (coalesced) */
} WeftProxyStats;
#define WEFT_PROXY_STATS_INIT {sizeof(WeftProxyStats), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/* Starts the proxy thread on a connected transport. */
WEFT_API int weft_proxy_start(WeftTransport* transport, const WeftProxyParams* params,
                              WeftProxy** out);
/* Stops the thread and frees the proxy and its FIFOs. Bounded: does not wait for in-flight
 * transfers (push a FENCE and wait for it first when they must land). Kernels pushing into the
 * device lane must have finished (weft_proxy_abort releases any that wait). */
WEFT_API int weft_proxy_stop(WeftProxy* proxy);
/* Pushes `count` commands (each commands[i].size bytes apart) into the host lane, all or none,
 * waiting up to timeout_ms for room (0: fail at once with WEFT_E_TIMEOUT when full). Commands
 * are validated first (WEFT_E_INVALID names the command and field). out_first_ticket: the ticket
 * of commands[0]; the others follow consecutively. */
WEFT_API int weft_proxy_push(WeftProxy* proxy, const WeftProxyCommand* commands, uint32_t count,
                             uint32_t timeout_ms, uint64_t* out_first_ticket);
/* Waits until every host-lane ticket <= ticket completed; fails with the proxy's error. */
WEFT_API int weft_proxy_wait(WeftProxy* proxy, uint64_t ticket, uint32_t timeout_ms);
WEFT_API int weft_proxy_fifo(WeftProxy* proxy, WeftProxyFifo* out);
/* out_code: 0 while healthy, else the WEFT_E_* that stopped the proxy; out_message valid until
 * the next call on this proxy from the same thread. */
WEFT_API int weft_proxy_error(WeftProxy* proxy, int32_t* out_code, const char** out_message);
WEFT_API int weft_proxy_stats(WeftProxy* proxy, WeftProxyStats* out);
/* Fails the proxy now (WEFT_E_TRANSPORT, "aborted"): its thread ends and every waiter, GPU threads
 * in fifo.cuh included, gives up. Stop it after the kernels using its device lane have finished. */
WEFT_API int weft_proxy_abort(WeftProxy* proxy);
/* 1: stop taking commands (they stay in the FIFO; producers meet backpressure); 0: resume. */
WEFT_API int weft_proxy_set_paused(WeftProxy* proxy, int32_t paused);
/* Test and benchmark support: launches ctas x threads GPU threads on `stream`, each pushing
 * per_thread copies of *tmpl into the device lane through primitives/fifo.cuh (thread g raises
 * word tmpl->signal_offset + 8 g to 1, 2, ..., per_thread). failures: 2 uint64 of device memory,
 * zeroed by the caller: [0] pushes that gave up, [1] the proxy status they saw. */
WEFT_API int weft_proxy_device_push(WeftProxy* proxy, const WeftProxyCommand* tmpl, uint32_t ctas,
                                    uint32_t threads, uint32_t per_thread, uint32_t timeout_ms,
                                    void* failures, void* stream);

/* Multi-node communicator (hierarchical collectives). A WeftComm made over the ranks of ONE node
 * (rank = local rank, world_size = local size) becomes one rank of a multi-node group once it is
 * given the inter-node resources below; lib/comm.ts drives the set-up (transport, proxy with a
 * device lane, two host-mapped staging buffers registered with the transport on every rank).
 * Ranks are rail-aligned and node-major: global rank = node * local_size + local rank, and local
 * rank l exchanges only with local rank l of the other nodes.
 * After it, weft_collective runs allGather, reduceScatter, allReduce and barrier hierarchically
 * (NVLink inside the node, the proxy between nodes, one kernel per call) with counts and sizes in
 * global terms (world = nodes * local_size); all-to-all and broadcast fail with UNSUPPORTED.
 *
 * Staging layouts (weft_comm_internode_bytes gives both sizes):
 *   send  [2 epoch parity][nodes][slot_bytes]               written by this GPU, read by the NIC
 *   recv  signals u64[nodes][256 CTAs] (padded to 4 KiB),  raised by the peers' proxies (epochs)
 *         then [2 epoch parity][nodes][slot_bytes]          written by the peers' NICs
 * One call moves at most slot_bytes per (rank, peer node): an all-gather or reduce-scatter block,
 * or an all-reduce shard (count / local_size). */
typedef struct WeftCommInterNode {
  uint32_t size;    /* sizeof(WeftCommInterNode) */
  uint32_t version; /* 1 */
  int32_t rank;       /* global rank: node * local_size + the communicator's rank */
  int32_t world_size; /* nodes * local_size */
  int32_t node;
  int32_t nodes;      /* >= 2 */
  int32_t send_region; /* transport regions (the same index on every rank) */
  int32_t recv_region;
  uint64_t send_staging; /* device alias of the host-mapped send staging */
  uint64_t send_bytes;
  uint64_t recv_staging; /* device alias of the host-mapped receive staging */
  uint64_t recv_bytes;
  uint64_t slot_bytes;   /* multiple of 256 */
  uint64_t fifo_slots;   /* the proxy's device lane (WeftProxyFifo.device_slots, device_head, */
  uint64_t fifo_head;    /* device_control, capacity) */
  uint64_t fifo_control;
  uint32_t fifo_capacity;
  uint32_t reserved;
} WeftCommInterNode;
#define WEFT_COMM_INTER_NODE_INIT {sizeof(WeftCommInterNode), 1, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

WEFT_API int weft_comm_internode_bytes(int32_t nodes, uint64_t slot_bytes, uint64_t* out_send_bytes,
                                       uint64_t* out_recv_bytes);
/* Once, after weft_comm_connect. The staging and the proxy must outlive the communicator's last
 * collective (tear down: close_peers, then stop the proxy, close the transport, free staging). */
WEFT_API int weft_comm_set_internode(WeftComm* comm, const WeftCommInterNode* inter);
/* Failure stage of a hierarchical collective waiting for another node (WeftCollectiveStage):
 * the peer in the reason word is a global rank; code WEFT_E_TIMEOUT, or the proxy's WEFT_E_*. */
#define WEFT_STAGE_REMOTE 6

/* ---- DLPack: tensors shared with other runtimes in one process ------------------------------- */

/* A strided tensor as DLPack (dlpack.h 1.x) describes it, flattened into an ABI struct. Export turns
 * one into a DLManagedTensorVersioned (or a legacy DLManagedTensor) whose deleter is native code;
 * import reads either kind back. Bindings only move the managed tensor's address (and, in Python,
 * wrap it in a "dltensor_versioned" / "dltensor" capsule); the DLPack structs live in ffi/src. */
#define WEFT_DLPACK_MAX_NDIM 8
enum WeftDlpackDevice {  /* DLDeviceType values */
  WEFT_DLPACK_CPU = 1,
  WEFT_DLPACK_CUDA = 2,
  WEFT_DLPACK_CUDA_HOST = 3,    /* pinned host memory */
  WEFT_DLPACK_CUDA_MANAGED = 13
};
enum WeftDlpackFlags {
  WEFT_DLPACK_VERSIONED = 1, /* DLManagedTensorVersioned; without it, the legacy DLManagedTensor */
  WEFT_DLPACK_FREE_DATA = 2  /* export only: the deleter weft_free()s `data` (weft_malloc memory whose
                                ownership moves to the consumer) */
};

typedef struct WeftDlpackDesc {
  uint32_t size;      /* sizeof(WeftDlpackDesc) */
  uint32_t version;   /* 1 */
  uint64_t data;      /* address of element 0 (DLTensor.data + byte_offset) */
  int32_t device_type; /* WeftDlpackDevice */
  int32_t device_id;
  int32_t ndim;       /* 0 .. WEFT_DLPACK_MAX_NDIM */
  int32_t dtype;      /* WeftDtype; import: -1 when the DLPack dtype has no weft equivalent */
  uint32_t dl_dtype;  /* DLDataType as code | bits << 8 | lanes << 16 (export derives it from dtype) */
  uint32_t read_only; /* 1: DLPACK_FLAG_BITMASK_READ_ONLY (versioned tensors only carry it) */
  int64_t shape[WEFT_DLPACK_MAX_NDIM];
  int64_t strides[WEFT_DLPACK_MAX_NDIM]; /* in elements; import gives compact row-major strides when
                                            the producer passed none */
} WeftDlpackDesc;
#define WEFT_DLPACK_DESC_INIT {sizeof(WeftDlpackDesc), 1, 0, 0, 0, 0, 0, 0, 0, {0}, {0}}

/* Called once by the exported tensor's deleter, on whichever thread the consumer drops it, so the
 * producer can let go of what kept the memory alive. May be NULL. */
typedef void (*WeftDlpackRelease)(void* ctx);

/* flags: WEFT_DLPACK_VERSIONED, WEFT_DLPACK_FREE_DATA. out_managed: the DLManagedTensor(Versioned)*. */
WEFT_API int weft_dlpack_export(const WeftDlpackDesc* desc, uint32_t flags, WeftDlpackRelease release,
                                void* ctx, void** out_managed);
/* Reads any producer's managed tensor (flags: WEFT_DLPACK_VERSIONED when it is one). Versions other
 * than 1.x and more than WEFT_DLPACK_MAX_NDIM dimensions fail with WEFT_E_UNSUPPORTED. */
WEFT_API int weft_dlpack_import(const void* managed, uint32_t flags, WeftDlpackDesc* out);
/* The consumer is done: calls the managed tensor's deleter (any producer's; NULL deleter: nothing). */
WEFT_API int weft_dlpack_delete(void* managed, uint32_t flags);
/* Tensors exported by weft_dlpack_export whose deleter has not run yet (leak checks). */
WEFT_API int weft_dlpack_live(int64_t* out_count);
/* From now on, deleters skip `release` (they still free what they own). For a binding whose
 * callbacks stop being callable before its consumers drop their tensors: Python's ctypes callbacks
 * at interpreter exit, while a JAX array viewing weft memory is destroyed after it. */
WEFT_API int weft_dlpack_forget_release(WeftDlpackRelease release);

/* ---- MoE expert parallelism -------------------------------------------------------------------- */

/* Each rank holds `tokens` rows x [tokens, hidden] (bf16) and their top-k routing over E experts;
 * E / W experts live on each rank (expert e on rank e / (E / W)). Everything below runs on the GPU:
 * routing, the per-(source rank, expert) counts, their exchange through the symmetric heap, the
 * receive layout and the row movement. No host sync, so plans are back-to-back safe and capturable
 * in a CUDA graph. The device code and the layouts are documented in cuda/moe/moe.h.
 *
 * Routing: the k largest logits of a token, ties to the lower expert id (NaN counts as -inf), in
 * descending order; weights = softmax(logits)[ids], renormalised over the k when asked. */
#define WEFT_MOE_MAX_EXPERTS 1024
#define WEFT_MOE_BLOCK_ROWS 128 /* each expert's receive rows are padded to this (the GEMM's row block) */
#define WEFT_MOE_ROUTE 1u       /* WeftMoeDispatchParams.flags: route from `logits` inside the dispatch */
#define WEFT_MOE_NORMALIZE 2u   /* renormalise the top-k weights to sum to 1 */

typedef struct WeftMoeRouteParams {
  uint32_t size;    /* sizeof(WeftMoeRouteParams) */
  uint32_t version; /* 1 */
  uint64_t logits;  /* [tokens, experts] f32 or bf16, row stride `experts` */
  int32_t logits_dtype; /* WEFT_F32 or WEFT_BF16 */
  uint32_t flags;       /* WEFT_MOE_NORMALIZE */
  int64_t tokens;       /* >= 0 */
  int32_t experts;      /* 1 .. WEFT_MOE_MAX_EXPERTS */
  int32_t topk;         /* 1 .. experts */
  uint64_t ids;         /* out: [tokens, topk] int32 */
  uint64_t weights;     /* out: [tokens, topk] f32 */
  uint64_t stream;
  uint64_t done;        /* completion (WeftOpLaunch's words: a one-call op, as a collective), 0 = none */
  uint64_t seq;
  uint64_t arrivals;
} WeftMoeRouteParams;
#define WEFT_MOE_ROUTE_PARAMS_INIT {sizeof(WeftMoeRouteParams), 1, 0, WEFT_F32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
WEFT_API int weft_moe_route(const WeftMoeRouteParams* params);

/* Dispatch: one persistent kernel per launch. It routes (WEFT_MOE_ROUTE) or reads `ids`, counts the
 * rows per expert, exchanges the counts with every rank, lays out every owner's receive buffer
 * (expert-contiguous, each expert padded to WEFT_MOE_BLOCK_ROWS rows, this rank's own rows first
 * in each expert, then the other sources in the order they arrive) and pushes every routed row
 * into its owner's receive slot, raising per-128-row-block arrival counters. The plan's workspace
 * (symmetric, weft_moe_dispatch_choose gives its size and the offsets below) holds the layout:
 *   recv           bf16 [capacity, hidden]   the received rows; padding rows are left as they were
 *   row_source     int32 [capacity, 4]       per row: source rank, token, k slot, 0 (-1s on padding)
 *   expert_offsets int32 [E/W + 1]           expert le's rows start there (multiples of 128); [E/W] = rows used
 *   expert_counts  int32 [E/W]               real rows per local expert
 *   source_counts  int32 [W, E/W]            rows per (source rank, local expert)
 *   arrivals       uint64 [capacity / 128]   landed rows + padding credit per block: 128 x launches when complete
 * Capacity 0 = the worst case (W x max_tokens x topk rows + padding), so no token is ever dropped;
 * a smaller capacity that a routing overflows fails the launch on every rank (WEFT_MOE_FAIL_CAPACITY,
 * with the owner and the rows it needed), it never drops rows silently. */
typedef struct WeftMoeDispatchParams {
  uint32_t size;    /* sizeof(WeftMoeDispatchParams) */
  uint32_t version; /* 1 */
  uint32_t flags;   /* WEFT_MOE_ROUTE, WEFT_MOE_NORMALIZE */
  int32_t experts;  /* E: a multiple of the world size, <= WEFT_MOE_MAX_EXPERTS */
  int32_t topk;     /* 1 <= topk <= E */
  int32_t hidden;   /* H: a multiple of 8 */
  int64_t tokens;   /* this rank's T, 0 <= T <= max_tokens */
  int64_t max_tokens; /* the same on every rank (0 = tokens) */
  int64_t capacity;   /* receive rows per rank: 0 = worst case, else a multiple of 128 */
  uint64_t x;         /* [tokens, hidden] bf16, 16-byte aligned (unused when tokens = 0) */
  uint64_t ids;       /* [tokens, topk] int32: the routing, or where WEFT_MOE_ROUTE writes it */
  uint64_t weights;   /* [tokens, topk] f32: where WEFT_MOE_ROUTE writes the weights (else unused) */
  uint64_t logits;    /* WEFT_MOE_ROUTE: [tokens, experts] */
  int32_t logits_dtype; /* WEFT_F32 or WEFT_BF16 */
  int32_t ctas;         /* 0 = chosen by size */
  uint64_t workspace;       /* symmetric (weft_moe_dispatch_create only) */
  uint64_t workspace_bytes;
  uint64_t stream;          /* where the plan runs */
} WeftMoeDispatchParams;
#define WEFT_MOE_DISPATCH_PARAMS_INIT \
  {sizeof(WeftMoeDispatchParams), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, WEFT_F32, 0, 0, 0, 0}

typedef struct WeftMoeDispatchChoice {
  uint32_t size;    /* sizeof(WeftMoeDispatchChoice) */
  uint32_t version; /* 1 */
  int32_t ctas;
  int32_t local_experts;
  int64_t capacity;   /* receive rows (a multiple of 128) */
  int64_t max_tokens;
  uint64_t workspace_bytes;
  /* Byte offsets in the workspace (the same on every rank): */
  uint64_t recv_offset;
  uint64_t row_source_offset;
  uint64_t expert_offsets_offset;
  uint64_t expert_counts_offset;
  uint64_t source_counts_offset;
  uint64_t arrivals_offset;
} WeftMoeDispatchChoice;
#define WEFT_MOE_DISPATCH_CHOICE_INIT {sizeof(WeftMoeDispatchChoice), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

typedef struct WeftMoeDispatchPlan WeftMoeDispatchPlan;
WEFT_API int weft_moe_dispatch_choose(WeftComm* comm, const WeftMoeDispatchParams* params,
                                      WeftMoeDispatchChoice* out);
/* Zeroes the workspace on `stream`; order that before any peer's first launch (a barrier on the
 * same stream), as for TP plans. */
WEFT_API int weft_moe_dispatch_create(WeftComm* comm, const WeftMoeDispatchParams* params,
                                      WeftMoeDispatchPlan** out_plan);
/* launch->done = 0: no completion (CUDA-graph capture); failures then show only in the layout's
 * status, which the combine checks. Every rank launches its MoE plans in the same order. */
WEFT_API int weft_moe_dispatch_launch(WeftMoeDispatchPlan* plan, const WeftOpLaunch* launch);
WEFT_API int weft_moe_dispatch_destroy(WeftMoeDispatchPlan* plan);
/* Host address of 4 host-mapped uint64 words a failed launch fills before it reports (see
 * WeftMoeFailure for what each holds); valid until destroy. */
WEFT_API int weft_moe_dispatch_report(WeftMoeDispatchPlan* plan, const uint64_t** out_words);

/* Combine: every owner pushes each real row of `hidden` (the experts' outputs, in the dispatch's
 * receive layout) back to its source rank's slot (token, k slot); there out [tokens, hidden] (bf16) =
 * sum over k, in top-k order, in fp32, of weights[token, k] x the returned row. Its workspace
 * (symmetric) holds the returned rows [max_tokens x topk, hidden] and their arrival counters. */
typedef struct WeftMoeCombineParams {
  uint32_t size;    /* sizeof(WeftMoeCombineParams) */
  uint32_t version; /* 1 */
  uint64_t dispatch; /* the WeftMoeDispatchPlan* (or WeftMoeDispatchGemmPlan*) whose layout this combines */
  uint64_t hidden;   /* [capacity, hidden] bf16 on this rank */
  uint64_t weights;  /* [tokens, topk] f32 */
  uint64_t out;      /* [tokens, hidden] bf16 */
  int32_t ctas;      /* 0 = chosen by size */
  int32_t reserved;
  uint64_t workspace;
  uint64_t workspace_bytes;
  uint64_t stream;
} WeftMoeCombineParams;
#define WEFT_MOE_COMBINE_PARAMS_INIT {sizeof(WeftMoeCombineParams), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}

typedef struct WeftMoeCombineChoice {
  uint32_t size;    /* sizeof(WeftMoeCombineChoice) */
  uint32_t version; /* 1 */
  int32_t ctas;
  int32_t reserved;
  uint64_t workspace_bytes;
  uint64_t returned_offset; /* bf16 [max_tokens x topk, hidden]: row token x topk + k (a GEMM + combine
                             * at world 1: [capacity, hidden], the rows in the dispatch's layout) */
} WeftMoeCombineChoice;
#define WEFT_MOE_COMBINE_CHOICE_INIT {sizeof(WeftMoeCombineChoice), 1, 0, 0, 0, 0}

typedef struct WeftMoeCombinePlan WeftMoeCombinePlan;
WEFT_API int weft_moe_combine_choose(WeftComm* comm, const WeftMoeCombineParams* params,
                                     WeftMoeCombineChoice* out);
WEFT_API int weft_moe_combine_create(WeftComm* comm, const WeftMoeCombineParams* params,
                                     WeftMoeCombinePlan** out_plan);
WEFT_API int weft_moe_combine_launch(WeftMoeCombinePlan* plan, const WeftOpLaunch* launch);
WEFT_API int weft_moe_combine_destroy(WeftMoeCombinePlan* plan);
WEFT_API int weft_moe_combine_report(WeftMoeCombinePlan* plan, const uint64_t** out_words);

/* Grouped GEMM (one GPU): for every group g, out[offsets[g] .. offsets[g + 1]) = a[the same rows] ·
 * b[g], bf16 in, fp32 accumulate, bf16 out: torch._grouped_mm with row offsets. The offsets are read
 * on the device when the kernel runs (no host sync): groups may be empty, any size, in any pattern;
 * rows in no group (before offsets[0], from offsets[groups] on) are not written. Offsets that
 * decrease or leave [0, m] fail the launch with WEFT_GROUPED_FAIL_OFFSETS (the stage field says
 * where) and are clamped meanwhile, so nothing outside `out` is ever written.
 *   a    [m, k] bf16, row stride k          b  [groups, k, n] (or [groups, n, k] with WEFT_GEMM_B_NK)
 *   out  [m, n] bf16, row stride n           k and n multiples of 8 (16-byte rows, as TMA needs)
 * One persistent kernel of the GEMM engine (cuda/moe/grouped.cuh): 128 x tile_n tiles per (group,
 * tile), group by group. Stream-ordered; its completion is a WeftOpLaunch (or NULL: none). */
typedef struct WeftGroupedGemmParams {
  uint32_t size;    /* sizeof(WeftGroupedGemmParams) */
  uint32_t version; /* 2 */
  uint64_t a;
  uint64_t b;
  uint64_t offsets; /* int32 [groups + 1] on the device */
  uint64_t out;
  int64_t m, n, k;
  int32_t groups;   /* 1 .. 4096 */
  uint32_t flags;   /* WEFT_GEMM_B_NK */
  int32_t tile_n;   /* 0 = chosen, 128 or 256 */
  int32_t max_ctas; /* 0 = every SM */
  uint64_t stream;  /* cudaStream_t on the operands' device; 0 = legacy default stream */
} WeftGroupedGemmParams;
#define WEFT_GROUPED_GEMM_PARAMS_INIT {sizeof(WeftGroupedGemmParams), 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

typedef struct WeftGroupedGemmChoice {
  uint32_t size;    /* sizeof(WeftGroupedGemmChoice) */
  uint32_t version; /* 1 */
  int32_t tile_n;
  int32_t ctas;
  int32_t band;     /* tile rows per band of the tile order */
  int32_t stages;
} WeftGroupedGemmChoice;
#define WEFT_GROUPED_GEMM_CHOICE_INIT {sizeof(WeftGroupedGemmChoice), 1, 0, 0, 0, 0}
#define WEFT_GROUPED_FAIL_OFFSETS 3 /* a grouped GEMM's failure code (low 32 bits of the reason word) */

WEFT_API int weft_grouped_gemm(const WeftGroupedGemmParams* params, const WeftOpLaunch* launch);
WEFT_API int weft_grouped_gemm_choose(const WeftGroupedGemmParams* params, WeftGroupedGemmChoice* out);

/* The expert GEMM of a fused MoE op: a grouped GEMM over a dispatch's receive layout, one group per
 * local expert (rows expert_offsets[le] .. + expert_counts[le]; padding rows are never stored).
 *   dispatch + GEMM (weft_moe_dispatch_gemm_*): one persistent kernel per launch does the dispatch
 *     (routing, counts, layout, the rows routed to other ranks pushed into their receive buffers),
 *     then the up-projection: out [capacity, n] (the hidden rows, in the receive layout) =
 *     rows x w[le], tiles waiting (bounded) on the per-block arrival counters, the owner's own
 *     blocks first. w [E/W, K = hidden, n] (or [E/W, n, K] with WEFT_MOE_W_NK); with WEFT_MOE_SWIGLU
 *     w is gate | up [E/W, K, 2n] (or [E/W, 2n, K]) and out = silu(gate) x up, in fp32 before the
 *     one rounding. Mover PUSH (AUTO's pick with peers): every row is copied into the receive
 *     buffer first; PULL (AUTO's pick at world 1): the owner's own rows are read from its x by the
 *     GEMM's producer (cp.async by row index, no copy; bench/DECISIONS.md, "A gathered by cp.async
 *     is fenced by its consumers"). Either way the rows from other ranks are pushed by their senders.
 *   GEMM + combine (weft_moe_gemm_combine_*): the down-projection rows x w[le] (w [E/W, K, n], or
 *     [E/W, n, K] with WEFT_MOE_W_NK, n = the dispatch's hidden size, K = the combine's `hidden`
 *     width), whose epilogue stores each row straight into its source rank's returned-row slot
 *     (at world 1: in place, in the receive layout, by TMA), then on every rank out [tokens, hidden]
 *     = the weighted sum over its k slots in top-k order, in fp32 (a second, stream-ordered kernel). */
#define WEFT_MOE_W_NK 1u   /* WeftMoeExpertGemmParams.flags: weights are [E/W, N, K] */
#define WEFT_MOE_SWIGLU 2u /* dispatch + GEMM: gate | up weights, out = silu(gate) x up */
enum WeftMoeMover { WEFT_MOE_MOVER_AUTO = 0, WEFT_MOE_MOVER_PUSH = 1, WEFT_MOE_MOVER_PULL = 2 };

typedef struct WeftMoeExpertGemmParams {
  uint32_t size;    /* sizeof(WeftMoeExpertGemmParams) */
  uint32_t version; /* 1 */
  uint32_t flags;   /* WEFT_MOE_W_NK, WEFT_MOE_SWIGLU */
  int32_t n;        /* output columns, a multiple of 8: I (dispatch + GEMM) or the hidden size (GEMM + combine) */
  int32_t k;        /* input columns: 0 or the hidden size (dispatch + GEMM); I, a multiple of 8 (GEMM + combine) */
  int32_t mover;    /* dispatch + GEMM: WeftMoeMover */
  int32_t tile_n;   /* 0 = chosen, 128 or 256 columns of the math tile */
  int32_t ctas;     /* 0 = every SM of the rank's budget */
  uint64_t w;       /* weights, bf16, contiguous, 16-byte aligned */
  uint64_t out;     /* dispatch + GEMM: [capacity, n] bf16; GEMM + combine: 0 (the combine's out) */
} WeftMoeExpertGemmParams;
#define WEFT_MOE_EXPERT_GEMM_PARAMS_INIT {sizeof(WeftMoeExpertGemmParams), 1, 0, 0, 0, 0, 0, 0, 0, 0}

typedef struct WeftMoeExpertGemmChoice {
  uint32_t size;    /* sizeof(WeftMoeExpertGemmChoice) */
  uint32_t version; /* 1 */
  int32_t ctas;
  int32_t tile_n;
  int32_t mover;    /* WeftMoeMover (dispatch + GEMM), else 0 */
  int32_t stages;
} WeftMoeExpertGemmChoice;
#define WEFT_MOE_EXPERT_GEMM_CHOICE_INIT {sizeof(WeftMoeExpertGemmChoice), 1, 0, 0, 0, 0}

/* A dispatch + GEMM plan takes the dispatch's params (its workspace is the dispatch's: choose gives
 * its size) and is a layout for a combine or a GEMM + combine (their `dispatch` field). */
typedef struct WeftMoeDispatchGemmPlan WeftMoeDispatchGemmPlan;
WEFT_API int weft_moe_dispatch_gemm_choose(WeftComm* comm, const WeftMoeDispatchParams* dispatch,
                                           const WeftMoeExpertGemmParams* gemm, WeftMoeDispatchChoice* out_dispatch,
                                           WeftMoeExpertGemmChoice* out_gemm);
WEFT_API int weft_moe_dispatch_gemm_create(WeftComm* comm, const WeftMoeDispatchParams* dispatch,
                                           const WeftMoeExpertGemmParams* gemm, WeftMoeDispatchGemmPlan** out_plan);
WEFT_API int weft_moe_dispatch_gemm_launch(WeftMoeDispatchGemmPlan* plan, const WeftOpLaunch* launch);
WEFT_API int weft_moe_dispatch_gemm_destroy(WeftMoeDispatchGemmPlan* plan);
WEFT_API int weft_moe_dispatch_gemm_report(WeftMoeDispatchGemmPlan* plan, const uint64_t** out_words);

/* A GEMM + combine plan takes the combine's params (`hidden` is the GEMM's input [capacity, k]) and
 * the GEMM's; its workspace is the combine's (choose gives its size). */
typedef struct WeftMoeGemmCombinePlan WeftMoeGemmCombinePlan;
WEFT_API int weft_moe_gemm_combine_choose(WeftComm* comm, const WeftMoeCombineParams* combine,
                                          const WeftMoeExpertGemmParams* gemm, WeftMoeCombineChoice* out_combine,
                                          WeftMoeExpertGemmChoice* out_gemm);
WEFT_API int weft_moe_gemm_combine_create(WeftComm* comm, const WeftMoeCombineParams* combine,
                                          const WeftMoeExpertGemmParams* gemm, WeftMoeGemmCombinePlan** out_plan);
WEFT_API int weft_moe_gemm_combine_launch(WeftMoeGemmCombinePlan* plan, const WeftOpLaunch* launch);
WEFT_API int weft_moe_gemm_combine_destroy(WeftMoeGemmCombinePlan* plan);
WEFT_API int weft_moe_gemm_combine_report(WeftMoeGemmCombinePlan* plan, const uint64_t** out_words);

/* A failed MoE launch's reason word: code in bits 0..31 (WeftMoeFailure), stage (WeftMoeStage) in
 * 32..39, field (WeftMoeField) in 40..47, peer rank in 48..63. Report words (…_report): [0] the
 * plan's launch count at the failure, then per code: CAPACITY [1] rows the owner (the peer field)
 * needed, [2] the capacity; BAD_EXPERT [1] the item (token x topk + k slot), [2] the id. */
enum WeftMoeFailure {
  WEFT_MOE_FAIL_TIMEOUT = 1,         /* a wait for a peer ran out (the stage says which) */
  WEFT_MOE_FAIL_ABORTED = 2,         /* another rank failed this launch and told everyone to stop */
  WEFT_MOE_FAIL_MISMATCH = 3,        /* the peer's plan differs (the field says in what) */
  WEFT_MOE_FAIL_BAD_EXPERT = 4,      /* this rank's routing holds an id outside [0, E) */
  WEFT_MOE_FAIL_PEER_BAD_EXPERT = 5, /* the peer's routing does */
  WEFT_MOE_FAIL_CAPACITY = 6,        /* the peer (owner) needs more receive rows than the capacity */
  WEFT_MOE_FAIL_NO_LAYOUT = 7        /* combine: the layout's latest dispatch failed or never ran */
};
enum WeftMoeStage {
  WEFT_MOE_STAGE_ENTRY = 1,    /* dispatch: waiting for a peer's counts */
  WEFT_MOE_STAGE_LAYOUT = 2,   /* dispatch: checking the counts and the capacity */
  WEFT_MOE_STAGE_ARRIVALS = 3, /* dispatch: waiting for the rows routed here */
  WEFT_MOE_STAGE_BARRIER = 4,  /* a grid barrier of this rank's kernel */
  WEFT_MOE_STAGE_READY = 5,    /* combine: waiting for a source rank to start its combine */
  WEFT_MOE_STAGE_RETURN = 6    /* combine: waiting for this rank's rows to come back */
};
enum WeftMoeField {
  WEFT_MOE_FIELD_EXPERTS = 1, WEFT_MOE_FIELD_TOPK = 2, WEFT_MOE_FIELD_HIDDEN = 3,
  WEFT_MOE_FIELD_WORLD = 4, WEFT_MOE_FIELD_CAPACITY = 5, WEFT_MOE_FIELD_MAX_TOKENS = 6,
  WEFT_MOE_FIELD_EPOCH = 7
};

/* CUDA graphs (the MoE plans' capture test; any stream-ordered work): capture what is enqueued on
 * `stream` between begin and end (thread-local mode) into an executable graph. */
WEFT_API int weft_graph_capture_begin(void* stream);
WEFT_API int weft_graph_capture_end(void* stream, void** out_graph_exec);
WEFT_API int weft_graph_launch(void* graph_exec, void* stream);
WEFT_API int weft_graph_destroy(void* graph_exec);

/* Test support: deliberately simple references for the MoE pieces (one thread per token, plain
 * loops, fp32), each stream-ordered. */
/* The routing above, one thread per token, serial loops. */
WEFT_API int weft_moe_reference_route(const void* logits, int32_t logits_dtype, int64_t tokens,
                                      int32_t experts, int32_t topk, int32_t normalize, int32_t* ids,
                                      float* weights, void* stream);
/* out[i] = src[index[i]] (bf16 rows of `cols`); index outside [0, src_rows) gives a NaN row. */
WEFT_API int weft_moe_reference_gather(const void* src, int64_t src_rows, int64_t cols, const int32_t* index,
                                       int64_t rows, void* out, void* stream);
/* out[t] (f32) = sum over j < topk, in order, of weights[t, j] x rows[index[t, j]] (rows bf16 or f32
 * by rows_dtype); an index outside [0, nrows) gives NaN. */
WEFT_API int weft_moe_reference_combine(const void* rows, int32_t rows_dtype, int64_t nrows, int64_t hidden,
                                        const int32_t* index, const float* weights, int64_t tokens,
                                        int32_t topk, float* out, void* stream);
/* c[c_index[i]] (f32, row stride ldc) = a[a_index[i]] (bf16 or f32, stride lda) x op(b) for i < m,
 * b as in weft_reference_gemm (b_nk = 1: [n, k]); a null index is the identity. */
WEFT_API int weft_moe_reference_rows_gemm(const void* a, int32_t a_dtype, int64_t lda, const int32_t* a_index,
                                          const void* b, int64_t ldb, int32_t b_nk, float* c, int64_t ldc,
                                          const int32_t* c_index, int64_t m, int64_t n, int64_t k,
                                          void* stream);
/* out [rows, inter] (bf16 or f32 by out_dtype) = silu(h[:, :inter]) x h[:, inter:] of h [rows, 2 inter]
 * (bf16 or f32 by h_dtype): SwiGLU with the gate first. */
WEFT_API int weft_moe_reference_swiglu(const void* h, int32_t h_dtype, int64_t rows, int64_t inter, void* out,
                                       int32_t out_dtype, void* stream);
/* ---- decoder layers (nn) --------------------------------------------------------------------- */

/* The small, memory-bound layers a transformer decoder runs between its GEMMs (cuda/nn/). One GPU,
 * one kernel per call, stream-ordered on `stream` (a cudaStream_t on the tensors' device; 0 = the
 * legacy default stream); the call returns after the launch. Tensors are row-major and contiguous,
 * bf16 unless a field says otherwise, on one device; every address is 16-byte aligned and every
 * row length (dim, width, head_dim) a multiple of 8 elements, so the kernels move 16-byte vectors.
 * Integer side inputs (ids, positions, slots) are int32 arrays in device memory, one per row: a
 * continuous batch changes them from step to step without touching the kernels' parameters. */

/* out[r, :] = table[ids[r], :]. An id outside [0, vocab) gives a row of NaN (never a wild read). */
typedef struct WeftEmbeddingParams {
  uint32_t size;    /* sizeof(WeftEmbeddingParams) */
  uint32_t version; /* 1 */
  uint64_t table;   /* [vocab, dim] */
  uint64_t ids;     /* int32 [rows] */
  uint64_t out;     /* [rows, dim] */
  int64_t rows, vocab, dim;
  uint64_t stream;
} WeftEmbeddingParams;
#define WEFT_EMBEDDING_PARAMS_INIT {sizeof(WeftEmbeddingParams), 1, 0, 0, 0, 0, 0, 0, 0}

/* RMSNorm, fp32 inside: out = x / sqrt(mean(x^2) + eps) * weight, row by row. With `residual` set,
 * first residual = residual + x (rounded to bf16, stored back) and the norm is of that sum: the
 * pre-norm block's "add, then normalize" in one pass. out may alias x (not residual). */
typedef struct WeftRmsNormParams {
  uint32_t size;     /* sizeof(WeftRmsNormParams) */
  uint32_t version;  /* 1 */
  uint64_t x;        /* [rows, dim] */
  uint64_t residual; /* [rows, dim], read and written; 0 = no residual add */
  uint64_t weight;   /* [dim] */
  uint64_t out;      /* [rows, dim] */
  int64_t rows, dim;
  float eps;         /* > 0 */
  uint32_t reserved; /* 0 */
  uint64_t stream;
} WeftRmsNormParams;
#define WEFT_RMS_NORM_PARAMS_INIT {sizeof(WeftRmsNormParams), 1, 0, 0, 0, 0, 0, 0, 1e-5f, 0, 0}

/* Rotary position embedding, in place, rotate-half (Llama / GPT-NeoX) convention: in each head,
 * element i < head_dim/2 pairs with i + head_dim/2 and both turn by angle pos * theta^(-2i/head_dim),
 * pos = positions[r]. Row r's heads start at x + r * row_stride (elements): with q, k and v packed
 * in one row, pass the q and k heads as `heads` and leave v alone. */
typedef struct WeftRopeParams {
  uint32_t size;      /* sizeof(WeftRopeParams) */
  uint32_t version;   /* 1 */
  uint64_t x;         /* rows of `heads` x head_dim elements, row_stride apart */
  uint64_t positions; /* int32 [rows], >= 0 */
  int64_t rows, heads, head_dim, row_stride;
  float theta;        /* base, > 1 (10000 for Llama 2, 500000 for Llama 3) */
  uint32_t reserved;  /* 0 */
  uint64_t stream;
} WeftRopeParams;
#define WEFT_ROPE_PARAMS_INIT {sizeof(WeftRopeParams), 1, 0, 0, 0, 0, 0, 0, 10000.0f, 0, 0}

/* SwiGLU: out[r, j] = silu(x[r, j]) * x[r, dim + j]: x holds the gate projection's dim columns, then
 * the up projection's (one GEMM with the two weights stacked). fp32 inside. */
typedef struct WeftSwigluParams {
  uint32_t size;    /* sizeof(WeftSwigluParams) */
  uint32_t version; /* 1 */
  uint64_t x;       /* [rows, 2 * dim] */
  uint64_t out;     /* [rows, dim] */
  int64_t rows, dim;
  uint64_t stream;
} WeftSwigluParams;
#define WEFT_SWIGLU_PARAMS_INIT {sizeof(WeftSwigluParams), 1, 0, 0, 0, 0, 0}

/* A slotted KV cache: k_cache and v_cache are [slots, max_seq, width] (width = kv heads x head_dim);
 * a sequence owns one slot and its token at position p lives at row p of it. */

/* Writes this step's keys and values into the cache: row r's k (k + r * src_stride) and v go to
 * slot slots[r], position positions[r]. Rows with slot < 0 (padding) are skipped, and so are rows
 * whose slot or position is out of range (weft_nn_cache_attention then reports them as NaN). */
typedef struct WeftKvAppendParams {
  uint32_t size;      /* sizeof(WeftKvAppendParams) */
  uint32_t version;   /* 1 */
  uint64_t k, v;      /* rows of width elements, src_stride apart (e.g. inside a packed qkv row) */
  uint64_t k_cache, v_cache;
  uint64_t slot_ids;  /* int32 [rows] */
  uint64_t positions; /* int32 [rows] */
  int64_t rows, width, src_stride, slots, max_seq;
  uint64_t stream;
} WeftKvAppendParams;
#define WEFT_KV_APPEND_PARAMS_INIT {sizeof(WeftKvAppendParams), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/* Attention of each query row over its own slot of the cache, causal: row r (heads x head_dim
 * elements at q + r * q_stride) attends to positions 0 ..= positions[r] of slot slot_ids[r], so one
 * call serves prefill (a prompt's rows, keys appended first) and decode (one row per sequence, the
 * query shorter than the keys). Grouped-query: q head h reads kv head h / (heads / kv_heads).
 * out row r: heads x head_dim at out + r * out_stride; a row with slot < 0 gets zeros, one with an
 * out-of-range slot or position NaN. fp32 softmax; simple on purpose (one CTA per row and head),
 * the reference the attention engine is checked against. head_dim <= 256. */
typedef struct WeftCacheAttentionParams {
  uint32_t size;      /* sizeof(WeftCacheAttentionParams) */
  uint32_t version;   /* 1 */
  uint64_t q;
  uint64_t k_cache, v_cache;
  uint64_t slot_ids;  /* int32 [rows] */
  uint64_t positions; /* int32 [rows] */
  uint64_t out;
  int64_t rows, heads, kv_heads, head_dim, q_stride, out_stride, slots, max_seq;
  float scale;        /* softmax scale, > 0 (usually 1 / sqrt(head_dim)) */
  uint32_t reserved;  /* 0 */
  uint64_t stream;
} WeftCacheAttentionParams;
#define WEFT_CACHE_ATTENTION_PARAMS_INIT \
  {sizeof(WeftCacheAttentionParams), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0}

/* Sampling, one CTA per row, on the GPU. Row r's logits (bf16 or f32, vocab of them, row_stride
 * apart) with that row's settings: temperature 0 = greedy (the lowest index among the maxima);
 * otherwise softmax(logits / temperature) restricted to the top_k largest logits (0 = all) and then
 * to the smallest set of largest logits whose probability reaches top_p (1 = all; ties at either
 * cut are kept), sampled by inverse CDF in index order with u in [0, 1) from a counter-based hash
 * of (seed[r], counter[r]): the same seed and counter give the same token on every run and in any
 * batch. tokens[r] gets the token, logprobs[r] (optional) its log-probability under
 * softmax(logits). The settings arrays and the outputs may be device or host-mapped memory. The
 * launch's completion (a WeftOpLaunch, or NULL: none) is published when every row is written. */
typedef struct WeftSampleParams {
  uint32_t size;    /* sizeof(WeftSampleParams) */
  uint32_t version; /* 2 */
  uint64_t logits;
  int32_t dtype;    /* WEFT_BF16 or WEFT_F32 */
  int32_t reserved; /* 0 */
  int64_t rows, vocab, row_stride;
  uint64_t temperature; /* float [rows], >= 0 */
  uint64_t top_k;       /* int32 [rows], 0 = off */
  uint64_t top_p;       /* float [rows], in (0, 1] */
  uint64_t seed;        /* uint64 [rows] */
  uint64_t counter;     /* uint64 [rows]: e.g. the position of the token being drawn */
  uint64_t tokens;      /* int32 [rows], out */
  uint64_t logprobs;    /* float [rows], out; 0 = not wanted */
  uint64_t stream;
} WeftSampleParams;
#define WEFT_SAMPLE_PARAMS_INIT {sizeof(WeftSampleParams), 2, 0, WEFT_BF16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

WEFT_API int weft_nn_embedding(const WeftEmbeddingParams* params);
WEFT_API int weft_nn_rms_norm(const WeftRmsNormParams* params);
WEFT_API int weft_nn_rope(const WeftRopeParams* params);
WEFT_API int weft_nn_swiglu(const WeftSwigluParams* params);
WEFT_API int weft_nn_kv_append(const WeftKvAppendParams* params);
WEFT_API int weft_nn_cache_attention(const WeftCacheAttentionParams* params);
WEFT_API int weft_nn_sample(const WeftSampleParams* params, const WeftOpLaunch* launch);

/* ---- attention -------------------------------------------------------------------------------- */

/* out = softmax(q·kᵀ·scale)·v per sequence and query head: a flash-attention forward on one device
 * (bf16 in and out, fp32 scores, softmax and accumulation; one persistent kernel). Row-major,
 * contiguous, one row per token:
 *   bshd (cu_seqlens_q == 0): q, out [batch, seqlen_q, heads, head_dim]; k, v [batch, seqlen_k,
 *     kv_heads, head_dim]; lse [batch, heads, seqlen_q]
 *   varlen (packed batch): q, out [total_q, heads, head_dim]; k, v [total_k, kv_heads, head_dim];
 *     sequence b is rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of q (int32 device arrays of batch + 1
 *     non-decreasing offsets, cu[0] = 0, cu[batch] = total; cu_seqlens_k for the keys, 0 = the same
 *     array); seqlen_q, seqlen_k: the longest sequence (maxSeqlen: no sequence may be longer);
 *     lse [heads, total_q]
 *   varlen with seqused_k (FlashAttention's seqused_k; a KV cache read in place): sequence b's keys
 *     are rows [cu_seqlens_k[b], cu_seqlens_k[b] + seqused_k[b]) of k and v: cu_seqlens_k holds
 *     each sequence's first key row, in any order (runs may be apart, e.g. one slot of a cache
 *     each; its last entry is not read). seqused_k[b] = 0: no keys (out 0, lse -inf). The key
 *     block with a sequence's last key is read whole (128 rows from a multiple of 128 past its
 *     first row, the scores past its keys masked): rows of k and v there must be finite too.
 * heads % kv_heads == 0 (GQA, MQA: query head h reads kv head h / (heads / kv_heads)); head_dim 64 or
 * 128. WEFT_ATTENTION_CAUSAL: query i of a sequence with len_q queries and len_k keys sees key j when
 * j <= i + len_k - len_q (bottom-right aligned; the usual mask when len_q == len_k); a query that
 * sees no key gets out = 0 and lse = -inf. scale: 0 = 1 / sqrt(head_dim). lse (optional, fp32):
 * ln Σ_j exp(q·k_j·scale). Stream-ordered; its completion is a WeftOpLaunch (or NULL: none). */
#define WEFT_ATTENTION_CAUSAL 1u

/* A failed launch of the attention engine (one GPU or the ring): the reason word's code and stage. A
 * ring launch stopped by weft_comm_abort or by a peer that gave up reports WEFT_E_PEER at
 * WEFT_STAGE_ABORTED instead, with a WeftAbortSource field and the rank (as the fused TP ops do). */
enum WeftAttentionFailure {
  WEFT_ATTENTION_FAIL_BARRIER_TIMEOUT = 1, /* a shared-memory pipeline barrier wait ran out */
  WEFT_ATTENTION_FAIL_PEER_WAIT = 2,       /* ring: a wait for a peer's keys or signal ran out */
  WEFT_ATTENTION_FAIL_SEQLENS = 3          /* varlen offsets or seqused_k out of range (skipped) */
};
enum WeftAttentionStage {
  WEFT_ATTENTION_STAGE_PRODUCER = 1, /* the producer (or, ring, the launch's entry and the movers) */
  WEFT_ATTENTION_STAGE_CONSUMER = 2,
  WEFT_ATTENTION_STAGE_FINISH = 3    /* ring: waiting for the peers to have copied this rank's shard */
};

typedef struct WeftAttentionParams {
  uint32_t size;    /* sizeof(WeftAttentionParams) */
  uint32_t version; /* 3 */
  uint64_t q, k, v, out; /* device addresses, 16-byte aligned */
  uint64_t lse;          /* fp32, 4-byte aligned; 0 = not written */
  uint64_t cu_seqlens_q; /* varlen: int32 [batch + 1] on the device; 0 = bshd */
  uint64_t cu_seqlens_k; /* varlen: the keys' offsets; 0 = cu_seqlens_q */
  int32_t batch, heads, kv_heads, head_dim;
  int32_t seqlen_q, seqlen_k; /* bshd: every sequence's; varlen: the longest */
  int64_t total_q, total_k;   /* varlen: rows of q / out and of k / v (cu[batch]); bshd: ignored */
  uint32_t flags;             /* WEFT_ATTENTION_CAUSAL */
  float scale;                /* > 0, or 0 = 1 / sqrt(head_dim) */
  int32_t max_ctas;           /* cap on the persistent grid; 0 = one CTA per SM */
  int32_t reserved;           /* 0 */
  uint64_t stream;            /* cudaStream_t on the tensors' device; 0 = legacy default stream */
  uint64_t seqused_k;         /* varlen, optional: int32 [batch] on the device, each sequence's keys
                                 from its cu_seqlens_k entry (above); 0 = cu_seqlens_k's differences */
} WeftAttentionParams;
#define WEFT_ATTENTION_PARAMS_INIT \
  {sizeof(WeftAttentionParams), 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0, 0, 0, 0}

/* The configuration a call with these params runs. */
typedef struct WeftAttentionChoice {
  uint32_t size;    /* sizeof(WeftAttentionChoice) */
  uint32_t version; /* 1 */
  int32_t block_m;  /* queries per tile */
  int32_t block_n;  /* keys per block */
  int32_t stages;   /* K and V shared-memory ring depth */
  int32_t ctas;     /* persistent grid */
  int32_t tiles;    /* query tiles (batch x heads x ceil(seqlen_q / block_m)) */
  int32_t section;  /* (sequence, head) pairs per L2 section of the tile order */
} WeftAttentionChoice;
#define WEFT_ATTENTION_CHOICE_INIT {sizeof(WeftAttentionChoice), 1, 0, 0, 0, 0, 0, 0}

WEFT_API int weft_attention(const WeftAttentionParams* params, const WeftOpLaunch* launch);
/* Validates params as weft_attention does and reports the configuration, launching nothing. */
WEFT_API int weft_attention_choose(const WeftAttentionParams* params, WeftAttentionChoice* out);
/* Test support: the same attention by a deliberately simple fp32 kernel (one warp per query, two
 * passes, CUDA cores): out_f32 [rows of q, heads * head_dim] fp32, lse_f32 (optional) laid out as
 * params->lse would be. params->out, lse and max_ctas are ignored. */
WEFT_API int weft_reference_attention(const WeftAttentionParams* params, uint64_t out_f32, uint64_t lse_f32);

/* Fused ring attention over a communicator's ranks (sequence parallelism): one persistent kernel
 * per rank per launch computes attention of this rank's shard of the queries over every rank's keys;
 * each query tile keeps its softmax state in registers across every rank's key blocks (this rank's
 * first, then each peer's as it lands), so there is no merge step. S tokens are cut into chunks
 * (weft_ring_chunks): WEFT_RING_ZIGZAG: 2W chunks, rank r holds chunks r and 2W - 1 - r (balanced
 * causal work); WEFT_RING_CONTIGUOUS: W chunks, rank r holds chunk r. A rank's shard is its chunks in
 * that order, shard_r tokens per sequence:
 *   q, out [batch, shard_r, heads, head_dim]; k, v [batch, kv_rows, kv_heads, head_dim] in the
 *   communicator's symmetric heap (first shard_r rows of each sequence used); lse [batch, heads, shard_r]
 * Causal masks compare global positions. Peers' K and V come over NVLink by the copy engines into a
 * receive buffer of `slots` kv-head groups (memory_bytes bounds it: 0 = two shards' worth of K and V;
 * enough for every peer's shard = an all-gather, nothing waits for slot reuse).
 * Creation is collective: weft_ring_attention_choose -> workspace (symmetric, workspace_bytes, the
 * same on every rank) -> weft_ring_attention_plan_create on every rank (zeroes the workspace and
 * publishes this rank's k, v offsets on `stream`) -> a barrier on that stream -> once it completed,
 * weft_ring_attention_plan_connect on every rank -> launches (every rank the same launches in the
 * same order; each takes the next epoch). At world 1 (with kv_rows == seqlen, or batch 1) a launch is
 * the one-GPU kernel's (weft_attention's). */
#define WEFT_RING_ZIGZAG 0
#define WEFT_RING_CONTIGUOUS 1
/* Who copies the peers' K and V: the copy engines (2-D copies on side streams; no SM taken), or
 * comm_ctas CTAs of the kernel itself (16-byte loads from the peers over NVLink). AUTO: the cost
 * model (ffi/src/attention/ring_layout.cpp). */
enum WeftRingMover { WEFT_RING_MOVER_AUTO = 0, WEFT_RING_MOVER_COPY_ENGINE = 1, WEFT_RING_MOVER_CTAS = 2 };

typedef struct WeftRingAttentionParams {
  uint32_t size;    /* sizeof(WeftRingAttentionParams) */
  uint32_t version; /* 1 */
  uint64_t q, k, v, out, lse; /* this rank's shard (see above); lse optional */
  int32_t batch, heads, kv_heads, head_dim;
  int32_t seqlen;    /* S: the whole sequence's tokens */
  int32_t kv_rows;   /* rows per sequence of k and v (>= this rank's shard; the rest unused): k and v are
                        symmetric, so every rank allocates them alike, e.g. [batch, the largest shard,
                        kv_heads, head_dim] when the shards differ */
  int32_t comm_ctas; /* WEFT_RING_MOVER_CTAS: CTAs that copy (0 = 4); else 0 */
  int32_t layout;    /* WEFT_RING_ZIGZAG or WEFT_RING_CONTIGUOUS */
  uint32_t flags;    /* WEFT_ATTENTION_CAUSAL */
  float scale;       /* 0 = 1 / sqrt(head_dim) */
  int32_t mover;     /* WeftRingMover */
  int32_t group_heads; /* kv heads per receive group; 0 = chosen */
  uint64_t memory_bytes; /* receive-buffer budget; 0 = two shards of K and V */
  uint64_t workspace;       /* symmetric device address (plan_create) */
  uint64_t workspace_bytes; /* at least WeftRingAttentionChoice.workspace_bytes */
  uint64_t stream;          /* cudaStream_t on this rank's device */
} WeftRingAttentionParams;
#define WEFT_RING_ATTENTION_PARAMS_INIT \
  {sizeof(WeftRingAttentionParams), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, WEFT_RING_ZIGZAG, 0, 0.0f, WEFT_RING_MOVER_AUTO, 0, 0, 0, 0, 0}

typedef struct WeftRingAttentionChoice {
  uint32_t size;    /* sizeof(WeftRingAttentionChoice) */
  uint32_t version; /* 1 */
  int32_t mover;    /* WeftRingMover chosen (AUTO: none, world 1) */
  int32_t comm_ctas; /* CTAs that copy (WEFT_RING_MOVER_CTAS), else 0 */
  int32_t reserved;
  int32_t group_heads;
  int32_t groups;
  int32_t slots;    /* receive slots (== groups: all-gather, no slot reuse) */
  int32_t ctas;
  int32_t shard;    /* this rank's tokens per sequence */
  uint64_t workspace_bytes;
  uint64_t receive_bytes;
  double predicted_us; /* the cost model's estimate of one launch (0: none) */
} WeftRingAttentionChoice;
#define WEFT_RING_ATTENTION_CHOICE_INIT {sizeof(WeftRingAttentionChoice), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0}

typedef struct WeftRingAttentionPlan WeftRingAttentionPlan;
/* starts (chunks + 1 int32): the first token of every chunk and S; out_chunks: 2W or W. Fails when
 * S is too short to give every chunk a 128-token block (S <= 128 (chunks - 1)). */
WEFT_API int weft_ring_chunks(int32_t seqlen, int32_t world, int32_t layout, int32_t* starts, int32_t* out_chunks);
WEFT_API int weft_ring_attention_choose(WeftComm* comm, const WeftRingAttentionParams* params,
                                        WeftRingAttentionChoice* out);
WEFT_API int weft_ring_attention_plan_create(WeftComm* comm, const WeftRingAttentionParams* params,
                                             WeftRingAttentionPlan** out_plan);
WEFT_API int weft_ring_attention_plan_connect(WeftRingAttentionPlan* plan);
WEFT_API int weft_ring_attention_plan_launch(WeftRingAttentionPlan* plan, const WeftOpLaunch* launch);
/* Several plans of this process (one per rank of a one-process group): every kernel first, then
 * every plan's copy-engine work. */
WEFT_API int weft_ring_attention_plans_launch(WeftRingAttentionPlan* const* plans, const WeftOpLaunch* launches,
                                              int32_t count);
WEFT_API int weft_ring_attention_plan_destroy(WeftRingAttentionPlan* plan);
/* Test support: the attention kernel's tiles and key blocks for a described launch, listed on the
 * host by the kernel's own tile decode and key walk (no GPU needed). config: 21 int32 {batch, heads,
 * kv_heads, head_dim, seqlen_q, seqlen_k, causal, section, total_q, total_k, world (0: one GPU),
 * rank, layout, group_heads, kv_rows, memory KiB, replay CTAs (0: none), the CTAs the replayed
 * counter's limit assumes (0: the same), of the replay's CTAs how many start late (movers), and
 * when (in blocks), the ring rank's L2 share in KiB (sizes its tile order's bands)}; cu_q / cu_k /
 * used_k: host int32 offsets and key counts (varlen, as WeftAttentionParams' cu_seqlens_q,
 * cu_seqlens_k, seqused_k) or NULL. out: 18 int32
 * per block, then a replay's trailer row (cuda/attention/attention.h, kWalkFields); *out_rows: the
 * count. */
WEFT_API int weft_testing_attention_walk(const int32_t* config, const int32_t* cu_q, const int32_t* cu_k,
                                         const int32_t* used_k, int32_t* out, int64_t capacity, int64_t* out_rows);

/* ---- baselines for benchmarks (dlopen'ed cuBLASLt, NCCL) ------------------------------------- */

/* 1 when libcublasLt.so.13 (or libcublasLt.so) could be loaded, else 0 (not an error); out_path
 * (optional) receives the file that was loaded, or the reason it was not. */
WEFT_API int weft_cublaslt_available(int32_t* out_available, const char** out_path);
/* The same GEMM as weft_gemm, computed by cuBLASLt (heuristic algorithm, 32 MiB workspace per
 * device). Honours a, b, c, m, n, k, lda, ldb, ldc, flags and stream; ignores the override fields. WEFT_E_UNSUPPORTED when cuBLASLt is missing. */
WEFT_API int weft_cublaslt_gemm(const WeftGemmParams* params);

/* NCCL (libnccl.so.2, dlopen'ed on first use): one communicator per local device in one process
 * (ncclCommInitAll), each collective issued for every device inside one group call. */
typedef struct WeftNccl WeftNccl;
/* out_version: NCCL's version code (e.g. 22803), 0 when libnccl.so.2 is not present. */
WEFT_API int weft_nccl_version(int32_t* out_version);
WEFT_API int weft_nccl_create(int32_t ndev, const int32_t* devices, WeftNccl** out);
WEFT_API int weft_nccl_destroy(WeftNccl* nccl);

typedef struct WeftNcclParams {
  uint32_t size;
  uint32_t version;
  int32_t kind;  /* WeftCollectiveKind (not BARRIER) */
  int32_t dtype; /* WeftDtype */
  uint64_t count;   /* as in WeftCollectiveParams; all-to-all: elements per peer */
  uint64_t inputs;  /* host address of ndev device addresses */
  uint64_t outputs; /* host address of ndev device addresses */
  uint64_t streams; /* host address of ndev cudaStream_t */
  int32_t root;
  int32_t reserved;
} WeftNcclParams;
#define WEFT_NCCL_PARAMS_INIT {sizeof(WeftNcclParams), 1, 0, 0, 0, 0, 0, 0, 0, 0}
WEFT_API int weft_nccl_collective(WeftNccl* nccl, const WeftNcclParams* params);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_H */
