// errors.ts — every failure weft reports is a WeftError: a stable `code`, the operation that
// failed, and (when it came from native code) the native message with its file:line.

/** Status codes of weft.h, by name. */
export const Status = {
  OK: 0,
  E_INVALID: -1,
  E_CUDA: -2,
  E_NO_DEVICE: -3,
  E_OOM: -4,
  E_TIMEOUT: -5,
  E_PEER: -6,
  E_UNSUPPORTED: -7,
  E_TRANSPORT: -8,
  E_INTERNAL: -9,
} as const;

export type ErrorCode =
  | keyof typeof Status
  | "E_LIBRARY_MISSING"
  | "E_LIBRARY_LOAD"
  | "E_ABI_MISMATCH"
  | "E_DISPOSED";

export interface WeftErrorInit {
  code: ErrorCode;
  /** The call or operation that failed, e.g. "Tensor.upload" or "weft_malloc". */
  op: string;
  /** The native library's message (weft_last_error), when the failure came from native code. */
  nativeMessage?: string;
  cause?: unknown;
}

export class WeftError extends Error {
  readonly code: ErrorCode;
  readonly op: string;
  readonly nativeMessage?: string;

  constructor(message: string, init: WeftErrorInit) {
    super(`${init.op}: ${message}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.code = init.code;
    this.op = init.op;
    this.nativeMessage = init.nativeMessage;
  }
}

/** An argument broke a documented rule. The message names the argument and the rule. */
export class ArgumentError extends WeftError {
  readonly argument: string;
  constructor(op: string, argument: string, rule: string) {
    super(`argument '${argument}' ${rule}`, { code: "E_INVALID", op });
    this.argument = argument;
  }
}

/** A resource was used after dispose(). */
export class DisposedError extends WeftError {
  constructor(op: string, what: string) {
    super(`${what} was used after dispose()`, { code: "E_DISPOSED", op });
  }
}

/** libweft.so is missing, would not load, or has the wrong ABI version. */
export class LibraryError extends WeftError {}
/** The CUDA runtime or driver failed. */
export class CudaError extends WeftError {}
/** No GPU or no driver (a device index past the GPUs there are is an ArgumentError), or a native
 * call that found its device gone. */
export class DeviceError extends WeftError {
  /** The argument that asked for a device, when the error is about one ("device", "devices[1]"). */
  readonly argument?: string;
  constructor(message: string, init: WeftErrorInit & { argument?: string }) {
    super(message, init);
    this.argument = init.argument;
  }
}
/** A device or pinned-host allocation failed. */
export class OutOfMemoryError extends WeftError {}
/** A bounded wait ran out: a GPU spin, the bootstrap store, the proxy. */
export class TimeoutError extends WeftError {}
/** A peer rank is gone or reported failure. */
export class PeerError extends WeftError {}
/** A valid request that this build or machine cannot serve. */
export class UnsupportedError extends WeftError {}
/** The inter-node transport failed. */
export class TransportError extends WeftError {}

const byStatus = new Map<number, [keyof typeof Status, typeof WeftError]>([
  [Status.E_INVALID, ["E_INVALID", WeftError]],
  [Status.E_CUDA, ["E_CUDA", CudaError]],
  [Status.E_NO_DEVICE, ["E_NO_DEVICE", DeviceError]],
  [Status.E_OOM, ["E_OOM", OutOfMemoryError]],
  [Status.E_TIMEOUT, ["E_TIMEOUT", TimeoutError]],
  [Status.E_PEER, ["E_PEER", PeerError]],
  [Status.E_UNSUPPORTED, ["E_UNSUPPORTED", UnsupportedError]],
  [Status.E_TRANSPORT, ["E_TRANSPORT", TransportError]],
  [Status.E_INTERNAL, ["E_INTERNAL", WeftError]],
]);

/** Maps a native status and weft_last_error() text to the matching WeftError subclass. */
/** v as an integer in [min, max], or an ArgumentError naming the argument and the range. */
export function checkInt(op: string, name: string, v: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    throw new ArgumentError(op, name, `must be an integer in [${min}, ${max}] (got ${JSON.stringify(v)})`);
  }
  return v;
}

export function errorFromStatus(status: number, op: string, nativeMessage: string): WeftError {
  const [code, Cls] = byStatus.get(status) ?? (["E_INTERNAL", WeftError] as const);
  const text = nativeMessage || `failed with status ${status} and no message`;
  return new Cls(text, { code, op, nativeMessage });
}
