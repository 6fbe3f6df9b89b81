// region.ts — memory registered with a transport: the same index on every rank, so a put names
// its source and destination by index and offset.
import { ArgumentError } from "../errors.ts";
import { NativeHandle } from "../handle.ts";
import { check, native, outPointer } from "../native.ts";
import { checkRegionDescriptors } from "../bootstrap/exchanged-values.ts";
import { concatBlobs, copyNative } from "./blobs.ts";
import type { HostBuffer } from "./host-buffer.ts";
import type { Transport } from "./transport.ts";

export class Region extends NativeHandle {
  readonly transport: Transport;
  readonly index: number;
  readonly bytes: number;
  /** The HostBuffer registered, when it was one (kept referenced while registered). */
  readonly buffer: HostBuffer | undefined;

  /** @internal use Transport.register */
  constructor(transport: Transport, index: number, bytes: number, buffer: HostBuffer | undefined) {
    // No leak warning of its own: the transport keeps its regions and releases them when it closes.
    super(index, `Region ${index}`, null);
    this.transport = transport;
    this.index = index;
    this.bytes = bytes;
    this.buffer = buffer;
  }

  descriptor(): Uint8Array {
    const index = this.pointerFor("Region.descriptor");
    const blob = new BigUint64Array(1);
    const bytes = new BigUint64Array(1);
    check(native().weft_transport_region_descriptor(this.transport.handle, index, blob, bytes), "Region.descriptor");
    return copyNative(outPointer(blob), Number(bytes[0]));
  }

  /** Every rank's descriptor of this region, in rank order. */
  connectPeers(descriptors: Uint8Array[]): void {
    const op = "Region.connectPeers";
    const index = this.pointerFor(op);
    if (!Array.isArray(descriptors) || descriptors.length !== this.transport.worldSize) {
      throw new ArgumentError(op, "descriptors", `must hold one descriptor per rank (${this.transport.worldSize}), got ${descriptors?.length}`);
    }
    checkRegionDescriptors(op, descriptors);
    const { bytes, stride } = concatBlobs(op, "descriptor", descriptors);
    check(native().weft_transport_region_connect(this.transport.handle, index, bytes, stride, descriptors.length), op);
  }

  /** Deregisters now. Fails while local writes from it are in flight (flush the proxy first); the
   * registration is then released when the transport closes. */
  protected destroy(index: number): void {
    this.transport.untrack(this);
    check(native().weft_transport_deregister(this.transport.handle, index), "Region.dispose");
  }

  /** @internal the transport closed, taking the registration with it */
  closed(): void {
    this.abandon();
  }
}
