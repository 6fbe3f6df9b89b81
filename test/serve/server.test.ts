// The inference server's HTTP and batching layer (examples/serve) against the CPU fake model, with a
// real fetch client on loopback: completions, streaming, concurrency, every error, disconnects,
// shutdown, and the "no GPU" mode. Runs on every machine, under Bun.
import { afterEach, describe, expect, onlyUnderBun, test } from "../support/test-api.ts";

import { complete, metricsOf, stream, until } from "../../examples/serve/client.ts";
import { FakeModel, fakeToken, type FakeModelOptions } from "../../examples/serve/fake-model.ts";
import { InferenceServer, type ServerOptions } from "../../examples/serve/server.ts";
import { decode, encode } from "../../examples/serve/tokenizer.ts";

onlyUnderBun("examples/serve runs on Bun.serve, Bun.file and Bun.spawn, by its issue's spec");

const servers: InferenceServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.shutdown()));
});

function serve(fake: FakeModelOptions = {}, opts: Partial<ServerOptions> = {}): { server: InferenceServer; model: FakeModel; url: string } {
  const model = new FakeModel(fake);
  const server = InferenceServer.start({ model, ...opts });
  servers.push(server);
  return { server, model, url: server.url };
}

/** The fake model's completion of `prompt`, as text. */
function expected(prompt: string, maxTokens: number, eosAfter?: number): string {
  const ids = encode(prompt);
  const out: number[] = [];
  for (let g = 0; g < maxTokens; g++) {
    const t = fakeToken(ids, g, eosAfter);
    if (t === 257) break;
    out.push(t);
  }
  return decode(out);
}

describe("completions against the fake model", () => {
  test("one completion: the text, usage and finish reason", async () => {
    const { url } = serve();
    const r = await complete(url, { prompt: "hello, world", max_tokens: 20, model: "whatever" });
    expect(r.status).toBe(200);
    expect(r.json.object).toBe("text_completion");
    expect(r.json.choices[0].text).toBe(expected("hello, world", 20));
    expect(r.json.choices[0].finish_reason).toBe("length");
    expect(r.json.usage).toEqual({ prompt_tokens: 13, completion_tokens: 20, total_tokens: 33 });
  });

  test("streaming: one event per token, then the finish event and [DONE]", async () => {
    const { url } = serve({ stepMs: 3 });
    const r = await stream(url, { prompt: "stream me", max_tokens: 12 });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toBe("text/event-stream");
    expect(r.pieces.length).toBe(13);  // 12 tokens, then the finish event
    expect(r.pieces.slice(0, 12).every((p) => p.length === 1)).toBe(true);
    expect(r.text).toBe(expected("stream me", 12));
    expect(r.finishReason).toBe("length");
    expect(r.done).toBe(true);
    expect(r.usage?.completion_tokens).toBe(12);
    // Token by token: the events came over time, not in one burst at the end.
    expect(r.arrivals[11]! - r.arrivals[0]!).toBeGreaterThan(10 * 3 * 0.8);
  });

  test("multi-byte characters are never split across events", async () => {
    const { url } = serve();
    const r = await stream(url, { prompt: "héllo wörld ✓", max_tokens: 17 });
    expect(r.text).toBe(expected("héllo wörld ✓", 17));
    expect(r.pieces.every((p) => !p.includes("\uFFFD"))).toBe(true);
    expect(r.pieces.some((p) => p === "")).toBe(true);  // the first byte of a 2-byte character
  });

  test("EOS ends a completion with finish_reason stop", async () => {
    const { url } = serve({ eosAfter: 5 });
    const r = await complete(url, { prompt: "abcdefgh", max_tokens: 50 });
    expect(r.json.choices[0]).toMatchObject({ text: "abcde", finish_reason: "stop" });
    const s = await stream(url, { prompt: "abcdefgh", max_tokens: 50 });
    expect(s.text).toBe("abcde");
    expect(s.finishReason).toBe("stop");
  });

  test("stop strings cut the text, streamed or not, and a partial match is released at the end", async () => {
    const { url } = serve();
    const full = expected("one two three ", 40);
    const cut = full.slice(0, full.indexOf("thr"));
    const r = await complete(url, { prompt: "one two three ", max_tokens: 40, stop: ["thr", "zzz"] });
    expect(r.json.choices[0]).toMatchObject({ text: cut, finish_reason: "stop" });
    const s = await stream(url, { prompt: "one two three ", max_tokens: 40, stop: "thr" });
    expect(s.text).toBe(cut);
    expect(s.finishReason).toBe("stop");
    // "three" begins "thx" (held back) but never completes it: the held "th" comes out at the end.
    const t = await stream(url, { prompt: "aaath", max_tokens: 5, stop: ["thx"] });
    expect(t.text).toBe("aaath");
    expect(t.finishReason).toBe("length");
  });

  test("16 concurrent requests with distinct prompts: every response complete and in order", async () => {
    const { url, model } = serve({ slots: 16, stepMs: 4 });
    const prompts = Array.from({ length: 16 }, (_, i) => `prompt number ${i}: ${"xyz".repeat(i % 5)}`);
    const results = await Promise.all(prompts.map((p, i) => i % 2 === 0
      ? stream(url, { prompt: p, max_tokens: 24 + i }).then((r) => r.text)
      : complete(url, { prompt: p, max_tokens: 24 + i }).then((r) => r.json.choices[0].text as string)));
    results.forEach((text, i) => expect(text).toBe(expected(prompts[i]!, 24 + i)));
    expect(model.maxDecodeBatch).toBeGreaterThanOrEqual(8);
  });

  test("continuous batching: a request joins the running batch at a step boundary and leaves when done", async () => {
    const { url, model } = serve({ slots: 4, stepMs: 5 });
    const long = stream(url, { prompt: "the long one", max_tokens: 60 });
    await until(async () => (await metricsOf(url)).get("weft_serve_requests_running") === 1, 5000, "the long request to run");
    const short = await stream(url, { prompt: "short", max_tokens: 5 });
    expect(short.text).toBe(expected("short", 5));
    const m = await metricsOf(url);
    expect(m.get("weft_serve_requests_running")).toBe(1);  // the short one left, the long one runs on
    const l = await long;
    expect(l.text).toBe(expected("the long one", 60));
    // The short one's 4 decode steps ran beside the long one's.
    expect(model.maxDecodeBatch).toBe(2);
  });
});

describe("errors: a clear status, and the server keeps serving", () => {
  test("400 for malformed JSON, a missing or bad field, unsupported options", async () => {
    const { url } = serve();
    const post = (body: string) => fetch(`${url}/v1/completions`, { method: "POST", body, headers: { "Content-Type": "application/json" } });
    const cases: [string, RegExp][] = [
      ["{not json", /not valid JSON/],
      ["[1, 2]", /JSON object/],
      [JSON.stringify({ max_tokens: 4 }), /'prompt' is required/],
      [JSON.stringify({ prompt: 7 }), /'prompt' must be/],
      [JSON.stringify({ prompt: [1, 999] }), /'prompt\[1\]' must be a token id in \[0, 258\)/],
      [JSON.stringify({ prompt: "x", max_tokens: 0 }), /'max_tokens' must be an integer/],
      [JSON.stringify({ prompt: "x", temperature: 3 }), /'temperature' must be a number in \[0, 2\]/],
      [JSON.stringify({ prompt: "x", top_p: 0 }), /'top_p'/],
      [JSON.stringify({ prompt: "x", stream: "yes" }), /'stream' must be true or false/],
      [JSON.stringify({ prompt: "x", n: 2 }), /'n' must be 1/],
      [JSON.stringify({ prompt: "x", stop: ["a", "b", "c", "d", "e"] }), /'stop' holds at most 4/],
      [JSON.stringify({ prompt: "x", logprobs: 3 }), /'logprobs' is not supported/],
    ];
    for (const [body, re] of cases) {
      const res = await post(body);
      expect(res.status).toBe(400);
      const j = (await res.json()) as any;
      expect(j.error.type).toBe("invalid_request_error");
      expect(j.error.message).toMatch(re);
    }
    expect((await complete(url, { prompt: "still here", max_tokens: 3 })).status).toBe(200);
    expect((await metricsOf(url)).get('weft_serve_requests_total{code="400"}')).toBe(cases.length);
  });

  test("413 for a prompt longer than the context", async () => {
    const { url } = serve({ contextLength: 64 });
    const r = await complete(url, { prompt: "x".repeat(63), max_tokens: 4 });
    expect(r.status).toBe(413);
    expect(r.json.error.message).toContain("context holds 64");
    // 62 bytes + BOS fit, with room for one token: max_tokens is cut to what the context holds.
    const ok = await complete(url, { prompt: "x".repeat(62), max_tokens: 4 });
    expect(ok.status).toBe(200);
    expect(ok.json.choices[0]).toMatchObject({ text: "x", finish_reason: "length" });
  });

  test("429 with Retry-After when every slot is taken and the queue is full", async () => {
    const { url } = serve({ slots: 2, stepMs: 5 }, { maxWaiting: 1, retryAfterSeconds: 3 });
    const running = [stream(url, { prompt: "a", max_tokens: 200 }), stream(url, { prompt: "b", max_tokens: 200 })];
    await until(async () => (await metricsOf(url)).get("weft_serve_kv_cache_slots_used") === 2, 5000, "two running");
    const queued = complete(url, { prompt: "c", max_tokens: 2 });  // waits for a slot
    await until(async () => (await metricsOf(url)).get("weft_serve_requests_waiting") === 1, 5000, "one waiting");
    const r = await complete(url, { prompt: "d", max_tokens: 2 });
    expect(r.status).toBe(429);
    expect(r.headers.get("retry-after")).toBe("3");
    expect(r.json.error.message).toContain("KV cache is full");
    expect((await queued).status).toBe(200);  // got a slot when one freed
    for (const s of await Promise.all(running)) expect(s.finishReason).toBe("length");
  });

  test("404 and 405", async () => {
    const { url } = serve();
    expect((await fetch(`${url}/nope`)).status).toBe(404);
    const r = await fetch(`${url}/v1/completions`);
    expect(r.status).toBe(405);
    expect(r.headers.get("allow")).toBe("POST");
    expect((await fetch(`${url}/health`, { method: "POST" })).status).toBe(405);
  });

  test("a model failure fails the requests in it (500, or an error event) and /health says so", async () => {
    const { url } = serve({ failAtStep: 3, stepMs: 2 });
    const [a, b] = await Promise.all([complete(url, { prompt: "x", max_tokens: 10 }), stream(url, { prompt: "y", max_tokens: 10 })]);
    expect(a.status).toBe(500);
    expect(a.json.error.message).toContain("injected failure");
    expect(b.error).toContain("injected failure");
    expect(b.done).toBe(false);
    const h = await fetch(`${url}/health`);
    expect(h.status).toBe(503);
    expect(((await h.json()) as any).status).toBe("failed");
    expect((await complete(url, { prompt: "z" })).status).toBe(503);
  });
});

describe("disconnects and shutdown", () => {
  test("a client that disconnects mid-stream frees its slot; the next request gets it", async () => {
    const { url } = serve({ slots: 1, stepMs: 5 }, { maxWaiting: 0 });
    const ac = new AbortController();
    const first = await stream(url, { prompt: "going away", max_tokens: 100000 }, { signal: ac.signal, onEvent: (n) => n < 3 });
    ac.abort();  // the body reader is cancelled; this closes the connection too
    expect(first.pieces.length).toBe(3);
    expect(first.done).toBe(false);
    await until(async () => (await metricsOf(url)).get("weft_serve_kv_cache_slots_used") === 0, 5000, "the slot to be freed");
    const next = await complete(url, { prompt: "next", max_tokens: 4 });
    expect(next.status).toBe(200);
    expect(next.json.choices[0].text).toBe(expected("next", 4));
  });

  test("shutdown: in-flight requests finish, new ones get 503, then the listener closes", async () => {
    const { server, url } = serve({ slots: 4, stepMs: 5 });
    const inflight = stream(url, { prompt: "finish me", max_tokens: 40 });
    const queuedToo = complete(url, { prompt: "me too", max_tokens: 10 });
    await until(async () => (await metricsOf(url)).get("weft_serve_kv_cache_slots_used") === 2, 5000, "both running");
    const down = server.shutdown();
    const late = await complete(url, { prompt: "too late", max_tokens: 4 });
    expect(late.status).toBe(503);
    expect(late.json.error.message).toContain("shutting down");
    expect((await fetch(`${url}/health`)).status).toBe(503);
    const r = await inflight;
    expect(r.text).toBe(expected("finish me", 40));
    expect(r.done).toBe(true);
    expect((await queuedToo).json.choices[0].text).toBe(expected("me too", 10));
    await down;
    expect(await fetch(`${url}/health`).then(() => "answered", () => "refused")).toBe("refused");
  });
});

describe("metrics and the no-GPU mode", () => {
  test("/metrics: Prometheus text with throughput, latencies, batch size and KV-cache use", async () => {
    const { url } = serve({ slots: 8, stepMs: 2 });
    await Promise.all(Array.from({ length: 4 }, (_, i) => stream(url, { prompt: `m${i}`, max_tokens: 10 })));
    const res = await fetch(`${url}/metrics`);
    expect(res.headers.get("content-type")).toContain("text/plain");
    const text = await res.text();
    for (const name of ["weft_serve_tokens_per_second", "weft_serve_time_to_first_token_seconds", "weft_serve_inter_token_latency_seconds",
      "weft_serve_batch_size", "weft_serve_kv_cache_usage_ratio"]) {
      expect(text).toContain(`# TYPE ${name} `);
    }
    const m = await metricsOf(url);
    expect(m.get("weft_serve_generated_tokens_total")).toBe(40);
    expect(m.get("weft_serve_time_to_first_token_seconds_count")).toBe(4);
    expect(m.get("weft_serve_inter_token_latency_seconds_count")).toBe(36);
    expect(m.get('weft_serve_inter_token_latency_seconds{quantile="0.5"}')!).toBeGreaterThan(0);
    expect(m.get('weft_serve_inter_token_latency_seconds{quantile="0.99"}')!).toBeGreaterThanOrEqual(m.get('weft_serve_inter_token_latency_seconds{quantile="0.5"}')!);
    expect(m.get("weft_serve_tokens_per_second")!).toBeGreaterThan(0);
    expect(m.get('weft_serve_decode_batch_size{quantile="0.99"}')).toBe(4);
    expect(m.get("weft_serve_kv_cache_slots")).toBe(8);
    expect(m.get("weft_serve_kv_cache_slots_used")).toBe(0);
    expect(m.get("weft_serve_up")).toBe(1);
  });

  test("no model: /health and completions say 503 'no GPU', metrics still answer", async () => {
    const server = InferenceServer.start({ model: null, noModelReason: "no GPU: this machine has 0 devices" });
    servers.push(server);
    const h = await fetch(`${server.url}/health`);
    expect(h.status).toBe(503);
    expect(await h.json()).toEqual({ status: "no GPU", reason: "no GPU: this machine has 0 devices" });
    const r = await complete(server.url, { prompt: "x" });
    expect(r.status).toBe(503);
    expect(r.json.error.message).toContain("no GPU");
    expect((await metricsOf(server.url)).get("weft_serve_up")).toBe(0);
  });
});
