// internals.ts — what a communicator shares with the plans made on it (lib/comm/collectives.ts,
// lib/ops/tp.ts) and with tests, without giving them the class itself: plans import this type, not
// lib/comm.ts, so the op modules and the Communicator do not import each other.
import type { Completion, FailureDescriber } from "../completion.ts";
import type { InterNodeLink } from "./inter-node-link.ts";

export interface CommInternals {
  /** The native communicator (WeftComm*). Valid while guard() passes. */
  readonly handle: number;
  /** Completion words of every launch on this communicator's stream. */
  readonly completion: Completion;
  /** The transport, proxy and staging between nodes (undefined on one node; tests inject failures). */
  readonly interNode: InterNodeLink | undefined;
  /** Throws DisposedError once the communicator's dispose() has started. */
  guard(op: string): void;
  /** Turns a failed launch's reason word into the error its Promise rejects with. */
  describe(op: string): FailureDescriber;
}
