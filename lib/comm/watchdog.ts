// watchdog.ts — the failure watchdog (issue 24, finding 6): a communicator whose store reports lost
// ranks (the TCP store's onRankLost) declares each one failed (Communicator.abort) the moment the
// store learns of it. Every running fused op and collective of this rank then stops at its next
// poll of the abort word, with a PeerError naming that rank, instead of at its GPU wait bound.
//
// What it covers: a rank whose process dies (killed, crashed, exited without dispose). Its sockets
// close with it, rank 0's host sees the drop without BYE and tells every other rank (the DEAD
// notice, lib/bootstrap/tcp-store.ts); a rank that loses its own connection to rank 0 reports rank
// 0. What it does not: a host that vanishes without closing its sockets (power loss, a cut
// network) is noticed only when TCP gives up; the GPU wait bound (timeoutMs) still ends the ops.
// A store without onRankLost (LocalStore: every rank in this process) needs no watchdog.
import { DisposedError } from "../errors.ts";
import type { KeyValueStore } from "../bootstrap/store-api.ts";

export interface WatchedRank {
  /** This rank, for the one line the watchdog prints. */
  rank: number;
  /** The group's size: a notice for a rank outside [0, size) is ignored. */
  size: number;
  /** Declares a rank failed (Communicator.abort); returns at once. */
  abort(failedRank: number): void;
}

/** Starts watching `store` for `target`; returns the function that stops it (idempotent). Holds no
 * timer and no socket of its own: it lives exactly as long as the store's subscription. */
export function watchForLostRanks(store: KeyValueStore | Pick<KeyValueStore, "onRankLost">, target: WatchedRank): () => void {
  if (typeof store.onRankLost !== "function") return () => {};
  let told = false;
  return store.onRankLost((lost, reason) => {
    if (!Number.isInteger(lost) || lost < 0 || lost >= target.size) return;
    if (!told) {
      told = true;
      console.error(`weft: rank ${target.rank}: ${reason}; its running and later ops stop with a PeerError naming rank ${lost}`);
    }
    try {
      target.abort(lost);
    } catch (e) {
      // Disposed meanwhile: nothing of it runs any more, so there is nothing to stop.
      if (!(e instanceof DisposedError)) throw e;
    }
  });
}
