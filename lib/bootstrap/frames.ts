// frames.ts — the store's wire format and its reassembly from TCP chunks.
//
// Frame: u32 LE body length, then the body: u8 op | u32 LE id | u16 LE key length | key (UTF-8) |
// value (the rest of the body).
//
// Handshake (handshake.ts has the proofs): on accept the host sends CHALLENGE (id = protocol
// version, value = its nonce). The client answers AUTH (id = rank, key = world size, value = its
// nonce | its proof). A host that accepts the proof answers WELCOME (id = rank, value = the host's
// proof | u8 status (0 = joined, 1 = refused) | message); one that does not answers DENIED and
// hangs up. Only then: SET, WATCH (reply VALUE once the key exists), BYE from the client; OK /
// VALUE / FAIL (value = message) for a request id, and DEAD (id = a rank whose connection dropped
// without BYE) from the host.
//
// Reassembly is linear in the bytes received: once a length prefix is read, the body gets one
// buffer of exactly that size and each chunk is copied into it once. A length over the reader's
// cap (small before authentication, the key and value limits after) is a FrameError: the caller
// drops the connection instead of buffering toward it.
import { MAX_KEY_BYTES, MAX_VALUE_BYTES } from "./store-api.ts";

export const Op = {
  SET: 2, WATCH: 3, BYE: 4,
  OK: 10, VALUE: 11, FAIL: 12, DEAD: 13,
  CHALLENGE: 20, AUTH: 21, WELCOME: 22, DENIED: 23,
} as const;

export const PROTOCOL_VERSION = 1;
const BODY_HEADER = 1 + 4 + 2;
/** Every frame of the handshake fits in this (nonces, proofs, a short message). */
export const HANDSHAKE_FRAME_BYTES = 1024;
/** The largest body an authenticated peer may send: the key and value limits plus the header. */
export const FRAME_BYTES = BODY_HEADER + MAX_KEY_BYTES + MAX_VALUE_BYTES;

export interface Frame {
  op: number;
  id: number;
  key: string;
  value: Uint8Array;
}

/** A frame that breaks the format or the cap; the connection it came on is dropped. */
export class FrameError extends Error {}

const encoder = new TextEncoder();
const strictDecoder = new TextDecoder("utf-8", { fatal: true });

/** One frame as the parts to write: the header with the key, then the value as given (not copied). */
export function encodeFrame(op: number, id: number, key = "", value?: Uint8Array): Uint8Array[] {
  const k = encoder.encode(key);
  const head = new Uint8Array(4 + BODY_HEADER + k.length);
  const dv = new DataView(head.buffer);
  dv.setUint32(0, BODY_HEADER + k.length + (value?.length ?? 0), true);
  dv.setUint8(4, op);
  dv.setUint32(5, id >>> 0, true);
  dv.setUint16(9, k.length, true);
  head.set(k, 4 + BODY_HEADER);
  return value && value.length > 0 ? [head, value] : [head];
}

/** A short UTF-8 message as a frame value (FAIL, DENIED, WELCOME). */
export function messageBytes(text: string): Uint8Array {
  return encoder.encode(text.length > 400 ? text.slice(0, 400) + "..." : text);
}

export function messageText(bytes: Uint8Array): string {
  return new TextDecoder().decode(bytes);
}

function parseBody(body: Uint8Array): Frame {
  const dv = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const keyLen = dv.getUint16(5, true);
  if (BODY_HEADER + keyLen > body.length) throw new FrameError(`a frame's key length ${keyLen} runs past its body of ${body.length} bytes`);
  let key: string;
  try {
    key = strictDecoder.decode(body.subarray(BODY_HEADER, BODY_HEADER + keyLen));
  } catch {
    throw new FrameError("a frame's key is not valid UTF-8");
  }
  return { op: dv.getUint8(0), id: dv.getUint32(1, true), key, value: body.subarray(BODY_HEADER + keyLen) };
}

/** Reassembles frames from TCP chunks. The value of a frame is a view of a buffer that belongs to
 * that frame alone, so the receiver may keep it. */
export class FrameReader {
  /** The largest body accepted now; raise it once the peer is authenticated. */
  cap: number;
  readonly #prefix = new Uint8Array(4);
  #prefixFill = 0;
  #body: Uint8Array | undefined;
  #bodyFill = 0;
  #stopped = false;

  constructor(cap: number) {
    this.cap = cap;
  }

  /** Bytes held for a frame not yet complete (bounded by cap + 4). */
  get buffered(): number {
    return this.#prefixFill + this.#bodyFill;
  }

  /** Discards what is buffered and every later chunk (the connection is being dropped). */
  stop(): void {
    this.#stopped = true;
    this.#body = undefined;
  }

  /** Feeds one chunk; calls onFrame for each frame it completes, in order. Throws FrameError. */
  push(chunk: Uint8Array, onFrame: (f: Frame) => void): void {
    let at = 0;
    while (at < chunk.length && !this.#stopped) {
      if (this.#body === undefined) {
        const n = Math.min(4 - this.#prefixFill, chunk.length - at);
        this.#prefix.set(chunk.subarray(at, at + n), this.#prefixFill);
        this.#prefixFill += n;
        at += n;
        if (this.#prefixFill < 4) return;
        this.#prefixFill = 0;
        const len = new DataView(this.#prefix.buffer).getUint32(0, true);
        if (len < BODY_HEADER) throw new FrameError(`a frame of ${len} bytes is shorter than its ${BODY_HEADER}-byte header`);
        if (len > this.cap) throw new FrameError(`a frame of ${len} bytes is over the limit of ${this.cap}`);
        this.#body = new Uint8Array(len);
        this.#bodyFill = 0;
      }
      const body = this.#body;
      const n = Math.min(body.length - this.#bodyFill, chunk.length - at);
      body.set(chunk.subarray(at, at + n), this.#bodyFill);
      this.#bodyFill += n;
      at += n;
      if (this.#bodyFill === body.length) {
        this.#body = undefined;
        this.#bodyFill = 0;
        onFrame(parseBody(body));
      }
    }
  }
}
