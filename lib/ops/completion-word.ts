// completion-word.ts — INTERIM completion for single-kernel ops (issue 4), until lib/completion.ts
// (issue 3) lands; the lead swaps awaitCompletionWord() and CompletionSlots for it.
//
// The contract is cuda/primitives/completion.cuh: a launch carries the device alias of two host-
// mapped 64-bit words (done[0] = published sequence number, done[1] = failure reason) and two zeroed
// device words for the grid's arrival count. Each device gets one pinned area of kSlots slots; a
// launch holds a slot until its Promise settles. JS reads the words through a zero-copy view with
// plain loads, re-polling with setImmediate: no FFI call per poll.
import { ArgumentError, TimeoutError, WeftError } from "../errors.ts";
import { check, native, outPointer, viewNative } from "../native.ts";

const kSlots = 64;
const kFailedBit = 1n << 63n;

interface DeviceArea {
  doneHost: BigUint64Array; // [2 * kSlots]: done[0], done[1] per slot
  doneDevice: number; // device alias of doneHost
  arrivals: number; // device memory, 2 x u32 per slot, zero between launches
  free: number[];
}

const areas = new Map<number, DeviceArea>();
let nextSeq = 1n;

function area(device: number): DeviceArea {
  let a = areas.get(device);
  if (a) return a;
  const host = new BigUint64Array(1);
  const dev = new BigUint64Array(1);
  check(native().weft_host_alloc(16 * kSlots, host, dev), "completion slots");
  const arr = new BigUint64Array(1);
  check(native().weft_malloc(device, 8 * kSlots, arr), "completion slots");
  check(native().weft_memset(outPointer(arr), 0, 8 * kSlots, null), "completion slots");
  // Lives for the process: kernels may still be writing the words when JS lets go of a slot.
  a = {
    doneHost: new BigUint64Array(viewNative(outPointer(host), 16 * kSlots)),
    doneDevice: outPointer(dev),
    arrivals: outPointer(arr),
    free: Array.from({ length: kSlots }, (_, i) => kSlots - 1 - i),
  };
  areas.set(device, a);
  return a;
}

/** One launch's completion words: pass done/seq/arrivals in the op's params, then await wait(). */
export interface CompletionSlot {
  done: number;
  arrivals: number;
  seq: bigint;
  /** Resolves when the kernel published seq; rejects on a device-side failure or after timeoutMs. */
  wait(op: string, timeoutMs: number): Promise<void>;
  /** Gives the slot back without waiting (the launch failed on the host, so nothing will write it). */
  release(): void;
}

export function acquireCompletionSlot(device: number, op: string): CompletionSlot {
  const a = area(device);
  const index = a.free.pop();
  if (index === undefined) {
    throw new ArgumentError(op, "(concurrency)", `allows at most ${kSlots} outstanding launches per device; await some first`);
  }
  const seq = nextSeq++;
  let released = false;
  const release = () => {
    if (!released) {
      released = true;
      a.free.push(index);
    }
  };
  return {
    done: a.doneDevice + 16 * index,
    arrivals: a.arrivals + 8 * index,
    seq,
    release,
    async wait(opName: string, timeoutMs: number) {
      // A slot whose kernel never reported stays taken: the kernel may still write it later.
      const published = await awaitCompletionWord(a.doneHost, 2 * index, seq, opName, timeoutMs, release);
      if (published) release();
    },
  };
}

/** Polls words[index] until it reaches seq (plain loads, setImmediate between polls). Resolves true
 * once published; throws the device's failure (after calling onPublished) or a TimeoutError. */
export async function awaitCompletionWord(words: BigUint64Array, index: number, seq: bigint, op: string,
  timeoutMs: number, onPublished: () => void = () => {}): Promise<true> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = words[index]!;
    if ((v & ~kFailedBit) >= seq) {
      if (v & kFailedBit) {
        onPublished();
        const reason = words[index + 1]!;
        const code = Number(reason & 0xffffffffn);
        const stage = Number(reason >> 32n);
        const what = code === 1 ? "a shared-memory barrier wait timed out" : code === 2 ? "a hook's signal wait timed out" : `code ${code}`;
        throw new (code === 1 || code === 2 ? TimeoutError : WeftError)(
          `the kernel reported a failure: ${what} (stage ${stage})`, { code: code === 1 || code === 2 ? "E_TIMEOUT" : "E_INTERNAL", op });
      }
      return true;
    }
    if (performance.now() > deadline) {
      throw new TimeoutError(`no completion after ${timeoutMs} ms (sequence ${seq})`, { code: "E_TIMEOUT", op });
    }
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}
