// moe-route.ts — top-k routing of every token on one GPU (cuda/moe/route.cuh has the rule): ids
// [tokens, k] i32 in descending logit order, ties to the lower expert id, and weights [tokens, k] f32
// (softmax over all experts, renormalised over the k with `normalize`). comm.moeDispatch can route
// inside its own kernel instead (its `logits` argument), which saves this launch.
import { MoeRouteParams } from "../abi.ts";
import { completionPerDevice } from "../completion.ts";
import { DTYPES } from "../dtype.ts";
import { ArgumentError } from "../errors.ts";
import { check, native } from "../native.ts";
import { Stream } from "../stream.ts";
import { Tensor } from "../tensor.ts";
import { FLAG_NORMALIZE, requireTensor } from "./moe.ts";
import { validateMoeRoute } from "./moe-validate.ts";

export interface MoeRouteArgs {
  /** [≥ tokens, E] f32 or bf16. */
  logits: Tensor;
  topk: number;
  /** Renormalise the k weights to sum to 1 (default false: plain softmax probabilities). */
  normalize?: boolean;
  /** Rows of logits to route (default all). */
  tokens?: number;
  /** Outputs ([≥ tokens, topk] i32 / f32); allocated when not given. */
  ids?: Tensor;
  weights?: Tensor;
  stream?: Stream | null;
}

export interface MoeRouting {
  ids: Tensor;
  weights: Tensor;
}

const completionFor = completionPerDevice();

/** Validates a routing call; returns what enqueueRoute launches. */
function prepareRoute(args: MoeRouteArgs, op: string) {
  const logits = requireTensor(args?.logits, op, "logits");
  if (args.ids !== undefined) requireTensor(args.ids, op, "ids");
  if (args.weights !== undefined) requireTensor(args.weights, op, "weights");
  const shape = validateMoeRoute(args, op);
  const stream = args.stream ?? null;
  if (stream !== null && (!(stream instanceof Stream) || stream.device !== logits.device)) {
    throw new ArgumentError(op, "stream", `must be a Stream on device ${logits.device} (or null)`);
  }
  return { logits, shape, stream };
}

function enqueueRoute(args: MoeRouteArgs, op: string, r: ReturnType<typeof prepareRoute>,
  slot?: { done: number; seq: number; arrivals: number }): MoeRouting {
  const { logits, shape: s, stream } = r;
  const rows = Math.max(1, s.tokens);
  const ids = args.ids ?? Tensor.empty([rows, s.topk], "i32", { device: logits.device });
  const weights = args.weights ?? Tensor.empty([rows, s.topk], "f32", { device: logits.device });
  check(native().weft_moe_route(MoeRouteParams.write(MoeRouteParams.alloc(), {
    logits: logits.ptr, logits_dtype: DTYPES[s.logitsDtype].code, flags: s.normalize ? FLAG_NORMALIZE : 0, tokens: s.tokens,
    experts: s.experts, topk: s.topk, ids: ids.ptr, weights: weights.ptr, stream: stream ? stream.handle : 0,
    done: slot?.done ?? 0, seq: slot?.seq ?? 0, arrivals: slot?.arrivals ?? 0,
  })), op);
  return { ids, weights };
}

/** Top-k routing of every token on the GPU: ids [tokens, k] i32 (descending logit, ties to the lower
 * expert id) and weights [tokens, k] f32 (softmax over all experts, renormalised over the k with
 * normalize). Resolves when the kernel is done. */
export async function moeRoute(args: MoeRouteArgs): Promise<MoeRouting> {
  const op = "moeRoute";
  const r = prepareRoute(args, op);
  const completion = completionFor(r.logits.device);
  const slot = completion.slot();
  const routing = enqueueRoute(args, op, r, slot);
  await completion.promise(slot.seq, op);
  return routing;
}

/** moeRoute, enqueued on the stream without waiting (and capturable). */
export function moeRouteSync(args: MoeRouteArgs): MoeRouting {
  return enqueueRoute(args, "moeRouteSync", prepareRoute(args, "moeRouteSync"));
}
