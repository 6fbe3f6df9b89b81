// client.ts — a small OpenAI-completions client over fetch (the server tests and bench/serve-load.ts
// use it): one request, streamed (server-sent events parsed as they arrive, with arrival times) or not.
import { parseMetrics } from "./metrics.ts";

export interface StreamedCompletion {
  status: number;
  /** Text of every event, in order. */
  pieces: string[];
  text: string;
  finishReason: string | null;
  /** ms from the request to each event's arrival (the last one is the finish event). */
  arrivals: number[];
  done: boolean;
  usage?: { prompt_tokens: number; completion_tokens: number };
  error?: string;
  headers: Headers;
}

export async function complete(url: string, body: Record<string, unknown>, init: RequestInit = {}) {
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body), ...init,
  });
  return { status: res.status, headers: res.headers, json: (await res.json()) as any };
}

/** Streams one completion. `onEvent` may return false to stop reading (and abort the request). */
export async function stream(url: string, body: Record<string, unknown>, opts: { signal?: AbortSignal; onEvent?: (n: number) => boolean | void } = {}): Promise<StreamedCompletion> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ ...body, stream: true }), signal: opts.signal,
  });
  const out: StreamedCompletion = { status: res.status, pieces: [], text: "", finishReason: null, arrivals: [], done: false, headers: res.headers };
  if (res.status !== 200 || !res.body) {
    out.error = await res.text();
    return out;
  }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let at;
    while ((at = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, at);
      buf = buf.slice(at + 2);
      if (!event.startsWith("data: ")) throw new Error(`not an SSE data event: ${JSON.stringify(event)}`);
      const data = event.slice(6);
      if (data === "[DONE]") {
        out.done = true;
        continue;
      }
      const msg = JSON.parse(data);
      if (msg.error) {
        out.error = msg.error.message;
        continue;
      }
      out.arrivals.push(performance.now() - t0);
      const choice = msg.choices[0];
      out.pieces.push(choice.text);
      out.text += choice.text;
      if (choice.finish_reason) out.finishReason = choice.finish_reason;
      if (msg.usage) out.usage = msg.usage;
      if (opts.onEvent?.(out.pieces.length) === false) {
        await reader.cancel();
        return out;
      }
    }
  }
  return out;
}

export async function metricsOf(url: string): Promise<Map<string, number>> {
  return parseMetrics(await (await fetch(`${url}/metrics`)).text());
}

/** Polls until `cond` holds or `ms` pass. */
export async function until(cond: () => Promise<boolean> | boolean, ms = 5000, what = "condition"): Promise<void> {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    if (await cond()) return;
    await Bun.sleep(10);
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}
