// request.ts — the body of POST /v1/completions, checked field by field. The OpenAI completions
// fields that change what is generated are honoured (prompt, max_tokens, temperature, top_p, seed,
// stop, stream) plus top_k; ones this server cannot honour (n > 1, best_of > 1, echo, logprobs,
// penalties, suffix) are refused with 400 rather than silently ignored.

export class RequestError extends Error {
  constructor(readonly status: number, message: string, readonly param: string | null = null) {
    super(message);
  }
}

export interface CompletionRequest {
  /** Text (BOS + UTF-8 bytes once encoded) or token ids as given. */
  prompt: string | Int32Array;
  maxTokens: number;
  temperature: number;
  topK: number;
  topP: number;
  /** undefined: a fresh random seed. */
  seed: bigint | undefined;
  stop: string[];
  stream: boolean;
  model: string | undefined;
}

const DEFAULT_MAX_TOKENS = 16;
const MAX_STOPS = 4;

function bad(param: string, rule: string): never {
  throw new RequestError(400, `'${param}' ${rule}`, param);
}

function number(body: Record<string, unknown>, key: string, def: number, ok: (v: number) => boolean, rule: string): number {
  const v = body[key];
  if (v === undefined || v === null) return def;
  if (typeof v !== "number" || !Number.isFinite(v) || !ok(v)) bad(key, `${rule} (got ${JSON.stringify(v)})`);
  return v;
}

function integer(body: Record<string, unknown>, key: string, def: number, min: number, max: number): number {
  return number(body, key, def, (v) => Number.isInteger(v) && v >= min && v <= max, `must be an integer in [${min}, ${max}]`);
}

/** Parses and checks a request body; throws RequestError (400) naming the field. */
export function parseCompletionRequest(text: string, vocab: number): CompletionRequest {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (e) {
    throw new RequestError(400, `the body is not valid JSON: ${(e as Error).message}`);
  }
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw new RequestError(400, "the body must be a JSON object");
  const b = body as Record<string, unknown>;

  if (!("prompt" in b) || b.prompt === undefined || b.prompt === null) bad("prompt", "is required (a string, or an array of token ids)");
  let prompt: string | Int32Array;
  const p = b.prompt;
  if (typeof p === "string") prompt = p;
  else if (Array.isArray(p) && p.length === 1 && typeof p[0] === "string") prompt = p[0];
  else if (Array.isArray(p) && p.length > 0 && p.every((t) => typeof t === "number")) {
    p.forEach((t, i) => {
      if (!Number.isInteger(t) || t < 0 || t >= vocab) bad(`prompt[${i}]`, `must be a token id in [0, ${vocab}) (got ${t})`);
    });
    prompt = Int32Array.from(p as number[]);
  } else bad("prompt", "must be a string, an array of one string, or a non-empty array of token ids (one prompt per request)");

  const stopRaw = b.stop;
  let stop: string[] = [];
  if (typeof stopRaw === "string") stop = [stopRaw];
  else if (Array.isArray(stopRaw)) stop = stopRaw as string[];
  else if (stopRaw !== undefined && stopRaw !== null) bad("stop", "must be a string or an array of strings");
  if (stop.length > MAX_STOPS) bad("stop", `holds at most ${MAX_STOPS} strings (got ${stop.length})`);
  stop.forEach((s, i) => {
    if (typeof s !== "string" || s.length === 0) bad(`stop[${i}]`, "must be a non-empty string");
  });

  const stream = b.stream ?? false;
  if (typeof stream !== "boolean") bad("stream", `must be true or false (got ${JSON.stringify(stream)})`);
  const model = b.model;
  if (model !== undefined && model !== null && typeof model !== "string") bad("model", "must be a string");

  let seed: bigint | undefined;
  if (b.seed !== undefined && b.seed !== null) seed = BigInt(integer(b, "seed", 0, 0, Number.MAX_SAFE_INTEGER));

  for (const [key, ok] of [["n", 1], ["best_of", 1]] as const) {
    if (b[key] !== undefined && b[key] !== null && b[key] !== ok) bad(key, `must be 1: this server returns one completion per request`);
  }
  if (b.echo !== undefined && b.echo !== null && b.echo !== false) bad("echo", "is not supported");
  if (b.logprobs !== undefined && b.logprobs !== null && b.logprobs !== 0) bad("logprobs", "is not supported");
  if (b.suffix !== undefined && b.suffix !== null) bad("suffix", "is not supported");
  for (const key of ["presence_penalty", "frequency_penalty"]) {
    if (b[key] !== undefined && b[key] !== null && b[key] !== 0) bad(key, "is not supported (only 0)");
  }

  return {
    prompt,
    maxTokens: integer(b, "max_tokens", DEFAULT_MAX_TOKENS, 1, 1 << 20),
    temperature: number(b, "temperature", 1, (v) => v >= 0 && v <= 2, "must be a number in [0, 2]"),
    topP: number(b, "top_p", 1, (v) => v > 0 && v <= 1, "must be a number in (0, 1]"),
    topK: integer(b, "top_k", 0, 0, 2 ** 31 - 1),
    seed,
    stop,
    stream,
    model: model as string | undefined,
  };
}
