// handle.ts — the one base of every class that owns a native object (DESIGN.md "TypeScript layer"):
// a private pointer, guard() that throws DisposedError after dispose(), an idempotent dispose()
// whose errors always reach the caller, `using` / `await using`, and the one leak registry.
//
// Leaks are reported, never cleaned up behind the user's back: freeing device memory or a
// communicator from a GC callback could race with kernels that still use it.
import { DisposedError, UnsupportedError } from "./errors.ts";

const leaks = new FinalizationRegistry<string>((warning) => console.warn(warning));

const ADVICE = "Call dispose() or declare it with `using`.";

/**
 * A native object owned by JS. Subclasses pass what it is (for errors and the leak warning) and
 * implement destroy(), which runs once, on the first dispose(). `Teardown` is `Promise<void>` for
 * an object whose teardown is collective (the Communicator): its dispose() returns the same
 * Promise on every call, and it is disposed with `await using`.
 */
export abstract class NativeHandle<Teardown extends void | Promise<void> = void> implements Disposable, AsyncDisposable {
  #pointer: number;
  #disposed = false;
  #teardown: Teardown | undefined;
  readonly #what: string;

  /**
   * @param pointer the native address (or index) this object owns
   * @param what    e.g. "Tensor [4, 8] bf16 on device 0"
   * @param leak    what stays allocated when it is garbage-collected undisposed ("its device memory
   *                stays allocated until the process exits"), or null for an object that owns
   *                nothing (a wrapped pointer): no warning then
   * @param advice  how to dispose it, for the warning
   */
  protected constructor(pointer: number, what: string, leak: string | null, advice = ADVICE) {
    this.#pointer = pointer;
    this.#what = what;
    if (leak !== null) leaks.register(this, `weft: ${what} was garbage-collected without dispose(): ${leak}. ${advice}`, this);
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  /** Throws DisposedError (naming `op`) once dispose() has started. */
  guard(op: string): void {
    if (this.#disposed) throw new DisposedError(op, this.#what);
  }

  /** The native pointer, for a call made by `op`; DisposedError after dispose(). */
  protected pointerFor(op: string): number {
    if (this.#disposed) throw new DisposedError(op, this.#what);
    return this.#pointer;
  }

  /** Releases the native object. Runs once; whatever it throws (or rejects with) reaches the
   * caller of that first dispose(). */
  protected abstract destroy(pointer: number): Teardown;

  /** Releases the native object; later calls do nothing (and return the first call's Promise). */
  dispose(): Teardown {
    if (!this.#disposed) {
      this.#disposed = true;
      leaks.unregister(this);
      const pointer = this.#pointer;
      this.#pointer = 0;
      this.#teardown = this.destroy(pointer);
    }
    return this.#teardown as Teardown;
  }

  /** Marks the object disposed without destroy(): its owner already released the native side
   * (a Region whose transport closed). */
  protected abandon(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    leaks.unregister(this);
    this.#pointer = 0;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return Promise.resolve(this.dispose());
  }

  /** For handles with a collective teardown: `using` cannot wait for it, so it is refused before
   * anything is torn down. */
  protected refuseSyncDispose(op: string): never {
    throw new UnsupportedError(`${this.#what} is torn down collectively and asynchronously: ` +
      "declare it with `await using`, or call `await dispose()` on every rank", { code: "E_UNSUPPORTED", op });
  }
}

/** Runs every teardown step even when an earlier one fails, then reports: one failure as itself,
 * several as an AggregateError holding all of them (none is dropped). */
export function teardown(op: string, steps: readonly (() => void)[]): void {
  const errors: unknown[] = [];
  for (const step of steps) {
    try {
      step();
    } catch (e) {
      errors.push(e);
    }
  }
  raise(op, errors);
}

/** teardown() for steps that may be async; they run one after another. */
export async function teardownAsync(op: string, steps: readonly (() => unknown)[]): Promise<void> {
  const errors: unknown[] = [];
  for (const step of steps) {
    try {
      await step();
    } catch (e) {
      errors.push(e);
    }
  }
  raise(op, errors);
}

function raise(op: string, errors: unknown[]): void {
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) {
    throw new AggregateError(errors, `${op}: ${errors.length} teardown steps failed: ` +
      errors.map((e) => (e instanceof Error ? e.message : String(e))).join("; "));
  }
}
