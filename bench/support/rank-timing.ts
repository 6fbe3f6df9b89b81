// rank-timing.ts — how bench/tp.ts and tp-split.ts time and check launches that span
// the ranks of one process (one stream per rank): CUDA-event time of back-to-back loops (the slower
// rank counts), variants alternated sample by sample (the card's clocks drift under its power cap),
// the host's time per launch, and an output's relative error.
//
// Each loop starts behind one untimed launch of the same work (`lead`): the GPUs are busy with it
// while the host enqueues the loop, so the loop measures back-to-back GPU time, as in a steady
// stream of launches, whatever the loop's length. (From an idle GPU the first launch's host enqueue
// is inside the loop too. For our ops that measured within noise; for torch's fused ops, timed the
// same way in bench/peers/torch_tp.py, it was 0.05-0.17 ms of Python: bench/DECISIONS.md, "Loops
// are timed behind one untimed launch".)
import { check, native } from "../../lib/native.ts";
import { Event, type Stream } from "../../lib/stream.ts";
import { Tensor } from "../../lib/tensor.ts";

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export class RankTiming {
  readonly streams: readonly Stream[];
  /** Record an event after every launch, so that no kernel overlaps its predecessor. */
  serial = false;
  /** One untimed launch before the start events; false times from an idle GPU, the first launch's
   * host enqueue (both ranks', one after the other) inside the loop. */
  lead = true;
  /** ms of idle GPU before every loop (tp.ts's --rest-ms: without it back-to-back loops hold the
   * card at its power cap, ~1650 MHz against 1980: bench/DECISIONS.md, "Both harnesses rest 2 ms
   * before every sample"). */
  restMs = 0;
  readonly #events: (readonly [Event, Event])[];
  readonly #gaps: Event[];
  readonly #scratch: Tensor[];

  constructor(streams: readonly Stream[]) {
    this.streams = streams;
    this.#events = streams.map((s) => [Event.create(s.device), Event.create(s.device)] as const);
    this.#gaps = streams.map((s) => Event.create(s.device));
    this.#scratch = streams.map((s) => Tensor.empty([6], "f32", { device: s.device }));
  }

  /** ms per launch (slower rank) over a back-to-back loop of `iters` launches. */
  loopMs(issue: () => void, iters: number): number {
    return Math.max(...this.loopMsPerRank(issue, iters));
  }

  /** Each rank's own ms per launch over a back-to-back loop of `iters` launches. */
  loopMsPerRank(issue: () => void, iters: number): number[] {
    if (this.restMs > 0) {
      this.streams.forEach((s) => s.synchronize());
      Bun.sleepSync(this.restMs);
    }
    if (this.lead) issue();
    this.streams.forEach((s, r) => this.#events[r]![0].record(s));
    for (let i = 0; i < iters; i++) {
      issue();
      if (this.serial) this.streams.forEach((s, r) => this.#gaps[r]!.record(s));
    }
    this.streams.forEach((s, r) => this.#events[r]![1].record(s));
    this.#events.forEach(([, e]) => e.synchronize());
    return this.#events.map(([a, b]) => b.elapsedSince(a) / iters);
  }

  /** Each issue's median ms over `samples` loops of about `loopMs` ms (at most `maxIters`
   * launches), the issues alternating sample by sample. */
  timeAll(issues: readonly (() => void)[], samples: number, loopMs: number, maxIters: number): number[] {
    const iters = issues.map((issue) => {
      issue();
      const once = this.loopMs(issue, 1);
      return Math.max(1, Math.min(maxIters, Math.ceil(loopMs / Math.max(once, 1e-3))));
    });
    const times = issues.map(() => [] as number[]);
    for (let s = 0; s < samples; s++) issues.forEach((issue, i) => times[i]!.push(this.loopMs(issue, iters[i]!)));
    return times.map(median);
  }

  /** Host ms per issue() over 50 issues: when it nears the GPU time, a loop measures the host, not
   * the kernel (or the host blocks on a full launch queue). */
  hostMs(issue: () => void): number {
    const t0 = performance.now();
    for (let i = 0; i < 50; i++) issue();
    const ms = (performance.now() - t0) / 50;
    this.streams.forEach((s) => s.synchronize());
    return ms;
  }

  /** Releases its events and scratch. */
  dispose(): void {
    for (const [a, b] of this.#events) { a.dispose(); b.dispose(); }
    this.#gaps.forEach((e) => e.dispose());
    this.#scratch.forEach((t) => t.dispose());
  }

  /** ‖x − ref‖ / ‖ref‖ over ref's elements on rank r's device (x may be longer); NaN when x holds
   * a non-finite value there. */
  relError(x: Tensor, ref: Tensor, r: number): number {
    const scratch = this.#scratch[r]!;
    check(native().weft_diff_norms(x.ptr, 0, ref.ptr, 0, ref.numel, scratch.ptr, null), "relError");
    const d = new Float64Array((scratch.download() as Float32Array).buffer, 0, 3);
    return d[2]! > 0 ? NaN : Math.sqrt(d[0]!) / Math.sqrt(d[1]!);
  }
}
