// failure.ts — what a failed collective's reason word means, as the error its Promise rejects with
// (the word's fields: lib/completion.ts decodeReason; stages: cuda/collectives/args.h).
import { WeftAbortSource, WeftCollectiveStage } from "../abi/enums.ts";
import { decodeReason } from "../completion.ts";
import { errorFromStatus, PeerError, Status, TimeoutError, WeftError } from "../errors.ts";

const STAGE_WAIT: Record<number, string> = {
  1: "to enter the same collective (did it make this call? is it alive?)",
  3: "to finish its part of the collective",
  4: "to deliver its staged data",
  6: "(on another node) to deliver its data through the proxy (did it make this call? is it alive?)",
};
const STAGE_ABORTED = WeftCollectiveStage.WEFT_STAGE_ABORTED;
const STAGE_REMOTE = WeftCollectiveStage.WEFT_STAGE_REMOTE;
const FIELD_NAMES: Record<number, string> = {
  1: "the collective (one rank called a different one)",
  2: "the dtype",
  3: "the element count",
  4: "the CTA count (the `ctas` option)",
  5: "the root",
  6: "the world size",
  7: "the algorithm (the `algorithm` option)",
  8: "the call sequence (one rank made more or fewer collective calls than the other)",
  9: "the all-to-all counts (this rank's sendCounts for the peer against the peer's recvCounts for this rank)",
};

/** What the failure text needs to know about the failing rank. */
export interface FailingRank {
  rank: number;
  timeoutMs: number;
  /** The proxy's error between nodes, when there is one. */
  interNodeError(): Error | null;
}

export function describeCollectiveFailure(self: FailingRank, op: string, reason: bigint): Error {
  const { code, stage, field, peer } = decodeReason(reason);
  const who = `rank ${self.rank}`;
  if (stage === STAGE_REMOTE && code !== Status.E_TIMEOUT) {
    const cause = self.interNodeError();
    return errorFromStatus(code, op, `${who} could not exchange data with rank ${peer} on another node: the proxy failed` +
      (cause ? ` (${cause.message})` : ""));
  }
  if (code === Status.E_TIMEOUT) {
    return new TimeoutError(`${who} waited ${self.timeoutMs} ms for rank ${peer} ${STAGE_WAIT[stage] ?? `(stage ${stage})`}`,
      { code: "E_TIMEOUT", op });
  }
  if (code === Status.E_INVALID) {
    return new PeerError(`${who} and rank ${peer} made different calls: ${FIELD_NAMES[field] ?? `field ${field}`} differs. ` +
      "Every rank must make the same collective calls, in the same order, with the same sizes, dtypes and options",
      { code: "E_PEER", op });
  }
  if (stage === STAGE_ABORTED) {
    if (field === WeftAbortSource.WEFT_ABORT_HOST) {
      return new PeerError(`${who} stopped: rank ${peer} was declared failed (Communicator.abort), so it will not take part`,
        { code: "E_PEER", op });
    }
    return new PeerError(`${who} stopped because another rank failed this op (its own error says why)`, { code: "E_PEER", op });
  }
  return new WeftError(`${who}: the GPU reported status ${code} at stage ${stage} with rank ${peer}`, { code: "E_INTERNAL", op });
}
