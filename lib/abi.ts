// abi.ts — the TS side of every ABI struct and enum of weft.h, by topic (lib/abi/*.ts), and the lists
// test/abi.test.ts checks against weft_abi_layout(): each struct's packing and each enum's values.
import * as attention from "./abi/attention.ts";
import * as comm from "./abi/comm.ts";
import * as enums from "./abi/enums.ts";
import * as interNode from "./abi/inter-node.ts";
import * as ops from "./abi/ops.ts";
import * as runtime from "./abi/runtime.ts";
import { Struct } from "./struct.ts";

export * from "./abi/attention.ts";
export * from "./abi/comm.ts";
export * from "./abi/enums.ts";
export * from "./abi/inter-node.ts";
export * from "./abi/ops.ts";
export * from "./abi/runtime.ts";

/** Every ABI struct, by topic. */
export const ABI_STRUCTS: readonly Struct<any>[] = [runtime, comm, interNode, ops, attention]
  .flatMap((m) => Object.values(m).filter((v): v is Struct<any> => v instanceof Struct));

/** Every enum and constant group of weft.h, by its C name (WeftTpMover: { WEFT_TP_MOVER_AUTO: 0, ... }). */
export const ABI_ENUMS: Readonly<Record<string, Readonly<Record<string, number>>>> = enums.ABI_ENUM_GROUPS;
