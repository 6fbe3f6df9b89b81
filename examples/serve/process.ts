// process.ts — runs main.ts as a child process and waits until it listens (tests, bench/serve-load.ts).

const MAIN = new URL("./main.ts", import.meta.url).pathname;

/** Starts main.ts with `args` and resolves with its URL once it listens. */
export async function startServer(args: string[], timeoutMs = 120_000) {
  const proc = Bun.spawn([process.execPath, MAIN, "--port", "0", ...args], { stdout: "pipe", stderr: "pipe" });
  const reader = proc.stdout.getReader();
  const decoder = new TextDecoder();
  let out = "";
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = out.match(/listening on (http:\/\/[^\s]+)/);
    if (m) {
      // Keep draining stdout so the child never blocks on a full pipe.
      (async () => {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          out += decoder.decode(value);
        }
      })();
      return { proc, url: m[1]!, output: () => out };
    }
    if (Date.now() > deadline) {
      proc.kill();
      throw new Error(`main.ts did not start listening within ${timeoutMs} ms:\n${out}\n${await new Response(proc.stderr).text()}`);
    }
    const { value, done } = await reader.read();
    if (done) throw new Error(`main.ts exited before listening (code ${await proc.exited}):\n${out}\n${await new Response(proc.stderr).text()}`);
    out += decoder.decode(value);
  }
}
