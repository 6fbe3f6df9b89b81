// collectives.ts — bad input to a Communicator: creation (options, identity, devices: all checked
// before any device or store work, so no GPU is needed) and, in `gpuCases`, the collectives and
// the symmetric heap of a world-1 communicator.
import { LocalStore } from "../../../lib/bootstrap.ts";
import { Communicator, type CommunicatorOptions, type RankIdentity } from "../../../lib/comm.ts";
import { ArgumentError, DeviceError, DisposedError, UnsupportedError } from "../../../lib/errors.ts";
import type { SymmetricTensor } from "../../../lib/heap.ts";
import { Tensor } from "../../../lib/tensor.ts";
import { gpuCount } from "../gpu.ts";
import type { BadInputCase } from "./case.ts";

const A = ArgumentError;
const any = (v: unknown) => v as never;
const missingDevice = gpuCount();
const missingError = gpuCount() === 0 ? DeviceError : ArgumentError;
const ident: RankIdentity = { rank: 0, worldSize: 1, localRank: 0, localWorldSize: 1, nodeId: "n0" };
/** Communicator.create on a one-rank LocalStore with `opts` (or identity, device) replaced. */
const create = (opts: CommunicatorOptions | undefined, id: RankIdentity = ident, device = 0) =>
  Communicator.create(LocalStore.group(1)[0]!, id, device, opts);

export const cases: BadInputCase[] = [
  { name: "Communicator.local with no devices", run: () => Communicator.local({ devices: [] }), error: A, names: "devices" },
  { name: "Communicator.local with null options", run: () => Communicator.local(any(null)), error: A, names: "devices" },
  { name: "Communicator.local with devices a number", run: () => Communicator.local({ devices: any(2) }), error: A, names: "devices" },
  { name: "Communicator.local on device -1", run: () => Communicator.local({ devices: [-1] }), error: A, names: "devices[0]" },
  { name: "Communicator.local on device 0.5", run: () => Communicator.local({ devices: [0.5] }), error: A, names: "devices[0]" },
  { name: `Communicator.local on device ${missingDevice} (no such GPU)`, run: () => Communicator.local({ devices: [missingDevice] }), error: missingError, names: "devices[0]" },
  { name: "Communicator options: heapBytes 0", run: () => create({ heapBytes: 0 }), error: A, names: "heapBytes" },
  { name: "Communicator options: heapBytes 1.5", run: () => create({ heapBytes: 1.5 }), error: A, names: "heapBytes" },
  { name: "Communicator options: stagedBytes 2 GiB", run: () => create({ stagedBytes: 2 ** 31 }), error: A, names: "stagedBytes" },
  { name: "Communicator options: timeoutMs 0", run: () => create({ timeoutMs: 0 }), error: A, names: "timeoutMs" },
  { name: "Communicator options: storeTimeoutMs -1", run: () => create({ storeTimeoutMs: -1 }), error: A, names: "storeTimeoutMs" },
  { name: "Communicator options: smBudget 0", run: () => create({ smBudget: 0 }), error: A, names: "smBudget" },
  { name: "Communicator options: smBudget '44'", run: () => create({ smBudget: any("44") }), error: A, names: "smBudget" },
  { name: "Communicator options: pollSpinMicros 5000", run: () => create({ pollSpinMicros: 5000 }), error: A, names: "pollSpinMicros" },
  { name: "Communicator options: eagerSpinMicros -1", run: () => create({ eagerSpinMicros: -1 }), error: A, names: "eagerSpinMicros" },
  { name: "Communicator options: interNodeBytes not a multiple of 256", run: () => create({ interNodeBytes: 100 }), error: A, names: "interNodeBytes" },
  { name: "Communicator options: interNodeBytes 0", run: () => create({ interNodeBytes: 0 }), error: A, names: "interNodeBytes" },
  { name: "Communicator options: an empty provider", run: () => create({ provider: "" }), error: A, names: "provider" },
  { name: "Communicator options: null", run: () => create(any(null)), error: A, names: "opts" },
  { name: "Communicator identity: null", run: () => create({}, any(null)), error: A, names: "ident" },
  { name: "Communicator identity: worldSize 0", run: () => create({}, { ...ident, worldSize: 0 }), error: A, names: "ident.worldSize" },
  { name: "Communicator identity: rank 3 of 2", run: () => create({}, { ...ident, rank: 3, worldSize: 2 }), error: A, names: "ident.rank" },
  { name: "Communicator identity: localRank -1", run: () => create({}, { ...ident, localRank: -1 }), error: A, names: "ident.localRank" },
  { name: "Communicator identity: an empty nodeId", run: () => create({}, { ...ident, nodeId: "" }), error: A, names: "ident.nodeId" },
  { name: "Communicator.create on device -1", run: () => create({}, ident, -1), error: A, names: "device" },
  { name: `Communicator.create on device ${missingDevice} (no such GPU)`, run: () => create({}, ident, missingDevice), error: missingError, names: "device" },
];

// ---- on a GPU: a world-1 communicator ------------------------------------------------------------
interface Live { comm: Communicator; sym: SymmetricTensor; symI: SymmetricTensor; big: SymmetricTensor; plain: Tensor; gone: Communicator }
let live: Promise<Live> | undefined;
const ctx = () => (live ??= (async () => {
  const [comm] = await Communicator.local({ devices: [0], heapBytes: 64 << 20 });
  const [gone] = await Communicator.local({ devices: [0], heapBytes: 1 << 20 });
  await gone!.dispose();
  const c = comm!;
  return { comm: c, sym: c.empty([1024], "f32"), symI: c.empty([1024], "i32"), big: c.empty([1 << 19], "f32"), plain: Tensor.empty([1024], "f32"), gone: gone! };
})());
const on = (f: (c: Live) => unknown) => async () => f(await ctx());

export const gpuCases: BadInputCase[] = [
  { name: "allReduce of a plain tensor", run: on((c) => c.comm.prepare.allReduce(c.plain, c.sym)), error: A, names: "input" },
  { name: "allGather into a plain tensor", run: on((c) => c.comm.prepare.allGather(c.plain, c.plain)), error: A, names: "output" },
  { name: "reduceScatter of a plain tensor", run: on((c) => c.comm.prepare.reduceScatter(c.plain, c.sym)), error: A, names: "input" },
  { name: "allReduce of i32", run: on((c) => c.comm.prepare.allReduce(c.symI)), error: A, names: "dtype" },
  { name: "allGather into an output of the wrong size", run: on((c) => c.comm.prepare.allGather(c.sym, c.big)), error: A, names: "output" },
  { name: "allReduce from f32 into i32", run: on((c) => c.comm.prepare.allReduce(c.sym, c.symI)), error: A, names: "output" },
  { name: "broadcast from a root past the world", run: on((c) => c.comm.prepare.broadcast(c.sym, c.sym, { root: 1 })), error: A, names: "root" },
  { name: "allReduce with ctas 0.5", run: on((c) => c.comm.prepare.allReduce(c.sym, c.sym, { ctas: 0.5 })), error: A, names: "ctas" },
  { name: "allReduce with algorithm 'fast'", run: on((c) => c.comm.prepare.allReduce(c.sym, c.sym, { algorithm: any("fast") })), error: A, names: "algorithm" },
  { name: "allReduce with algorithm 'toString'", run: on((c) => c.comm.prepare.allReduce(c.sym, c.sym, { algorithm: any("toString") })), error: A, names: "algorithm" },
  { name: "allGather with an all-reduce algorithm", run: on((c) => c.comm.prepare.allGather(c.sym, c.sym, { algorithm: "direct" })), error: A, names: "algorithm" },
  { name: "staged allReduce larger than stagedBytes (2 MiB against 1 MiB)", run: on((c) => c.comm.prepare.allReduce(c.big, c.big, { algorithm: "staged" })), error: A, names: "algorithm" },
  { name: "allReduce with null options", run: on((c) => c.comm.prepare.allReduce(c.sym, c.sym, any(null))), error: A, names: "opts" },
  { name: "allToAll with two counts in a world of 1", run: on((c) => c.comm.prepare.allToAll(c.sym, c.sym, { sendCounts: [1, 1] })), error: A, names: "sendCounts" },
  { name: "allToAll with a negative count", run: on((c) => c.comm.prepare.allToAll(c.sym, c.sym, { sendCounts: [-1] })), error: A, names: "sendCounts[0]" },
  { name: "allGather of a number", run: on((c) => c.comm.prepare.allGather(any(5), c.sym)), error: A, names: "input" },
  { name: "comm.empty with a zero dimension", run: on((c) => c.comm.empty([0], "f32")), error: A, names: "shape[0]" },
  { name: "comm.empty of an unknown dtype", run: on((c) => c.comm.empty([4], any("f64"))), error: A, names: "dtype" },
  { name: "comm.pollSpinMicros = -1", run: on((c) => { c.comm.pollSpinMicros = -1; }), error: A, names: "us" },
  { name: "comm.eagerSpinMicros = 1e6", run: on((c) => { c.comm.eagerSpinMicros = 1e6; }), error: A, names: "us" },
  { name: "a disposed communicator's allReduce", run: on((c) => c.gone.allReduce(c.sym)), error: DisposedError, names: "Communicator rank 0" },
  { name: "a disposed communicator's empty()", run: on((c) => c.gone.empty([4], "f32")), error: DisposedError, names: "Communicator rank 0" },
  { name: "`using` a communicator (teardown is async and collective)", run: on((c) => c.gone[Symbol.dispose]()), error: UnsupportedError, names: "await using" },
];

export async function release(): Promise<void> {
  if (!live) return;
  const c = await live;
  live = undefined;
  for (const t of [c.sym, c.symI, c.big, c.plain]) t.dispose();
  await c.comm.dispose();
}
