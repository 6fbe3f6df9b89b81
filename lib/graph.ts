// graph.ts — CUDA graphs: record what is enqueued on a stream once, replay it with one launch.
//
//   using g = CudaGraph.capture(comm.stream, () => { dispatch.enqueue(); combine.enqueue(); });
//   g.launch(comm.stream);           // replays both kernels; their epochs live on the device
//
// Only untracked launches (plan.enqueue(), gemmSync, ...) belong in a capture: a completion slot
// taken while capturing would be published by every replay. Wait for replays with the stream
// (stream.synchronize()) or anything ordered after them.
import { ArgumentError, DisposedError } from "./errors.ts";
import { check, native, outPointer } from "./native.ts";
import { Stream } from "./stream.ts";

const leaks = new FinalizationRegistry<string>((what) => {
  console.warn(`weft: ${what} was garbage-collected without dispose(). Call dispose() or declare it with \`using\`.`);
});

export class CudaGraph implements Disposable {
  readonly device: number;
  #exec: number;

  private constructor(exec: number, device: number) {
    this.#exec = exec;
    this.device = device;
    leaks.register(this, `CudaGraph on device ${device}`, this);
  }

  /** Captures the work `record` enqueues on `stream` (thread-local capture mode). When `record`
   * throws, the capture is ended and discarded and the error rethrown. */
  static capture(stream: Stream, record: () => void): CudaGraph {
    const op = "CudaGraph.capture";
    if (!(stream instanceof Stream)) throw new ArgumentError(op, "stream", "must be a Stream (the legacy default stream cannot be captured)");
    if (typeof record !== "function") throw new ArgumentError(op, "record", "must be a function that enqueues the work");
    check(native().weft_graph_capture_begin(stream.handle), op);
    const out = new BigUint64Array(1);
    try {
      record();
    } catch (e) {
      if (native().weft_graph_capture_end(stream.handle, out) === 0) native().weft_graph_destroy(outPointer(out));
      throw e;
    }
    check(native().weft_graph_capture_end(stream.handle, out), op);
    return new CudaGraph(outPointer(out), stream.device);
  }

  /** Replays the graph on `stream` (a stream of the same device); no wait. */
  launch(stream: Stream): void {
    const op = "CudaGraph.launch";
    if (this.#exec === 0) throw new DisposedError(op, "CudaGraph");
    if (!(stream instanceof Stream) || stream.device !== this.device) {
      throw new ArgumentError(op, "stream", `must be a Stream on device ${this.device}`);
    }
    check(native().weft_graph_launch(this.#exec, stream.handle), op);
  }

  dispose(): void {
    if (this.#exec === 0) return;
    const e = this.#exec;
    this.#exec = 0;
    leaks.unregister(this);
    check(native().weft_graph_destroy(e), "CudaGraph.dispose");
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
