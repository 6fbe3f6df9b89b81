// weft — fused communication + compute on many GPUs, from Bun.
export { DTYPES, bf16ToF32, f16ToF32, f32ToBf16, f32ToF16, type DType, type RawArray } from "./dtype.ts";
export {
  ArgumentError, CudaError, DeviceError, DisposedError, LibraryError, OutOfMemoryError, PeerError,
  Status, TimeoutError, TransportError, UnsupportedError, WeftError, type ErrorCode,
} from "./errors.ts";
export { deviceCount, deviceInfo, devices, enablePeerAccess, topology, type DeviceInfo, type PeerLink, type Topology } from "./device.ts";
export { Tensor, type Shape, type TensorData, type TensorOptions } from "./tensor.ts";
export { Stream, Event } from "./stream.ts";
export { runtimeInfo, formatInfo, fabricProviders, type RuntimeInfo } from "./info.ts";
// communicator, symmetric heap, collectives (issue 3)

// GEMM engine (issue 4)

// inter-node: command FIFO, proxy, transport (issue 6)
export {
  HostBuffer, Opcode, Proxy, Region, Transport, transportCounters,
  type Command as ProxyCommand, type Exchange, type ProxyOptions, type ProxyStats, type PutCommand, type SignalTarget,
  type TransportInfo, type TransportOptions,
} from "./transport.ts";
