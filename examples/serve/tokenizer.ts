// tokenizer.ts — the byte-level tokenizer: token t < 256 is the byte t of the UTF-8 text, 256 begins
// a sequence (BOS), 257 ends one (EOS). Any text encodes, no file is needed, and random or tiny
// models work with it; a real checkpoint's own tokenizer is not used (its outputs would be bytes of
// that vocabulary's first 256 ids). Ids >= 258 (a larger vocabulary's rest) decode to nothing.

export const BOS = 256;
export const EOS = 257;
/** Ids the tokenizer uses: a model's vocabulary must have at least this many. */
export const BYTE_VOCAB = 258;

const encoder = new TextEncoder();

/** BOS, then the UTF-8 bytes of `text`. */
export function encode(text: string): Int32Array {
  const bytes = encoder.encode(text);
  const ids = new Int32Array(bytes.length + 1);
  ids[0] = BOS;
  ids.set(bytes, 1);
  return ids;
}

/** Turns a stream of token ids into text, holding back the bytes of a character not yet complete. */
export class StreamDecoder {
  readonly #decoder = new TextDecoder("utf-8", { fatal: false });
  readonly #one = new Uint8Array(1);

  /** The text that `token` completes ("" mid-character, for BOS, EOS and ids past the bytes). */
  push(token: number): string {
    if (token < 0 || token > 255) return "";
    this.#one[0] = token;
    return this.#decoder.decode(this.#one, { stream: true });
  }

  /** Whatever is held back, as replacement characters (a sequence that ended mid-character). */
  flush(): string {
    return this.#decoder.decode();
  }
}

/** All of `tokens` as text. */
export function decode(tokens: ArrayLike<number>): string {
  const d = new StreamDecoder();
  let s = "";
  for (let i = 0; i < tokens.length; i++) s += d.push(tokens[i]!);
  return s + d.flush();
}
