// server.ts — the HTTP face of the inference server (Bun.serve), OpenAI-style:
//
//   POST /v1/completions   {"prompt": "...", "max_tokens": 16, "stream": true, ...}
//                          JSON, or with stream: true server-sent events, one per token, then
//                          a last event with finish_reason and `data: [DONE]`
//   GET  /health           200 {"status": "ok", ...}; 503 with no model ("no GPU") or while shutting down
//   GET  /metrics          Prometheus text: tokens/s, time to first token, inter-token p50/p99,
//                          batch size, KV-cache use, requests by status
//   GET  /v1/models        the one model
//
// Errors are JSON {"error": {"message", "type", "param", "code"}} and the server keeps serving:
// 400 malformed JSON or a bad or missing field, 413 a prompt longer than the context, 429 (with
// Retry-After) when every KV-cache slot is taken and the queue is full, 503 while shutting down or
// without a model. A streaming client that disconnects frees its slot at the next step boundary.
// shutdown() (SIGTERM in main.ts) lets in-flight requests finish while new ones get 503.
import { Metrics } from "./metrics.ts";
import type { Model, Sampling } from "./model.ts";
import { parseCompletionRequest, RequestError, type CompletionRequest } from "./request.ts";
import {
  Generation, ModelFailedError, PromptTooLongError, QueueFullError, Scheduler, ShuttingDownError, type GenerationResult,
} from "./scheduler.ts";
import { encode } from "./tokenizer.ts";

export interface ServerOptions {
  /** The model, or null: every completion then gets 503 with `noModelReason` ("no GPU" mode). */
  model: Model | null;
  noModelReason?: string;
  /** Default 127.0.0.1: loopback only. */
  hostname?: string;
  /** Default 0: any free port (see .port). */
  port?: number;
  /** Requests that may wait for a slot beyond the free ones (default: the model's slots). */
  maxWaiting?: number;
  retryAfterSeconds?: number;
  /** Bound of shutdown()'s wait for in-flight requests, ms (default 60 000); the rest are cancelled. */
  drainTimeoutMs?: number;
  /** Seconds a connection may stay silent (default 120; Bun's limit is 255). */
  idleTimeoutSeconds?: number;
  /** Largest request body, bytes (default 1 MiB). */
  maxBodyBytes?: number;
}

const JSON_HEADERS = { "Content-Type": "application/json" };
const encoder = new TextEncoder();

function errorBody(status: number, message: string, param: string | null = null): string {
  const type = status === 400 || status === 413 ? "invalid_request_error" : status === 429 ? "rate_limit_error"
    : status === 503 ? "service_unavailable" : status === 404 || status === 405 ? "not_found_error" : "server_error";
  return JSON.stringify({ error: { message, type, param, code: status } });
}

export class InferenceServer {
  readonly metrics = new Metrics();
  readonly scheduler: Scheduler | null;
  readonly #model: Model | null;
  readonly #noModelReason: string;
  readonly #server: ReturnType<typeof Bun.serve>;
  readonly #drainTimeoutMs: number;
  readonly #maxBodyBytes: number;
  #stopping: Promise<void> | undefined;

  private constructor(opts: ServerOptions) {
    this.#model = opts.model;
    this.#noModelReason = opts.noModelReason ?? "no model is loaded";
    this.scheduler = opts.model ? new Scheduler(opts.model, this.metrics, { maxWaiting: opts.maxWaiting, retryAfterSeconds: opts.retryAfterSeconds }) : null;
    this.metrics.up = opts.model !== null;
    this.#drainTimeoutMs = opts.drainTimeoutMs ?? 60_000;
    this.#maxBodyBytes = opts.maxBodyBytes ?? 1 << 20;
    this.#server = Bun.serve({
      hostname: opts.hostname ?? "127.0.0.1",
      port: opts.port ?? 0,
      idleTimeout: opts.idleTimeoutSeconds ?? 120,
      fetch: (req) => this.#route(req),
      error: (e) => this.#reply(500, errorBody(500, `internal error: ${e.message}`)),
    });
  }

  static start(opts: ServerOptions): InferenceServer {
    return new InferenceServer(opts);
  }

  get port(): number {
    return this.#server.port!;
  }

  get url(): string {
    return `http://${this.#server.hostname}:${this.#server.port}`;
  }

  get shuttingDown(): boolean {
    return this.#stopping !== undefined;
  }

  /** New requests get 503; in-flight ones finish (bounded by drainTimeoutMs); then the listener
   * closes and the model is disposed. Idempotent. */
  shutdown(): Promise<void> {
    this.#stopping ??= (async () => {
      await this.scheduler?.drain(this.#drainTimeoutMs);
      // Let the last events reach their clients before the listener goes.
      const closed = this.#server.stop(false);
      await Promise.race([closed, Bun.sleep(2000)]);
      await this.#server.stop(true);
      await this.#model?.dispose();
    })();
    return this.#stopping;
  }

  #reply(status: number, body: string, headers: Record<string, string> = JSON_HEADERS): Response {
    this.metrics.response(status);
    return new Response(body, { status, headers });
  }

  async #route(req: Request): Promise<Response> {
    const path = new URL(req.url).pathname;
    const allow = (method: string) => {
      if (req.method === method) return null;
      return this.#reply(405, errorBody(405, `${path} takes ${method}`), { ...JSON_HEADERS, Allow: method });
    };
    switch (path) {
      case "/health": return allow("GET") ?? this.#health();
      case "/metrics": return allow("GET") ?? this.#reply(200, this.metrics.render(), { "Content-Type": "text/plain; version=0.0.4" });
      case "/v1/models": return allow("GET") ?? this.#models();
      case "/v1/completions": return allow("POST") ?? (await this.#completions(req));
      default: return this.#reply(404, errorBody(404, `no route ${req.method} ${path}`));
    }
  }

  #health(): Response {
    const info = this.#model?.info;
    if (!this.scheduler) return this.#reply(503, JSON.stringify({ status: "no GPU", reason: this.#noModelReason }));
    if (this.scheduler.failure) return this.#reply(503, JSON.stringify({ status: "failed", reason: this.scheduler.failure.message }));
    if (this.shuttingDown) return this.#reply(503, JSON.stringify({ status: "shutting down" }));
    return this.#reply(200, JSON.stringify({
      status: "ok", model: info!.name, description: info!.description, world: info!.world, slots: info!.slots,
      contextLength: info!.contextLength, running: this.scheduler.running, waiting: this.scheduler.waiting,
    }));
  }

  #models(): Response {
    const data = this.#model ? [{ id: this.#model.info.name, object: "model", owned_by: "weft" }] : [];
    return this.#reply(200, JSON.stringify({ object: "list", data }));
  }

  async #completions(req: Request): Promise<Response> {
    if (!this.scheduler) return this.#reply(503, errorBody(503, `no GPU: ${this.#noModelReason}`));
    if (this.shuttingDown) return this.#reply(503, errorBody(503, "the server is shutting down"), { ...JSON_HEADERS, Connection: "close" });
    let parsed: CompletionRequest;
    try {
      const length = Number(req.headers.get("content-length") ?? 0);
      if (length > this.#maxBodyBytes) throw new RequestError(413, `the body is ${length} bytes; at most ${this.#maxBodyBytes}`);
      const text = await req.text();
      if (text.length > this.#maxBodyBytes) throw new RequestError(413, `the body is over ${this.#maxBodyBytes} bytes`);
      parsed = parseCompletionRequest(text, this.#model!.info.vocab);
    } catch (e) {
      if (e instanceof RequestError) return this.#reply(e.status, errorBody(e.status, e.message, e.param));
      throw e;
    }
    const info = this.#model!.info;
    const prompt = typeof parsed.prompt === "string" ? encode(parsed.prompt) : parsed.prompt;
    const sampling: Sampling = {
      temperature: parsed.temperature, topK: parsed.topK, topP: parsed.topP,
      seed: parsed.seed ?? BigInt(Math.floor(Math.random() * 2 ** 53)),
    };
    let gen: Generation;
    try {
      gen = this.scheduler.submit({ prompt, maxTokens: parsed.maxTokens, sampling, stop: parsed.stop });
    } catch (e) {
      if (e instanceof PromptTooLongError) return this.#reply(413, errorBody(413, e.message, "prompt"));
      if (e instanceof QueueFullError) {
        return this.#reply(429, errorBody(429, e.message), { ...JSON_HEADERS, "Retry-After": String(e.retryAfterSeconds) });
      }
      if (e instanceof ShuttingDownError) return this.#reply(503, errorBody(503, e.message));
      if (e instanceof ModelFailedError) return this.#reply(503, errorBody(503, e.message));
      throw e;
    }
    req.signal.addEventListener("abort", () => gen.cancel(), { once: true });
    const created = Math.floor(Date.now() / 1000);
    const chunk = (text: string, finish: string | null) => ({
      id: gen.id, object: "text_completion", created, model: info.name,
      choices: [{ text, index: 0, logprobs: null, finish_reason: finish }],
    });
    if (!parsed.stream) {
      let r: GenerationResult;
      try {
        r = await gen.done;
      } catch (e) {
        return this.#reply(500, errorBody(500, (e as Error).message));
      }
      return this.#reply(200, JSON.stringify({
        ...chunk(r.text, r.finishReason),
        usage: { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens },
      }));
    }
    const sse = (data: unknown) => encoder.encode(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
    const body = new ReadableStream<Uint8Array>({
      start: (controller) => {
        gen.onToken = (e) => controller.enqueue(sse(chunk(e.text, null)));
        gen.done.then((r) => {
          if (r.finishReason === "cancelled") return;
          controller.enqueue(sse({
            ...chunk(r.tail, r.finishReason),
            usage: { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens },
          }));
          controller.enqueue(sse("[DONE]"));
        }, (e: Error) => {
          controller.enqueue(sse({ error: { message: e.message, type: "server_error", param: null, code: 500 } }));
        }).finally(() => {
          try {
            controller.close();
          } catch {
            // the client went away first
          }
        });
      },
      cancel: () => gen.cancel(),
    });
    return this.#reply200Stream(body);
  }

  #reply200Stream(body: ReadableStream<Uint8Array>): Response {
    this.metrics.response(200);
    return new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", Connection: "keep-alive" } });
  }
}
