// internode.ts — what a Communicator spanning several nodes adds to the single-node one
// (DESIGN.md "Inter-node"): the node plan (who is on which node), and the inter-node resources a
// hierarchical collective kernel uses: the libfabric transport, the proxy thread with its device
// lane, and two pinned host-mapped staging buffers registered with the transport. Layout of the
// staging and the topology rules: cuda/collectives/hierarchical.h.
//
// Set-up and teardown are collective (every rank, same order) and driven by lib/comm.ts.
import { CommInterNode } from "./abi.ts";
import type { KeyValueStore } from "./bootstrap.ts";
import { UnsupportedError } from "./errors.ts";
import { check, native } from "./native.ts";
import { HostBuffer, Proxy, Transport } from "./transport.ts";

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

export interface InterNodeOptions {
  rank: number;
  worldSize: number;
  device: number;
  plan: NodePlan;
  /** Staging bytes per (rank, peer node): the most one call sends each other node. */
  slotBytes: number;
  /** Bound of every transport operation, ms. */
  timeoutMs: number;
  /** libfabric provider; default: automatic or WEFT_FABRIC_PROVIDER. */
  provider?: string;
}

/** The transport, proxy and staging of one rank of a multi-node communicator. */
export class InterNode {
  readonly transport: Transport;
  readonly proxy: Proxy;
  readonly send: HostBuffer;
  readonly recv: HostBuffer;
  readonly slotBytes: number;

  private constructor(transport: Transport, proxy: Proxy, send: HostBuffer, recv: HostBuffer, slotBytes: number) {
    this.transport = transport;
    this.proxy = proxy;
    this.send = send;
    this.recv = recv;
    this.slotBytes = slotBytes;
  }

  /** The libfabric provider in use ("tcp;ofi_rxm", "efa", ...). */
  get provider(): string {
    return this.transport.provider;
  }

  /** Collective. Opens the transport, registers the staging on every rank, starts the proxy, and
   * hands it all to the native communicator `comm` (weft_comm_set_internode). */
  static async connect(store: KeyValueStore, keys: string, comm: number, o: InterNodeOptions): Promise<InterNode> {
    const sizes = new BigUint64Array(2);
    check(native().weft_comm_internode_bytes(o.plan.nodes, o.slotBytes, sizes.subarray(0, 1), sizes.subarray(1, 2)), "Communicator.create");
    const made: { dispose(): void }[] = [];
    try {
      const transport = await Transport.connect(store, { device: o.device, timeoutMs: o.timeoutMs, provider: o.provider }, `${keys}/transport`);
      made.push(transport);
      const send = HostBuffer.alloc(Number(sizes[0]));
      made.push(send);
      const recv = HostBuffer.alloc(Number(sizes[1]));
      made.push(recv);
      const sendRegion = await transport.share(store, send, `${keys}/region/send`);
      const recvRegion = await transport.share(store, recv, `${keys}/region/recv`);
      const proxy = await Proxy.connect(store, transport, { device: o.device, timeoutMs: o.timeoutMs }, `${keys}/proxy`);
      const lane = proxy.deviceLane;
      if (!lane) throw new UnsupportedError(`the proxy of rank ${o.rank} has no device lane`, { code: "E_UNSUPPORTED", op: "Communicator.create" });
      const params = CommInterNode.write(CommInterNode.alloc(), {
        rank: o.rank, world_size: o.worldSize, node: o.plan.node, nodes: o.plan.nodes,
        send_region: sendRegion.index, recv_region: recvRegion.index,
        send_staging: send.deviceAddress, send_bytes: send.bytes, recv_staging: recv.deviceAddress, recv_bytes: recv.bytes,
        slot_bytes: o.slotBytes, fifo_slots: lane.slots, fifo_head: lane.head, fifo_control: lane.control, fifo_capacity: lane.capacity,
      });
      check(native().weft_comm_set_internode(comm, params), "Communicator.create");
      return new InterNode(transport, proxy, send, recv, o.slotBytes);
    } catch (e) {
      // The transport takes its regions and proxy with it; then the memory they pointed at.
      for (const m of made) {
        try {
          m.dispose();
        } catch {
          // the first error is the one to report
        }
      }
      throw e;
    }
  }

  /** The proxy's error, if it stopped (its message names the peer and the operation). */
  error(): Error | null {
    return this.proxy.disposed ? null : this.proxy.error();
  }

  /** After every rank's kernels are done (a store barrier): closes the transport, which stops its
   * proxy and releases its regions (no transfer touches the staging after this), then frees the
   * staging. */
  dispose(): void {
    const errors: unknown[] = [];
    for (const step of [() => this.transport.dispose(), () => this.send.dispose(), () => this.recv.dispose()]) {
      try {
        step();
      } catch (e) {
        errors.push(e);
      }
    }
    if (errors.length > 0) throw errors[0];
  }
}
