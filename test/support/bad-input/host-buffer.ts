// host-buffer.ts — bad input to HostBuffer (pinned host memory): sizes, and use after dispose(),
// which is a DisposedError (its views are detached then: test/transport/transport.test.ts).
import { ArgumentError, DisposedError } from "../../../lib/errors.ts";
import { HostBuffer } from "../../../lib/transport.ts";
import type { BadInputCase } from "./case.ts";

const A = ArgumentError;
const any = (v: unknown) => v as never;
const disposed = () => {
  const b = HostBuffer.alloc(64);
  b.dispose();
  return b;
};

export const cases: BadInputCase[] = [
  { name: "HostBuffer.alloc(0)", run: () => HostBuffer.alloc(0), error: A, names: "bytes" },
  { name: "HostBuffer.alloc(-1)", run: () => HostBuffer.alloc(-1), error: A, names: "bytes" },
  { name: "HostBuffer.alloc(1.5)", run: () => HostBuffer.alloc(1.5), error: A, names: "bytes" },
  { name: "HostBuffer.alloc('64')", run: () => HostBuffer.alloc(any("64")), error: A, names: "bytes" },
  { name: "HostBuffer.alloc(NaN)", run: () => HostBuffer.alloc(NaN), error: A, names: "bytes" },
  { name: "HostBuffer.alloc(2^53)", run: () => HostBuffer.alloc(2 ** 53), error: A, names: "bytes" },
  { name: "HostBuffer.view after dispose()", run: () => disposed().view, error: DisposedError, names: "HostBuffer" },
  { name: "HostBuffer.address after dispose()", run: () => disposed().address, error: DisposedError, names: "HostBuffer" },
];
