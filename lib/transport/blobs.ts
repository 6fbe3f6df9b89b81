// blobs.ts — the opaque address and region blobs ranks exchange through the store: copied out of
// native memory at once (the library may reuse it), and packed back as one strided array.
import { TransportError } from "../errors.ts";
import { viewNative } from "../native.ts";

/** Every rank's blob, equal lengths, packed at a fixed stride for the native connect calls. */
export function concatBlobs(op: string, what: string, blobs: Uint8Array[]): { bytes: Uint8Array; stride: number } {
  const stride = blobs[0]?.length ?? 0;
  blobs.forEach((b, i) => {
    if (!(b instanceof Uint8Array) || b.length !== stride || stride === 0) {
      throw new TransportError(`${what} ${i} has ${b?.length} bytes but ${what} 0 has ${stride}: the ranks disagree ` +
        `on the transport (set WEFT_FABRIC_PROVIDER alike on every rank)`, { code: "E_TRANSPORT", op });
    }
  });
  const bytes = new Uint8Array(stride * blobs.length);
  blobs.forEach((b, i) => bytes.set(b, i * stride));
  return { bytes, stride };
}

/** A copy of `bytes` bytes of native memory (a blob the library owns); no view of it escapes. */
export function copyNative(address: number, bytes: number): Uint8Array {
  return new Uint8Array(viewNative(address, bytes).slice(0));
}
