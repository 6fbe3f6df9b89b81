// model.ts — the seam between the server (HTTP, continuous batching) and whatever computes tokens:
// the tensor-parallel decoder on GPUs (decoder.ts) or a deterministic CPU stand-in (fake-model.ts).
//
// The scheduler owns the slots: it gives each admitted sequence a slot in [0, info.slots) for its
// lifetime and runs steps. One step may prefill new sequences (their whole prompt) and advance
// running ones by one token each; the model returns one sampled token per entry, in order. The
// token drawn for a sequence is at position `prompt length` (prefill) or `position + 1` (decode),
// and that position is the sampling counter, so a seeded sequence is reproducible in any batch.

export interface ModelInfo {
  /** Shown by /health and /v1/completions' "model". */
  name: string;
  /** Positions one sequence may hold (prompt and generated tokens together). */
  contextLength: number;
  /** Sequences resident at once (KV-cache slots). */
  slots: number;
  /** Prompt tokens one step may prefill (at least contextLength - 1: any admissible prompt fits). */
  maxPrefillTokens: number;
  vocab: number;
  /** The token that ends a sequence (byte-level tokenizer: 257). */
  eosToken: number;
  /** Ranks the model runs on, and what computes it ("2 ranks on GPU 0, fused ops", "fake"). */
  world: number;
  description: string;
}

export interface Sampling {
  /** 0 = greedy. */
  temperature: number;
  topK: number;
  topP: number;
  seed: bigint;
}

export interface PrefillEntry {
  slot: number;
  /** The prompt's token ids, positions 0 ..< length. */
  tokens: Int32Array;
  sampling: Sampling;
}

export interface DecodeEntry {
  slot: number;
  /** The sequence's latest token, at `position`. */
  token: number;
  position: number;
  sampling: Sampling;
}

export interface StepInput {
  prefill: PrefillEntry[];
  decode: DecodeEntry[];
}

export interface StepOutput {
  /** One token per prefill entry, then one per decode entry, in the order given. */
  prefill: Int32Array;
  decode: Int32Array;
}

export interface Model {
  readonly info: ModelInfo;
  /** Runs one step. Entries name distinct slots; a slot is prefilled before it is decoded. */
  step(input: StepInput): Promise<StepOutput>;
  /** The scheduler is done with a slot (the next prefill there starts a new sequence). */
  release(slot: number): void;
  dispose(): Promise<void>;
}
