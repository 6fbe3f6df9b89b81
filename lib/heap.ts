// heap.ts — the symmetric heap's allocator and the tensors it hands out (DESIGN.md "Memory,
// peers, signals"). Every rank owns an arena of the same size; allocation is collective in the
// sense that every rank makes the same sequence of empty()/dispose() calls, so the deterministic
// first-fit below gives every tensor the same offset on every rank. A peer then finds rank r's copy
// at peerBase[r] + offset. The kernels check this: a collective whose ranks disagree (count, dtype,
// call order) fails with an error instead of touching the wrong bytes.
import type { DType } from "./dtype.ts";
import { ArgumentError, OutOfMemoryError } from "./errors.ts";
import { Tensor, type Shape } from "./tensor.ts";

/** Allocations start on 256-byte boundaries: 16-byte vector and TMA alignment with room to spare. */
export const HEAP_ALIGNMENT = 256;

/** First-fit over a sorted free list: the same call sequence gives the same offsets everywhere. */
export class HeapAllocator {
  readonly bytes: number;
  /** Free ranges [offset, offset + size), sorted by offset, never adjacent. */
  readonly #free: { offset: number; size: number }[];

  constructor(bytes: number) {
    this.bytes = bytes;
    this.#free = [{ offset: 0, size: bytes }];
  }

  alloc(size: number, op: string): number {
    const need = Math.ceil(size / HEAP_ALIGNMENT) * HEAP_ALIGNMENT;
    const i = this.#free.findIndex((r) => r.size >= need);
    if (i < 0) {
      throw new OutOfMemoryError(`the symmetric heap has no free range of ${need} bytes (${this.freeBytes} of ${this.bytes} bytes free, ` +
        `largest range ${this.largestFree}); create the communicator with a larger heapBytes`, { code: "E_OOM", op });
    }
    const r = this.#free[i]!;
    const offset = r.offset;
    r.offset += need;
    r.size -= need;
    if (r.size === 0) this.#free.splice(i, 1);
    return offset;
  }

  free(offset: number, size: number): void {
    const need = Math.ceil(size / HEAP_ALIGNMENT) * HEAP_ALIGNMENT;
    let i = this.#free.findIndex((r) => r.offset > offset);
    if (i < 0) i = this.#free.length;
    this.#free.splice(i, 0, { offset, size: need });
    // Merge with the following, then the preceding range.
    const cur = this.#free[i]!;
    const next = this.#free[i + 1];
    if (next && cur.offset + cur.size === next.offset) {
      cur.size += next.size;
      this.#free.splice(i + 1, 1);
    }
    const prev = this.#free[i - 1];
    if (prev && prev.offset + prev.size === cur.offset) {
      prev.size += cur.size;
      this.#free.splice(i, 1);
    }
  }

  get freeBytes(): number {
    return this.#free.reduce((a, r) => a + r.size, 0);
  }

  get largestFree(): number {
    return this.#free.reduce((a, r) => Math.max(a, r.size), 0);
  }
}

/** What a symmetric tensor needs from the heap that owns it (the Communicator). */
export interface SymmetricOwner {
  readonly heapBase: number;
  release(offset: number, bytes: number): void;
}

/**
 * A tensor in the symmetric heap: the same offset on every rank, so peers read and write it
 * directly. Get one from `comm.empty(shape, dtype)`; dispose() returns its range to the heap
 * (every rank must dispose in the same order, as they allocate in the same order).
 */
export class SymmetricTensor extends Tensor {
  /** Byte offset from the start of the heap: the same on every rank. */
  readonly offset: number;
  readonly owner: SymmetricOwner;

  /** @internal Communicator.empty() is the way to make one. */
  constructor(owner: SymmetricOwner, offset: number, shape: Shape, dtype: DType, device: number) {
    super(owner.heapBase + offset, shape, dtype, device, false);
    this.owner = owner;
    this.offset = offset;
  }

  /** Gives the range back to the heap (the memory is the communicator's). */
  protected override destroy(): void {
    this.owner.release(this.offset, this.bytes);
  }

  override toString(): string {
    return `SymmetricTensor([${this.shape.join(", ")}], ${this.dtype}, device ${this.device}, offset ${this.offset}${this.disposed ? ", disposed" : ""})`;
  }
}

/** Throws ArgumentError unless `t` is a symmetric tensor of `owner`. */
export function requireSymmetric(t: Tensor, owner: SymmetricOwner, op: string, argument: string): SymmetricTensor {
  if (!(t instanceof SymmetricTensor)) {
    throw new ArgumentError(op, argument, `must be a symmetric tensor from this communicator's empty() (got a ${t?.constructor?.name ?? typeof t}): ` +
      `peers read or write it directly, at the same offset on every rank`);
  }
  if (t.owner !== owner) throw new ArgumentError(op, argument, "is a symmetric tensor of another communicator");
  return t;
}
