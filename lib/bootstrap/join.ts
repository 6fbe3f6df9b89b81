// join.ts — one attempt of a rank to join rank 0's store: connect, answer the challenge, check the
// host's proof. Nothing the listener says is believed before that proof checks out.
import {
  encodeFrame, FRAME_BYTES, FrameError, FrameReader, HANDSHAKE_FRAME_BYTES, messageText, Op, PROTOCOL_VERSION, type Frame,
} from "./frames.ts";
import { NONCE_BYTES, nonce, proof, PROOF_BYTES, proofMatches } from "./handshake.ts";
import { connect, type Connection } from "./socket.ts";

/** A joined connection. Frames that arrive before route() are kept and delivered first. */
export interface Link {
  write(parts: Uint8Array[]): void;
  end(): void;
  destroy(): void;
  route(onFrame: (f: Frame) => void, onLost: (why: string) => void): void;
}

export type JoinOutcome =
  | { kind: "joined"; link: Link }
  /** The host did not accept this rank's token. */
  | { kind: "denied" }
  /** The host accepted the token but not the rank's claim (taken, out of range, other world size). */
  | { kind: "refused"; message: string }
  /** The listener answered as a store but could not prove it holds the token. */
  | { kind: "impostor" }
  /** The store is up but this rank has no token to answer with yet (no token file). */
  | { kind: "no-token" }
  /** No challenge in time, a hang-up, or another protocol. */
  | { kind: "silent"; message: string };

/** One attempt; throws SocketError when the TCP connect itself fails. `ms` bounds the handshake.
 * `tokenNow` is asked once the challenge has come (undefined: none yet, hang up). */
export async function join(addr: string, port: number, rank: number, worldSize: number, tokenNow: () => string | undefined,
  ms: number): Promise<JoinOutcome> {
  let phase: "challenge" | "welcome" | "joined" | "over" = "challenge";
  let settle!: (o: JoinOutcome) => void;
  const outcome = new Promise<JoinOutcome>((resolve) => (settle = resolve));
  const reader = new FrameReader(HANDSHAKE_FRAME_BYTES);
  const clientNonce = nonce();
  let conn!: Connection;
  const early: Frame[] = [];
  let earlyLost: string | undefined;
  let onFrame: ((f: Frame) => void) | undefined;
  let onLost: ((why: string) => void) | undefined;
  let welcomeProof: Uint8Array = new Uint8Array(0);

  const end = (o: JoinOutcome, hangUp: boolean) => {
    phase = "over";
    clearTimeout(timer);
    if (hangUp) {
      reader.stop();
      conn.destroy();
    }
    settle(o);
  };

  const handle = (f: Frame) => {
    if (phase === "challenge") {
      if (f.op !== Op.CHALLENGE || f.id !== PROTOCOL_VERSION || f.value.length !== NONCE_BYTES) {
        return end({ kind: "silent", message: `it does not speak the weft store protocol (version ${PROTOCOL_VERSION})` }, true);
      }
      const token = tokenNow();
      if (token === undefined) return end({ kind: "no-token" }, true);
      const hostNonce = f.value.slice();
      const auth = new Uint8Array(NONCE_BYTES + PROOF_BYTES);
      auth.set(clientNonce);
      auth.set(proof(token, "client", hostNonce, clientNonce, rank, worldSize), NONCE_BYTES);
      conn.write(encodeFrame(Op.AUTH, rank, String(worldSize), auth));
      phase = "welcome";
      welcomeProof = proof(token, "host", hostNonce, clientNonce, rank, worldSize);
    } else if (phase === "welcome") {
      if (f.op === Op.DENIED) return end({ kind: "denied" }, true);
      if (f.op !== Op.WELCOME || f.value.length < PROOF_BYTES + 1) {
        return end({ kind: "silent", message: "it answered the handshake out of turn" }, true);
      }
      if (!proofMatches(f.value.subarray(0, PROOF_BYTES), welcomeProof)) return end({ kind: "impostor" }, true);
      if (f.value[PROOF_BYTES] !== 0) return end({ kind: "refused", message: messageText(f.value.subarray(PROOF_BYTES + 1)) }, true);
      phase = "joined";
      clearTimeout(timer);
      reader.cap = FRAME_BYTES;
      settle({ kind: "joined", link });
    } else if (phase === "joined") {
      if (onFrame) onFrame(f);
      else early.push(f);
    }
  };

  const lost = (why: string) => {
    if (phase === "joined") {
      if (onLost) onLost(why);
      else earlyLost ??= why;
    } else if (phase !== "over") {
      end({ kind: "silent", message: `it closed the connection during the handshake (${why})` }, false);
    }
  };

  const link: Link = {
    write: (parts) => conn.write(parts),
    end: () => conn.end(),
    destroy: () => {
      reader.stop();
      conn.destroy();
    },
    route(frames, gone) {
      for (const f of early.splice(0)) frames(f);
      onFrame = frames;
      onLost = gone;
      if (earlyLost !== undefined) gone(earlyLost);
    },
  };

  const timer = setTimeout(() => end({ kind: "silent", message: `it did not finish the handshake within ${ms} ms` }, true), ms);
  try {
    await connect(addr, port, (c) => {
      conn = c;
      return {
        data: (chunk) => {
          try {
            reader.push(chunk, handle);
          } catch (e) {
            if (!(e instanceof FrameError)) throw e;
            if (phase === "joined") link.destroy();
            else end({ kind: "silent", message: e.message }, true);
            lost(`a malformed frame: ${e.message}`);
          }
        },
        close: () => lost("closed"),
      };
    });
  } catch (e) {
    clearTimeout(timer);
    throw e;
  }
  return outcome;
}
