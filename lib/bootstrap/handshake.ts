// handshake.ts — the proofs of the store's challenge-response (frames.ts has the message order).
//
// Each side sends a fresh 32-byte nonce; each proves it holds the job token with
// HMAC-SHA256(token, role | host nonce | client nonce | rank | world size). The token never
// crosses the wire, a recorded proof is useless against a new nonce, and the role label keeps the
// host's proof from being replayed as a client's (or the reverse). The client checks the host's
// proof before it trusts any reply, so a process that merely listens on MASTER_PORT cannot answer
// get(). What this does not give: integrity of the frames after the handshake. An active man in the
// middle on the network can still relay a handshake and then alter traffic; run multi-node jobs
// on a network you trust, as with any TCPStore.
import { Buffer } from "node:buffer";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

export const NONCE_BYTES = 32;
export const PROOF_BYTES = 32;

export function nonce(): Uint8Array {
  return new Uint8Array(randomBytes(NONCE_BYTES));
}

/** A fresh random job token (64 hex digits), for a store that makes its own. */
export function newToken(): string {
  return randomBytes(32).toString("hex");
}

export function proof(token: string, role: "client" | "host", hostNonce: Uint8Array, clientNonce: Uint8Array,
  rank: number, worldSize: number): Uint8Array {
  const ids = Buffer.alloc(8);
  ids.writeUInt32LE(rank >>> 0, 0);
  ids.writeUInt32LE(worldSize >>> 0, 4);
  const mac = createHmac("sha256", token);
  mac.update(`weft-store/1 ${role}\0`);
  mac.update(hostNonce);
  mac.update(clientNonce);
  mac.update(ids);
  return new Uint8Array(mac.digest());
}

/** Constant-time comparison of a received proof with the expected one. */
export function proofMatches(got: Uint8Array, want: Uint8Array): boolean {
  return got.length === want.length && timingSafeEqual(got, want);
}
