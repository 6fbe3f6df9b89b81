// Every ABI struct's TS packing against the C compiler's layout (weft_abi_layout).
import { expect, test } from "./support/test-api.ts";

import { ABI_STRUCTS } from "../lib/abi.ts";
import { check, native, outPointer, readCString } from "../lib/native.ts";

function cLayout(): Record<string, { sizeof: number; fields: Record<string, number> }> {
  const out = new BigUint64Array(1);
  check(native().weft_abi_layout(out), "weft_abi_layout");
  return JSON.parse(readCString(outPointer(out)));
}

test("C publishes a layout for every TS ABI struct and no others", () => {
  expect(Object.keys(cLayout()).sort()).toEqual(ABI_STRUCTS.map((s) => s.name).sort());
});

for (const s of ABI_STRUCTS) {
  test(`${s.name}: sizeof and every offsetof match C`, () => {
    const c = cLayout()[s.name]!;
    expect(s.size).toBe(c.sizeof);
    expect({ ...s.offsets }).toEqual(c.fields);
  });
}
