// metrics.ts — what GET /metrics reports, in the Prometheus text exposition format (version 0.0.4).
// Latencies are summaries whose quantiles (p50, p99) are taken over the latest `window` samples;
// throughput is a gauge over the last `rateSeconds`.

/** The latest samples of one quantity, for quantiles. */
export class SampleWindow {
  readonly #values: Float64Array;
  #next = 0;
  #filled = 0;
  count = 0;
  sum = 0;

  constructor(size = 4096) {
    this.#values = new Float64Array(size);
  }

  add(v: number): void {
    this.#values[this.#next] = v;
    this.#next = (this.#next + 1) % this.#values.length;
    this.#filled = Math.min(this.#filled + 1, this.#values.length);
    this.count++;
    this.sum += v;
  }

  /** The q-quantile (nearest rank) of the window, NaN when empty. */
  quantile(q: number): number {
    if (this.#filled === 0) return NaN;
    const sorted = this.#values.slice(0, this.#filled).sort();
    return sorted[Math.min(this.#filled - 1, Math.max(0, Math.ceil(q * this.#filled) - 1))]!;
  }
}

export interface CacheUse {
  slotsUsed: number;
  slots: number;
  /** Positions held by resident sequences over slots x context. */
  ratio: number;
}

export class Metrics {
  readonly ttft = new SampleWindow();
  readonly interToken = new SampleWindow();
  readonly batch = new SampleWindow();
  readonly stepSeconds = new SampleWindow();
  readonly #codes = new Map<number, number>();
  readonly #rateSeconds: number;
  /** Generated tokens per whole second of the clock, for the throughput gauge. */
  readonly #perSecond = new Map<number, number>();
  readonly #started = performance.now();
  promptTokens = 0;
  generatedTokens = 0;
  running = 0;
  waiting = 0;
  lastBatch = 0;
  cache: CacheUse = { slotsUsed: 0, slots: 0, ratio: 0 };
  up = true;

  constructor(rateSeconds = 10) {
    this.#rateSeconds = rateSeconds;
  }

  response(code: number): void {
    this.#codes.set(code, (this.#codes.get(code) ?? 0) + 1);
  }

  tokens(n: number, now = performance.now()): void {
    this.generatedTokens += n;
    const s = Math.floor(now / 1000);
    this.#perSecond.set(s, (this.#perSecond.get(s) ?? 0) + n);
    for (const k of this.#perSecond.keys()) if (k < s - this.#rateSeconds) this.#perSecond.delete(k);
  }

  /** Generated tokens per second over the last rateSeconds (or since start, if sooner). */
  tokensPerSecond(now = performance.now()): number {
    const s = Math.floor(now / 1000);
    let n = 0;
    for (const [k, v] of this.#perSecond) if (k > s - this.#rateSeconds && k <= s) n += v;
    const span = Math.min(this.#rateSeconds, Math.max(1e-3, (now - this.#started) / 1000));
    return n / span;
  }

  /** The exposition text. */
  render(): string {
    const out: string[] = [];
    const metric = (name: string, type: string, help: string, lines: string[]) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...lines);
    };
    const num = (v: number) => (Number.isNaN(v) ? "NaN" : String(v));
    const summary = (name: string, help: string, w: SampleWindow) => metric(name, "summary", help, [
      `${name}{quantile="0.5"} ${num(w.quantile(0.5))}`,
      `${name}{quantile="0.99"} ${num(w.quantile(0.99))}`,
      `${name}_sum ${w.sum}`,
      `${name}_count ${w.count}`,
    ]);
    metric("weft_serve_up", "gauge", "1 while the model can serve requests.", [`weft_serve_up ${this.up ? 1 : 0}`]);
    metric("weft_serve_requests_total", "counter", "Completed HTTP requests by status code.",
      [...this.#codes].sort((a, b) => a[0] - b[0]).map(([c, n]) => `weft_serve_requests_total{code="${c}"} ${n}`));
    metric("weft_serve_requests_running", "gauge", "Sequences in the decode batch.", [`weft_serve_requests_running ${this.running}`]);
    metric("weft_serve_requests_waiting", "gauge", "Requests waiting for a KV-cache slot.", [`weft_serve_requests_waiting ${this.waiting}`]);
    metric("weft_serve_prompt_tokens_total", "counter", "Prompt tokens prefilled.", [`weft_serve_prompt_tokens_total ${this.promptTokens}`]);
    metric("weft_serve_generated_tokens_total", "counter", "Tokens generated.", [`weft_serve_generated_tokens_total ${this.generatedTokens}`]);
    metric("weft_serve_tokens_per_second", "gauge", `Generated tokens per second over the last ${this.#rateSeconds} s.`,
      [`weft_serve_tokens_per_second ${this.tokensPerSecond().toFixed(3)}`]);
    summary("weft_serve_time_to_first_token_seconds", "From the request's arrival to its first token.", this.ttft);
    summary("weft_serve_inter_token_latency_seconds", "Between consecutive tokens of one request.", this.interToken);
    metric("weft_serve_batch_size", "gauge", "Sequences in the latest decode step.", [`weft_serve_batch_size ${this.lastBatch}`]);
    summary("weft_serve_decode_batch_size", "Sequences per decode step.", this.batch);
    summary("weft_serve_step_seconds", "Wall time of one model step (prefill and decode).", this.stepSeconds);
    metric("weft_serve_kv_cache_usage_ratio", "gauge", "KV-cache positions held over slots x context.",
      [`weft_serve_kv_cache_usage_ratio ${this.cache.ratio.toFixed(6)}`]);
    metric("weft_serve_kv_cache_slots_used", "gauge", "KV-cache slots held by sequences.", [`weft_serve_kv_cache_slots_used ${this.cache.slotsUsed}`]);
    metric("weft_serve_kv_cache_slots", "gauge", "KV-cache slots.", [`weft_serve_kv_cache_slots ${this.cache.slots}`]);
    return out.join("\n") + "\n";
  }
}

/** Parses exposition text into { "name{labels}": value } (for tests and the load bench). */
export function parseMetrics(text: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    m.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return m;
}
