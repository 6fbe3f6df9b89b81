// inter-node-link.ts — what a Communicator spanning several nodes adds to the single-node one
// (DESIGN.md "Inter-node"): the resources a hierarchical collective (and an inter-node TP plan)
// uses between nodes: the libfabric transport, the proxy thread with its device lane, and two
// pinned host-mapped staging buffers registered with the transport. Layout of the staging and the
// topology rules: cuda/collectives/hierarchical.h. Who is on which node: ./node-plan.ts.
//
// Set-up and teardown are collective (every rank, same order) and driven by lib/comm.ts.
import { CommInterNode } from "../abi.ts";
import type { KeyValueStore } from "../bootstrap.ts";
import { UnsupportedError } from "../errors.ts";
import { teardown } from "../handle.ts";
import { check, native } from "../native.ts";
import { HostBuffer } from "../transport/host-buffer.ts";
import { Proxy } from "../transport/proxy.ts";
import { Transport } from "../transport/transport.ts";
import type { NodePlan } from "./node-plan.ts";

export interface InterNodeLinkOptions {
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
export class InterNodeLink {
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
  static async connect(store: KeyValueStore, keys: string, comm: number, o: InterNodeLinkOptions): Promise<InterNodeLink> {
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
      return new InterNodeLink(transport, proxy, send, recv, o.slotBytes);
    } catch (e) {
      // The transport takes its regions and proxy with it; then the memory they pointed at. The
      // creation error is the one to report; a cleanup failure rides along as its cause.
      try {
        teardown("Communicator.create", made.map((m) => () => m.dispose()));
      } catch (cleanup) {
        if (e instanceof Error && e.cause === undefined) (e as { cause?: unknown }).cause = cleanup;
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
    teardown("Communicator.dispose", [() => this.transport.dispose(), () => this.send.dispose(), () => this.recv.dispose()]);
  }
}
