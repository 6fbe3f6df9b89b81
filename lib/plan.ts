// plan.ts — what every prepared GPU op shares: launch() packs the completion slot into the op's
// ABI struct and starts the kernel; run(), runSync(), wait() and promise() are the same for all.
import type { Completion, CompletionSlot, FailureDescriber } from "./completion.ts";

/** Writes a 64-bit address or count into a packed ABI struct viewed as 32-bit words (LE). */
export function writeU64(words: Uint32Array, at: number, value: number): void {
  words[at] = value >>> 0;
  words[at + 1] = Math.floor(value / 4294967296);
}

/** Word offsets (in 32-bit words) of a struct's completion fields. */
export interface SlotOffsets {
  done: number;
  seq: number;
  arrivals: number;
}

/** Fills a launch struct's completion fields from `slot`. */
export function writeSlot(words: Uint32Array, at: SlotOffsets, slot: CompletionSlot): void {
  writeU64(words, at.done, slot.done);
  writeU64(words, at.seq, slot.seq);
  writeU64(words, at.arrivals, slot.arrivals);
}

/** launchAll(plans) (a plan kind's batched launch), then one Promise that resolves when every
 * plan's launch is done; a launchAll that throws rejects it instead of throwing. */
export function runAllLaunched<P extends LaunchPlan>(plans: readonly P[], launchAll: (plans: readonly P[]) => number[]): Promise<void> {
  let seqs: number[];
  try {
    seqs = launchAll(plans);
  } catch (e) {
    return Promise.reject(e);
  }
  return Promise.all(plans.map((p, i) => p.promise(seqs[i]!))).then(() => undefined);
}

export abstract class LaunchPlan {
  /** The op's name in errors ("all_reduce", "allGatherGemm", ...). */
  abstract readonly label: string;
  protected abstract readonly completion: Completion;
  protected abstract readonly describe: FailureDescriber;

  /** Launches on the communicator's stream and returns the launch's sequence number; no wait. */
  abstract launch(): number;

  /** µs that run()'s Promise polls eagerly after the launch (Completion.promise); 0: none. */
  protected get eagerSpinMicros(): number {
    return 0;
  }

  /** Launches and resolves when this rank's part is done. */
  run(): Promise<void> {
    let seq: number;
    try {
      seq = this.launch();
    } catch (e) {
      return Promise.reject(e);
    }
    return this.completion.promise(seq, this.label, this.describe, this.eagerSpinMicros);
  }

  /** Launches and spins until done (benchmarks). A process driving several ranks must launch
   * every rank's plan before waiting for any (each rank's kernel waits for the others): launch()
   * them all, then wait(seq) each. */
  runSync(): void {
    this.wait(this.launch());
  }

  /** Spins until launch `seq` is done; throws its failure. */
  wait(seq: number): void {
    this.completion.wait(seq, this.completion.timeoutMs, this.label, this.describe);
  }

  /** The Promise of launch `seq`. */
  promise(seq: number): Promise<void> {
    return this.completion.promise(seq, this.label, this.describe);
  }
}
