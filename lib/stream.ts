// stream.ts — CUDA streams and events as handle classes, for stream-ordered work and timing.
import { requireDevice } from "./device.ts";
import { ArgumentError } from "./errors.ts";
import { NativeHandle } from "./handle.ts";
import { check, checkedOut, native, offThread } from "./native.ts";

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));
const aMillisecond = () => new Promise<void>((resolve) => setTimeout(resolve, 1));

/** How each kind of device handle's native object is made and freed. */
const NATIVE_CALLS = {
  Stream: {
    create: (device: number, out: BigUint64Array) => native().weft_stream_create(device, out),
    destroy: (handle: number) => native().weft_stream_destroy(handle),
  },
  Event: {
    create: (device: number, out: BigUint64Array) => native().weft_event_create(device, out),
    destroy: (handle: number) => native().weft_event_destroy(handle),
  },
};

/** A stream or event: a native handle on one device. */
abstract class DeviceHandle extends NativeHandle {
  readonly device: number;
  readonly #kind: keyof typeof NATIVE_CALLS;

  /** Creates a `kind` on `device`; errors name `${kind}.create`. */
  protected constructor(kind: keyof typeof NATIVE_CALLS, device: number) {
    const op = `${kind}.create`;
    requireDevice(device, op);
    const handle = checkedOut(op, (out) => NATIVE_CALLS[kind].create(device, out));
    super(handle, `${kind} on device ${device}`, "it stays allocated until the process exits");
    this.device = device;
    this.#kind = kind;
  }

  protected destroy(h: number): void {
    check(NATIVE_CALLS[this.#kind].destroy(h), `${this.#kind}.dispose`);
  }

  get handle(): number {
    return this.pointerFor(`${this.constructor.name}.handle`);
  }
}

/** A non-blocking CUDA stream on one device. */
export class Stream extends DeviceHandle {
  static create(device = 0): Stream {
    return new Stream("Stream", device);
  }

  synchronize(): void {
    check(native().weft_stream_synchronize(this.handle), "Stream.synchronize");
  }

  /** Resolves once all work queued so far has finished, without blocking the event loop. Under
   * Deno the blocking wait runs on a worker thread (a nonblocking FFI call); under Bun, which has
   * none, it polls weft_stream_query, every event-loop turn for the first 64 polls, then every
   * millisecond. Rejects with what synchronize() would throw. */
  async synchronizeAsync(): Promise<void> {
    const handle = this.handle;
    const off = offThread();
    if (off) {
      if ((await off.weft_stream_synchronize(handle)) === 0) return;
    } else {
      const done = new Int32Array(1);
      for (let polls = 0; native().weft_stream_query(handle, done) === 0 && done[0] !== 1; polls++) {
        await (polls < 64 ? nextTurn() : aMillisecond());
      }
      if (done[0] === 1) return;
    }
    // It failed: the synchronous call returns at once now that the work has ended, and leaves its
    // message in this thread's weft_last_error (a worker thread's is not readable from here).
    this.synchronize();
  }

  /** true when all work queued so far has finished. */
  done(): boolean {
    const out = new Int32Array(1);
    check(native().weft_stream_query(this.handle, out), "Stream.done");
    return out[0] === 1;
  }
}

/** A CUDA event, for timing stream work. */
export class Event extends DeviceHandle {
  static create(device = 0): Event {
    return new Event("Event", device);
  }

  record(stream: Stream | null = null): this {
    if (stream && stream.device !== this.device) {
      throw new ArgumentError("Event.record", "stream", `is on device ${stream.device} but the event is on device ${this.device}`);
    }
    check(native().weft_event_record(this.handle, stream ? stream.handle : null), "Event.record");
    return this;
  }

  synchronize(): void {
    check(native().weft_event_synchronize(this.handle), "Event.synchronize");
  }

  /** Milliseconds from `start` to this event; both must have completed. */
  elapsedSince(start: Event): number {
    const out = new Float32Array(1);
    check(native().weft_event_elapsed(start.handle, this.handle, out), "Event.elapsedSince");
    return out[0]!;
  }
}
