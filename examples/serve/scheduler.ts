// scheduler.ts — continuous batching over a Model (model.ts).
//
// Requests wait in a bounded FIFO for a KV-cache slot. The loop runs one model step at a time, and
// only between steps does anything change: sequences whose clients went away leave and free their
// slots, waiting requests take free slots and are prefilled (up to the model's prefill budget) in
// the same step that advances every running sequence by one token, finished sequences leave. A
// finished sequence's slot is free before its last event reaches the client, so a client that sends
// its next request at once never meets a full cache because of itself.
import type { Metrics } from "./metrics.ts";
import type { Model, Sampling } from "./model.ts";
import { StreamDecoder } from "./tokenizer.ts";

export interface GenerationRequest {
  /** Token ids of the prompt (BOS first). */
  prompt: Int32Array;
  maxTokens: number;
  sampling: Sampling;
  /** Strings that end the completion (not included in it). */
  stop?: string[];
}

export type FinishReason = "stop" | "length" | "cancelled";

export interface GenerationResult {
  text: string;
  /** The end of `text` that no token event carried (held back, or an unfinished character). */
  tail: string;
  tokens: number[];
  finishReason: FinishReason;
  promptTokens: number;
  completionTokens: number;
}

export interface TokenEvent {
  token: number;
  /** Text this token releases: "" mid-character or while it may begin a stop string. */
  text: string;
}

/** The request cannot be queued: every slot is taken and the queue is full (HTTP 429). */
export class QueueFullError extends Error {
  constructor(readonly retryAfterSeconds: number, detail: string) {
    super(detail);
  }
}
/** The prompt does not fit the context (HTTP 413). */
export class PromptTooLongError extends Error {}
/** The server is shutting down and takes no new requests (HTTP 503). */
export class ShuttingDownError extends Error {}
/** The model failed while this request was in it (HTTP 500). */
export class ModelFailedError extends Error {}

let nextId = 1;

/** One request's life: events while it runs, and `done` at the end. */
export class Generation {
  readonly id = `cmpl-${Date.now().toString(36)}-${(nextId++).toString(36)}`;
  readonly promptTokens: number;
  /** Called once per generated token (not for EOS), in order. */
  onToken: ((e: TokenEvent) => void) | undefined;
  readonly done: Promise<GenerationResult>;
  #cancelled = false;
  #settled = false;
  #resolve!: (r: GenerationResult) => void;
  #reject!: (e: Error) => void;
  /** @internal the scheduler's hook for cancel() */
  onCancel: (() => void) | undefined;

  constructor(promptTokens: number) {
    this.promptTokens = promptTokens;
    this.done = new Promise((res, rej) => {
      this.#resolve = res;
      this.#reject = rej;
    });
    this.done.catch(() => {});  // a failure is also reported to whoever awaits done
  }

  get cancelled(): boolean {
    return this.#cancelled;
  }

  /** The client is gone: the sequence leaves at the next step boundary and frees its slot. */
  cancel(): void {
    if (this.#cancelled || this.#settled) return;
    this.#cancelled = true;
    this.onCancel?.();
  }

  /** @internal */
  settle(r: GenerationResult | Error): void {
    if (this.#settled) return;
    this.#settled = true;
    if (r instanceof Error) this.#reject(r);
    else this.#resolve(r);
  }
}

interface Sequence {
  gen: Generation;
  req: GenerationRequest;
  maxTokens: number;
  slot: number;
  tokens: number[];
  /** Position of the latest token (prompt length - 1 before the first generated one). */
  position: number;
  decoder: StreamDecoder;
  text: string;
  /** Decoded text held back because it may begin a stop string. */
  held: string;
  arrival: number;
  lastTokenAt: number;
}

export interface SchedulerOptions {
  /** Requests that may wait for a slot beyond the free ones (default: the model's slot count). */
  maxWaiting?: number;
  /** Seconds a 429 tells the client to wait (default 1). */
  retryAfterSeconds?: number;
}

export class Scheduler {
  readonly model: Model;
  readonly #metrics: Metrics;
  readonly #maxWaiting: number;
  readonly #retryAfter: number;
  readonly #free: number[];
  readonly #waiting: Sequence[] = [];
  readonly #running = new Map<number, Sequence>();
  #loop: Promise<void> | undefined;
  #draining = false;
  #failure: Error | undefined;

  constructor(model: Model, metrics: Metrics, opts: SchedulerOptions = {}) {
    this.model = model;
    this.#metrics = metrics;
    this.#maxWaiting = opts.maxWaiting ?? model.info.slots;
    this.#retryAfter = opts.retryAfterSeconds ?? 1;
    this.#free = Array.from({ length: model.info.slots }, (_, i) => i);
    metrics.cache = { slotsUsed: 0, slots: model.info.slots, ratio: 0 };
  }

  get running(): number {
    return this.#running.size;
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  get draining(): boolean {
    return this.#draining;
  }

  /** Why the model stopped serving, if it did. */
  get failure(): Error | undefined {
    return this.#failure;
  }

  /** Queues a request; throws PromptTooLongError, QueueFullError, ShuttingDownError or ModelFailedError. */
  submit(req: GenerationRequest): Generation {
    const info = this.model.info;
    if (this.#failure) throw new ModelFailedError(`the model failed earlier and serves no more requests: ${this.#failure.message}`);
    if (this.#draining) throw new ShuttingDownError("the server is shutting down and takes no new requests");
    if (req.prompt.length >= info.contextLength) {
      throw new PromptTooLongError(`the prompt is ${req.prompt.length} tokens but the context holds ${info.contextLength} ` +
        `(prompt and completion together; at most ${info.contextLength - 1} prompt tokens)`);
    }
    if (this.#waiting.length >= this.#free.length + this.#maxWaiting) {
      throw new QueueFullError(this.#retryAfter, `the KV cache is full: ${info.slots} sequences are running and ` +
        `${this.#waiting.length} requests wait; retry after ${this.#retryAfter} s`);
    }
    const gen = new Generation(req.prompt.length);
    const now = performance.now();
    const seq: Sequence = {
      gen, req, maxTokens: Math.min(req.maxTokens, info.contextLength - req.prompt.length), slot: -1, tokens: [],
      position: req.prompt.length - 1, decoder: new StreamDecoder(), text: "", held: "", arrival: now, lastTokenAt: now,
    };
    gen.onCancel = () => {
      const i = this.#waiting.indexOf(seq);
      if (i >= 0) {
        this.#waiting.splice(i, 1);
        this.#metrics.waiting = this.#waiting.length;
        this.#settle(seq, "cancelled");
      }
      // A running sequence leaves at the next step boundary (the loop sees gen.cancelled).
    };
    this.#waiting.push(seq);
    this.#metrics.waiting = this.#waiting.length;
    this.#loop ??= this.#run().finally(() => {
      this.#loop = undefined;
    });
    return gen;
  }

  /** Stops taking requests and resolves when every accepted one has finished; after `timeoutMs`
   * the rest are cancelled. */
  async drain(timeoutMs = 60_000): Promise<void> {
    this.#draining = true;
    if (!this.#loop) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<void>((res) => {
      timer = setTimeout(() => {
        for (const s of [...this.#waiting, ...this.#running.values()]) s.gen.cancel();
        res();
      }, timeoutMs);
    });
    await Promise.race([this.#loop, late]);
    await this.#loop;
    clearTimeout(timer);
  }

  async #run(): Promise<void> {
    const info = this.model.info;
    while (this.#running.size > 0 || this.#waiting.length > 0) {
      for (const s of [...this.#running.values()]) if (s.gen.cancelled) this.#finish(s, "cancelled");
      const decode = [...this.#running.values()];
      const admitted: Sequence[] = [];
      let budget = info.maxPrefillTokens;
      while (this.#waiting.length > 0 && this.#free.length > 0 && this.#waiting[0]!.req.prompt.length <= budget) {
        const s = this.#waiting.shift()!;
        s.slot = this.#free.shift()!;
        budget -= s.req.prompt.length;
        admitted.push(s);
        this.#running.set(s.slot, s);
      }
      this.#metrics.waiting = this.#waiting.length;
      if (admitted.length === 0 && decode.length === 0) break;
      this.#metrics.promptTokens += admitted.reduce((a, s) => a + s.req.prompt.length, 0);
      const t0 = performance.now();
      let out;
      try {
        out = await this.model.step({
          prefill: admitted.map((s) => ({ slot: s.slot, tokens: s.req.prompt, sampling: s.req.sampling })),
          decode: decode.map((s) => ({ slot: s.slot, token: s.tokens[s.tokens.length - 1]!, position: s.position, sampling: s.req.sampling })),
        });
      } catch (e) {
        this.#fail(e as Error);
        return;
      }
      const now = performance.now();
      this.#metrics.stepSeconds.add((now - t0) / 1000);
      if (decode.length > 0) {
        this.#metrics.batch.add(decode.length);
        this.#metrics.lastBatch = decode.length;
      }
      admitted.forEach((s, i) => this.#accept(s, out.prefill[i]!, now));
      decode.forEach((s, i) => this.#accept(s, out.decode[i]!, now));
      this.#updateCache();
    }
    this.#metrics.running = this.#running.size;
    this.#metrics.lastBatch = 0;
  }

  #accept(s: Sequence, token: number, now: number): void {
    if (s.gen.cancelled) {
      this.#finish(s, "cancelled");
      return;
    }
    s.tokens.push(token);
    s.position++;
    if (s.tokens.length === 1) this.#metrics.ttft.add((now - s.arrival) / 1000);
    else this.#metrics.interToken.add((now - s.lastTokenAt) / 1000);
    s.lastTokenAt = now;
    this.#metrics.tokens(1, now);
    if (token === this.model.info.eosToken) {
      this.#finish(s, "stop");
      return;
    }
    const { text, stopped } = this.#release(s, s.decoder.push(token));
    s.text += text;
    this.#emit(s, { token, text });
    if (stopped) this.#finish(s, "stop", true);
    else if (s.tokens.length >= s.maxTokens) this.#finish(s, "length");
  }

  /** New decoded text against the stop strings: what may go out now, and whether one was hit. */
  #release(s: Sequence, text: string): { text: string; stopped: boolean } {
    const stops = s.req.stop ?? [];
    if (stops.length === 0) return { text, stopped: false };
    const window = s.held + text;
    let at = -1;
    for (const stop of stops) {
      const i = window.indexOf(stop);
      if (i >= 0 && (at < 0 || i < at)) at = i;
    }
    if (at >= 0) {
      s.held = "";
      return { text: window.slice(0, at), stopped: true };
    }
    // Hold back the longest tail that begins some stop string.
    let keep = 0;
    for (const stop of stops) {
      for (let n = Math.min(stop.length - 1, window.length); n > keep; n--) {
        if (window.endsWith(stop.slice(0, n))) {
          keep = n;
          break;
        }
      }
    }
    s.held = window.slice(window.length - keep);
    return { text: window.slice(0, window.length - keep), stopped: false };
  }

  #emit(s: Sequence, e: TokenEvent): void {
    try {
      s.gen.onToken?.(e);
    } catch {
      s.gen.cancel();  // the client's stream is gone
    }
  }

  /** The sequence leaves: its slot is free before the client hears of the end. */
  #finish(s: Sequence, reason: FinishReason, atStopString = false): void {
    this.#running.delete(s.slot);
    this.model.release(s.slot);
    this.#free.push(s.slot);
    this.#free.sort((a, b) => a - b);
    this.#metrics.running = this.#running.size;
    this.#updateCache();
    // Text held back for a stop string that never came is text after all, unless a stop string ended it.
    const tail = reason === "cancelled" || atStopString ? "" : s.held + s.decoder.flush();
    s.text += tail;
    this.#settle(s, reason, tail);
  }

  #settle(s: Sequence, reason: FinishReason, tail = ""): void {
    s.gen.settle({
      text: s.text, tail, tokens: s.tokens, finishReason: reason, promptTokens: s.req.prompt.length, completionTokens: s.tokens.length,
    });
  }

  #fail(e: Error): void {
    this.#failure = e;
    this.#metrics.up = false;
    const err = new ModelFailedError(`the model failed: ${e.message}`);
    for (const s of [...this.#running.values(), ...this.#waiting]) s.gen.settle(err);
    this.#running.clear();
    this.#waiting.length = 0;
    this.#metrics.running = 0;
    this.#metrics.waiting = 0;
    this.#updateCache();
  }

  #updateCache(): void {
    const info = this.model.info;
    let held = 0;
    for (const s of this.#running.values()) held += s.position + 1;
    this.#metrics.running = this.#running.size;
    this.#metrics.cache = { slotsUsed: this.#running.size, slots: info.slots, ratio: held / (info.slots * info.contextLength) };
  }
}
