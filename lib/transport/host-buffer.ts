// host-buffer.ts — pinned host memory that a NIC and (when there is one) every GPU can reach,
// viewed zero-copy from JS.
//
// The view is the one hazard: a Uint8Array over native memory outlives the memory unless something
// stops it. dispose() detaches the view's ArrayBuffer (lib/native.ts detachNative) before freeing,
// so every typed array a caller made over it (view, view.subarray(), new BigUint64Array(view.buffer))
// reads as length 0 afterwards: no crash, no freed memory. Views are made only here, one
// ArrayBuffer per buffer, so detaching it reaches all of them. Where a runtime cannot detach such
// a buffer, the memory is not freed at dispose() but when the ArrayBuffer is garbage-collected,
// which is the first moment no view can reach it.
import { checkInt } from "../errors.ts";
import { NativeHandle } from "../handle.ts";
import { check, detachNative, native, outPointer, viewNative } from "../native.ts";

/** Frees host memory whose view could not be detached, once that view is unreachable. Not a leak
 * registry (lib/handle.ts has the one): the buffer was disposed, this only delays its free. Bun
 * detaches such buffers, so this serves a runtime that cannot. */
const freeWhenUnreachable = new FinalizationRegistry<number>((address) => {
  const status = native().weft_transport_host_free(address);
  if (status !== 0) console.warn(`weft: freeing a disposed HostBuffer failed with status ${status}`);
});

/** Host memory that a NIC and (when present) every GPU can reach, zero-filled. */
export class HostBuffer extends NativeHandle {
  readonly bytes: number;
  /** The device alias of the same bytes, or 0 without a GPU. */
  readonly deviceAddress: number;
  #view: Uint8Array | undefined;

  private constructor(address: number, device: number, bytes: number) {
    super(address, `HostBuffer of ${bytes} bytes`, "its pinned memory stays allocated until the process exits");
    this.deviceAddress = device;
    this.bytes = bytes;
  }

  static alloc(bytes: number): HostBuffer {
    const op = "HostBuffer.alloc";
    checkInt(op, "bytes", bytes, 1);
    const host = new BigUint64Array(1);
    const device = new BigUint64Array(1);
    check(native().weft_transport_host_alloc(bytes, host, device), op);
    return new HostBuffer(outPointer(host), outPointer(device), bytes);
  }

  /** Host address of the first byte. */
  get address(): number {
    return this.pointerFor("HostBuffer.address");
  }

  /** A zero-copy view of the bytes. dispose() detaches it (and every view made over its buffer):
   * afterwards it has length 0, so it never reaches freed memory. */
  get view(): Uint8Array {
    const address = this.pointerFor("HostBuffer.view");
    return (this.#view ??= new Uint8Array(viewNative(address, this.bytes)));
  }

  protected destroy(address: number): void {
    const buffer = this.#view?.buffer as ArrayBuffer | undefined;
    this.#view = undefined;
    if (buffer && !detachNative(buffer)) {
      freeWhenUnreachable.register(buffer, address);
      return;
    }
    check(native().weft_transport_host_free(address), "HostBuffer.dispose");
  }
}
