// transport.ts — the inter-node transport and its proxy, as handle classes (DESIGN.md "Inter-node").
// One concept per file under lib/transport/:
//
//   HostBuffer   host memory a NIC (and every GPU, when there is one) can reach; viewed zero-copy
//   Transport    this rank's libfabric endpoint; connect() exchanges addresses through the store
//   Region       registered memory, the same index on every rank
//   commands     put / signal / fence / barrier, validated and packed for the FIFO
//   Proxy        the per-rank proxy thread and its command FIFO; completion as Promises that
//                reject with the proxy's error
//
// Set-up is collective: every rank makes the same calls in the same order.
export { HostBuffer } from "./transport/host-buffer.ts";
export { Transport, transportCounters, type Exchange, type RegisterableMemory, type TransportInfo, type TransportOptions } from "./transport/transport.ts";
export { Region } from "./transport/region.ts";
export { Opcode, packCommands, type Command, type PutCommand, type SignalTarget } from "./transport/commands.ts";
export { Proxy, type ProxyOptions, type ProxyStats } from "./transport/proxy.ts";
