// bootstrap.ts — how ranks find each other (DESIGN.md "Process model and bootstrap"). The parts,
// one concern each, live in lib/bootstrap/:
//   rank-env.ts         who this process is, from the launcher's environment (torchrun, Slurm, Open MPI)
//   store-api.ts        KeyValueStore, the limits every store shares, barrier/allGather on set + wait
//   local-store.ts      LocalStore: several ranks in one process (Communicator.local), no sockets
//   tcp-store.ts        Store: the TCP rendezvous rank 0 hosts and every rank joins
//   store-host.ts       rank 0's side: the map, the watches, authentication before any request
//   join.ts             a rank's side of the handshake
//   handshake.ts        the HMAC challenge-response proofs
//   token-file.ts       the token a one-host job makes for itself when it was given none
//   frames.ts           the wire format and its linear-time reassembly
//   socket.ts           the one file that touches the runtime's TCP API
//   exchanged-values.ts checks of peer handles, transport addresses and region descriptors read
//                       from the store, before native code sees them
export { rankEnvFromProcess, storeOptionsFromEnv, type RankEnv } from "./bootstrap/rank-env.ts";
export { MAX_KEY_BYTES, MAX_VALUE_BYTES, type KeyValueStore, type RankLostListener } from "./bootstrap/store-api.ts";
export { LocalStore } from "./bootstrap/local-store.ts";
export { Store, type StoreOptions } from "./bootstrap/tcp-store.ts";
export { checkPeerHandle, checkRegionDescriptors, checkTransportAddresses } from "./bootstrap/exchanged-values.ts";
