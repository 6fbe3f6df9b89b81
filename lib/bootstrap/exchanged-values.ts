// exchanged-values.ts — checks of the values ranks hand each other through the store, made before
// native code reads them. A peer handle carries a device address and a CUDA IPC blob that
// weft_comm_import maps; a transport address and a region descriptor carry addresses and keys the
// proxy writes to. A value that is short, long, or claims another rank is refused here with a
// PeerError naming the rank it came from, instead of being copied half-zeroed into an ABI struct.
import { PeerHandle } from "../abi.ts";
import { PeerError } from "../errors.ts";

function refuse(op: string, rank: number, what: string, rule: string): never {
  throw new PeerError(`rank ${rank}'s ${what}, read from the store, ${rule}: it was not written by this job's weft ` +
    "(every rank must run the same weft version)", { code: "E_PEER", op });
}

function bytesOf(op: string, rank: number, what: string, v: unknown): Uint8Array {
  if (!(v instanceof Uint8Array)) refuse(op, rank, what, "is missing");
  return v;
}

/** The fields of a WeftPeerHandle that rank `from` published, checked against this rank's own
 * (`mine`, from weft_comm_export): exact size, version 1, the sender's rank, the same arena size,
 * and a mapping to import (the process token selects direct access or CUDA IPC). Returns a copy
 * for weft_comm_import. */
export function checkPeerHandle(op: string, value: unknown, from: number, mine: Uint8Array): Uint8Array {
  const what = "peer handle";
  const bytes = bytesOf(op, from, what, value);
  if (bytes.length !== PeerHandle.size) refuse(op, from, what, `has ${bytes.length} bytes, not ${PeerHandle.size}`);
  const h = PeerHandle.read(bytes);
  const own = PeerHandle.read(mine);
  if (h.size !== PeerHandle.size || h.version !== 1) refuse(op, from, what, `says size ${h.size}, version ${h.version} (expected ${PeerHandle.size}, 1)`);
  if (h.rank !== from) refuse(op, from, what, `claims rank ${h.rank}`);
  if (BigInt(h.arena_bytes) !== BigInt(own.arena_bytes)) {
    refuse(op, from, what, `describes an arena of ${h.arena_bytes} bytes where this rank's has ${own.arena_bytes} ` +
      "(every rank must create the communicator with the same heapBytes and stagedBytes)");
  }
  if (h.device < 0 || h.device > 0xffff) refuse(op, from, what, `names device ${h.device}`);
  if (BigInt(h.process_token) === 0n) refuse(op, from, what, "has no process token");
  if (BigInt(h.process_token) === BigInt(own.process_token)) {
    if (BigInt(h.arena_base) === 0n) refuse(op, from, what, "shares this process but has no arena address");
  } else if ((h.ipc as (number | bigint)[]).every((b) => Number(b) === 0)) {
    refuse(op, from, what, "has an empty CUDA IPC handle");
  }
  return bytes.slice();
}

const ADDRESS_MAGIC = "weftadr1";
const REGION_MAGIC = "weftreg1";
/** AddressHeader of ffi/src/transport/fabric_transport.hpp: magic[8], provider[48], i32 rank,
 * u32 addrlen, u64 control address, bytes, key. The provider's own address follows. */
const ADDRESS_HEADER = 8 + 48 + 4 + 4 + 8 + 8 + 8;
/** The longest provider address weft accepts (libfabric names are tens of bytes). */
const MAX_PROVIDER_ADDRESS = 1024;
/** RegionDescriptor: magic[8], i32 rank, i32 region, u64 address, bytes, key. */
const REGION_DESCRIPTOR = 8 + 4 + 4 + 8 + 8 + 8;

function magicIs(b: Uint8Array, magic: string): boolean {
  for (let i = 0; i < 8; i++) if (b[i] !== magic.charCodeAt(i)) return false;
  return true;
}

/** Every rank's transport address, in rank order: the header's magic, a NUL-terminated provider
 * name, the sender's rank, and a provider address of the length the header gives. */
export function checkTransportAddresses(op: string, addresses: readonly unknown[]): void {
  const what = "transport address";
  addresses.forEach((v, r) => {
    const b = bytesOf(op, r, what, v);
    if (b.length < ADDRESS_HEADER || b.length > ADDRESS_HEADER + MAX_PROVIDER_ADDRESS) {
      refuse(op, r, what, `has ${b.length} bytes (expected ${ADDRESS_HEADER} to ${ADDRESS_HEADER + MAX_PROVIDER_ADDRESS})`);
    }
    if (!magicIs(b, ADDRESS_MAGIC)) refuse(op, r, what, "does not start with the address magic");
    if (!b.subarray(8, 56).includes(0)) refuse(op, r, what, "has an unterminated provider name");
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    if (dv.getInt32(56, true) !== r) refuse(op, r, what, `claims rank ${dv.getInt32(56, true)}`);
    const len = dv.getUint32(60, true);
    if (ADDRESS_HEADER + len !== b.length) refuse(op, r, what, `says ${len} address bytes but carries ${b.length - ADDRESS_HEADER}`);
  });
}

/** Every rank's descriptor of one region, in rank order: magic, the sender's rank, the same region
 * index on every rank, a non-zero size. */
export function checkRegionDescriptors(op: string, descriptors: readonly unknown[]): void {
  const what = "region descriptor";
  let region: number | undefined;
  descriptors.forEach((v, r) => {
    const b = bytesOf(op, r, what, v);
    if (b.length !== REGION_DESCRIPTOR) refuse(op, r, what, `has ${b.length} bytes, not ${REGION_DESCRIPTOR}`);
    if (!magicIs(b, REGION_MAGIC)) refuse(op, r, what, "does not start with the region magic");
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    if (dv.getInt32(8, true) !== r) refuse(op, r, what, `claims rank ${dv.getInt32(8, true)}`);
    const index = dv.getInt32(12, true);
    if (index < 1 || (region !== undefined && index !== region)) {
      refuse(op, r, what, `names region ${index}${region === undefined ? "" : ` where rank 0's names ${region}`} (ranks must register regions in the same order)`);
    }
    region = index;
    // The address may be 0: providers without FI_MR_VIRT_ADDR take offsets into the region.
    if (dv.getBigUint64(24, true) === 0n) refuse(op, r, what, "describes a region of 0 bytes");
  });
}
