// native-plan.ts — the last steps every collective op's plan creation shares (TP ops, ring
// attention, MoE dispatch and combine): once the native cost model has chosen a configuration, the
// workspace it asked for comes from the symmetric heap, goes into the op's params, and the native
// plan is created from them. Whatever was made is freed again if a later step throws, so a failed
// creation leaves neither a native plan nor heap space behind.
import type { SymmetricTensor } from "../heap.ts";
import { checkedOut } from "../native.ts";
import type { Shape } from "../tensor.ts";
import type { Struct } from "../struct.ts";

/** The native calls of one op's plan: create writes the new handle into `out`; report (MoE plans
 * only) writes the address of the plan's report block. */
export interface NativePlanCalls {
  create(out: BigUint64Array): number;
  report?(handle: number, out: BigUint64Array): number;
  destroy(handle: number): number;
}

/**
 * Takes `workspaceBytes` of symmetric heap (every rank creates its plans in the same order, so the
 * allocations agree), writes it into `params`, creates the native plan and, where the op has one,
 * reads its report address; then `build` makes the plan object (and whatever must follow creation,
 * such as the barrier that orders the zeroed workspace before any peer reads it). If any of that
 * throws, the native plan is destroyed and the workspace freed before the error propagates.
 */
export function createNativePlan<T>(
  comm: { empty(shape: Shape, dtype: "u8"): SymmetricTensor },
  op: string,
  struct: Struct<{ workspace: "u64"; workspace_bytes: "u64" }>,
  params: Uint8Array,
  workspaceBytes: number | bigint,
  calls: NativePlanCalls,
  build: (handle: number, workspace: SymmetricTensor, report: number) => T,
): T {
  const workspace = comm.empty([Number(workspaceBytes)], "u8");
  let handle = 0;
  try {
    struct.write(params, { workspace: workspace.ptr, workspace_bytes: workspace.bytes });
    handle = checkedOut(op, calls.create);
    const report = calls.report ? checkedOut(op, (out) => calls.report!(handle, out)) : 0;
    return build(handle, workspace, report);
  } catch (e) {
    if (handle) calls.destroy(handle);
    workspace.dispose();
    throw e;
  }
}
