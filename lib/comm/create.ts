// create.ts — the creation sequence under Communicator.create, fromEnv and local: which ranks share
// a node, the native communicator, the exchange and import of the peers' arena handles, the
// inter-node link when the ranks span nodes, and the barriers that end it. Collective: every rank
// runs it with its own store. Communicator.#create validates, runs this, and wraps what it returns.
import { CommConfig, CommInfo, PeerHandle } from "../abi.ts";
import { checkPeerHandle, type KeyValueStore } from "../bootstrap.ts";
import { Completion } from "../completion.ts";
import { check, native, outPointer } from "../native.ts";
import { Stream } from "../stream.ts";
import { InterNodeLink } from "./inter-node-link.ts";
import { planNodes } from "./node-plan.ts";
import type { RankIdentity, ResolvedOptions } from "./options.ts";

/** Store keys of one communicator; several communicators may share a store. */
const generations = new WeakMap<KeyValueStore, number>();

/** What a connected rank is made of; the Communicator owns all of it from then on. */
export interface ConnectedRank {
  /** With several nodes, localRank and localWorldSize are this node's. */
  ident: RankIdentity;
  handle: number;
  info: ReturnType<typeof CommInfo.read>;
  /** The prefix of this communicator's store keys. */
  keys: string;
  completion: Completion;
  stream: Stream;
  node: number;
  nodes: number;
  inter: InterNodeLink | undefined;
}

/** Connects this rank to the others; on failure frees what it made and throws. */
export async function connectRank(store: KeyValueStore, ident: RankIdentity, device: number, opts: ResolvedOptions,
  op: string): Promise<ConnectedRank> {
  const { heapBytes, stagedBytes, timeoutMs, storeTimeoutMs, smBudget, interNodeBytes } = opts;
  const generation = generations.get(store) ?? 0;
  generations.set(store, generation + 1);
  const keys = `weft/comm/${generation}`;

  const nodeIds = (await store.allGather(`${keys}/node`, new TextEncoder().encode(ident.nodeId))).map((b) => new TextDecoder().decode(b));
  const plan = planNodes(nodeIds, ident.rank, op);
  // Several nodes: the native communicator spans this node's ranks (its rank is the local rank);
  // the inter-node part is added below. One node: it spans every rank, as before.
  const multi = plan.nodes > 1;
  if (multi) ident = { ...ident, localRank: plan.localRank, localWorldSize: plan.localSize };
  const nativeRank = multi ? plan.localRank : ident.rank;
  const nativeWorld = multi ? plan.localSize : ident.worldSize;

  const cfg = CommConfig.write(CommConfig.alloc(), {
    device, rank: nativeRank, world_size: nativeWorld, sm_budget: smBudget, heap_bytes: heapBytes, staged_bytes: stagedBytes,
    timeout_ns: BigInt(timeoutMs) * 1_000_000n,
  });
  const out = new BigUint64Array(1);
  check(native().weft_comm_create(cfg, out), op);
  const handle = outPointer(out);
  let completion: Completion | undefined;
  let stream: Stream | undefined;
  let inter: InterNodeLink | undefined;
  try {
    const infoBuf = CommInfo.alloc();
    check(native().weft_comm_info(handle, infoBuf), op);
    const info = CommInfo.read(infoBuf);
    completion = Completion.create(device, { timeoutMs: timeoutMs + 30_000, pollSpinMicros: opts.pollSpinMicros });
    stream = Stream.create(device);
    const mine = PeerHandle.alloc();
    check(native().weft_comm_export(handle, mine), op);
    const handles = await store.allGather(`${keys}/handles`, mine);
    for (let r = 0; r < ident.worldSize; r++) {
      if (r === ident.rank || nodeIds[r] !== ident.nodeId) continue;
      check(native().weft_comm_import(handle, checkPeerHandle(op, handles[r], r, mine)), op);
    }
    check(native().weft_comm_connect(handle), op);
    if (multi) {
      inter = await InterNodeLink.connect(store, keys, handle, {
        rank: ident.rank, worldSize: ident.worldSize, device, plan, slotBytes: interNodeBytes, timeoutMs, provider: opts.provider,
      });
      if (ident.rank === 0) {
        const t = inter.transport.info;
        console.error(`weft: ${plan.nodes} nodes x ${plan.localSize} rank${plan.localSize > 1 ? "s" : ""}; inter-node transport ` +
          `${t.provider} (libfabric ${t.libfabric}, ${t.hmem ? "FI_HMEM" : "host-mapped staging"}, ${interNodeBytes} B per node and call)`);
      }
    }
    await store.barrier(`${keys}/ready`, storeTimeoutMs);
    // Rank 0 hosts the TCP store on its own event loop, which the caller may block right after this
    // returns (a synchronous wait, a module load that waits for the GPU to go idle while a kernel
    // waits for a peer). A rank still waiting for the barrier's reply would then wait that long
    // too: 3 s of skew at the first collective, measured (bench/DECISIONS.md, "Rank 0 leaves
    // communicator creation last"). So rank 0 leaves only after every other rank has said it is out.
    if (ident.rank !== 0) await store.set(`${keys}/left/${ident.rank}`, "");
    else await store.wait(Array.from({ length: ident.worldSize - 1 }, (_, r) => `${keys}/left/${r + 1}`), storeTimeoutMs);
    return { ident, handle, info, keys, completion, stream, node: plan.node, nodes: plan.nodes, inter };
  } catch (e) {
    native().weft_comm_close_peers(handle);
    try {
      inter?.dispose();
    } catch {
      // the creation error is the one to report
    }
    native().weft_comm_destroy(handle);
    completion?.dispose();
    stream?.dispose();
    throw e;
  }
}
