// node-plan.ts — which rank is on which node, from the node id every rank reported (DESIGN.md
// "Process model and bootstrap"). A communicator over several nodes runs hierarchical collectives:
// NVLink inside a node, the proxy and transport between nodes (lib/comm/inter-node-link.ts).
import { UnsupportedError } from "../errors.ts";

/** Where every rank sits, from the node id each rank reported (in rank order). */
export interface NodePlan {
  /** This rank's node index: nodes are numbered in order of their lowest rank. */
  node: number;
  nodes: number;
  localRank: number;
  localSize: number;
}

/** Groups ranks into nodes by node id. Several nodes must be node-major and rail-aligned: every
 * node has the same number of ranks and holds ranks node * localSize .. + localSize - 1, so that
 * local rank l of every node forms one rail. */
export function planNodes(nodeIds: readonly string[], rank: number, op = "Communicator.create"): NodePlan {
  const order: string[] = [];
  for (const id of nodeIds) if (!order.includes(id)) order.push(id);
  const node = order.indexOf(nodeIds[rank]!);
  const members = nodeIds.flatMap((id, r) => (id === nodeIds[rank] ? [r] : []));
  const plan = { node, nodes: order.length, localRank: members.indexOf(rank), localSize: members.length };
  if (plan.nodes === 1) return plan;
  const sizes = order.map((id) => nodeIds.filter((x) => x === id).length);
  if (sizes.some((s) => s !== plan.localSize)) {
    throw new UnsupportedError(`ranks are spread unevenly over ${plan.nodes} nodes (${order.map((id, i) => `'${id}': ${sizes[i]}`).join(", ")}): ` +
      "a multi-node communicator needs the same number of ranks (GPUs) on every node", { code: "E_UNSUPPORTED", op });
  }
  const bad = nodeIds.findIndex((id, r) => order.indexOf(id) !== Math.floor(r / plan.localSize));
  if (bad >= 0) {
    throw new UnsupportedError(`rank ${bad} is on node '${nodeIds[bad]}' but a multi-node communicator needs node-major ranks ` +
      `(ranks ${Math.floor(bad / plan.localSize) * plan.localSize}..${Math.floor(bad / plan.localSize) * plan.localSize + plan.localSize - 1} on one node, ` +
      "as torchrun, srun and mpirun number them by default)", { code: "E_UNSUPPORTED", op });
  }
  return plan;
}
