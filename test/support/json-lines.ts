// json-lines.ts — reads the JSON objects a child process prints one per line (its report channel),
// skipping any other output. Used by the multi-process tests and bench/proxy.ts.
export async function* jsonLines(stream: ReadableStream<Uint8Array>): AsyncGenerator<any> {
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of stream) {
    buf += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line.startsWith("{")) yield JSON.parse(line);
    }
  }
}
