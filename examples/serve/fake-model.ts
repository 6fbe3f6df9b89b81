// fake-model.ts — a deterministic CPU stand-in for the decoder, so that the HTTP layer, continuous
// batching, streaming and every error path run and are tested on a machine with no GPU.
//
// It "echoes": the g-th generated token of a sequence is the g-th byte of its prompt, cycling (BOS
// skipped), and EOS after `eosAfter` tokens when set. It keeps each slot's prompt and checks every
// decode entry against what it produced for that slot before, so a scheduler that mixed slots up,
// skipped a step or reused a slot without a prefill fails loudly instead of passing.
import type { DecodeEntry, Model, ModelInfo, StepInput, StepOutput } from "./model.ts";
import { BYTE_VOCAB, EOS } from "./tokenizer.ts";

export interface FakeModelOptions {
  slots?: number;
  contextLength?: number;
  /** Wall time of every step, ms (default 2): lets requests overlap and join running batches. */
  stepMs?: number;
  /** End every sequence with EOS after this many generated tokens (default: never). */
  eosAfter?: number;
  /** Fail the step with this 0-based index (tests of the error path). */
  failAtStep?: number;
}

interface SlotState {
  prompt: Int32Array;
  produced: number[];
}

/** What the fake model generates for a prompt's token ids. */
export function fakeToken(prompt: ArrayLike<number>, generated: number, eosAfter?: number): number {
  if (eosAfter !== undefined && generated >= eosAfter) return EOS;
  const body = prompt.length > 1 ? prompt.length - 1 : 1;
  return prompt.length > 1 ? prompt[1 + (generated % body)]! : 0;
}

export class FakeModel implements Model {
  readonly info: ModelInfo;
  readonly #slots: (SlotState | undefined)[];
  readonly #stepMs: number;
  readonly #eosAfter?: number;
  readonly #failAtStep?: number;
  /** Steps run, and the largest decode batch seen (tests check that batching happened). */
  steps = 0;
  maxDecodeBatch = 0;
  #disposed = false;

  constructor(opts: FakeModelOptions = {}) {
    const slots = opts.slots ?? 8;
    const contextLength = opts.contextLength ?? 256;
    this.info = {
      name: "fake-echo", contextLength, slots, maxPrefillTokens: Math.max(contextLength, 1), vocab: BYTE_VOCAB, eosToken: EOS,
      world: 1, description: "CPU fake model (echoes its prompt; no GPU)",
    };
    this.#slots = new Array(slots).fill(undefined);
    this.#stepMs = opts.stepMs ?? 2;
    this.#eosAfter = opts.eosAfter;
    this.#failAtStep = opts.failAtStep;
  }

  async step(input: StepInput): Promise<StepOutput> {
    if (this.#disposed) throw new Error("FakeModel: step after dispose");
    const index = this.steps++;
    if (this.#stepMs > 0) await Bun.sleep(this.#stepMs);
    if (index === this.#failAtStep) throw new Error(`FakeModel: injected failure at step ${index}`);
    const seen = new Set<number>();
    const claim = (slot: number) => {
      if (!Number.isInteger(slot) || slot < 0 || slot >= this.info.slots) throw new Error(`FakeModel: slot ${slot} out of range`);
      if (seen.has(slot)) throw new Error(`FakeModel: slot ${slot} twice in one step`);
      seen.add(slot);
    };
    const prefill = new Int32Array(input.prefill.length);
    input.prefill.forEach((e, i) => {
      claim(e.slot);
      if (this.#slots[e.slot]) throw new Error(`FakeModel: prefill into slot ${e.slot}, which holds a sequence (not released)`);
      if (e.tokens.length >= this.info.contextLength) throw new Error(`FakeModel: prompt of ${e.tokens.length} tokens`);
      const s: SlotState = { prompt: Int32Array.from(e.tokens), produced: [] };
      this.#slots[e.slot] = s;
      prefill[i] = this.#next(s);
    });
    this.maxDecodeBatch = Math.max(this.maxDecodeBatch, input.decode.length);
    const decode = new Int32Array(input.decode.length);
    input.decode.forEach((e, i) => {
      claim(e.slot);
      decode[i] = this.#next(this.#check(e));
    });
    return { prefill, decode };
  }

  #check(e: DecodeEntry): SlotState {
    const s = this.#slots[e.slot];
    if (!s) throw new Error(`FakeModel: decode in slot ${e.slot}, which was never prefilled`);
    const expectPos = s.prompt.length + s.produced.length - 1;
    const expectTok = s.produced[s.produced.length - 1];
    if (e.position !== expectPos || e.token !== expectTok) {
      throw new Error(`FakeModel: slot ${e.slot} decodes token ${e.token} at ${e.position}, but its sequence has ${expectTok} at ${expectPos}`);
    }
    if (e.position + 1 >= this.info.contextLength) throw new Error(`FakeModel: slot ${e.slot} past the context`);
    return s;
  }

  #next(s: SlotState): number {
    const t = fakeToken(s.prompt, s.produced.length, this.#eosAfter);
    s.produced.push(t);
    return t;
  }

  release(slot: number): void {
    this.#slots[slot] = undefined;
  }

  async dispose(): Promise<void> {
    this.#disposed = true;
  }
}
