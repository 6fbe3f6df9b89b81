// json-lines-peer.ts — a child process that answers one JSON line per request line (a peer library's
// harness kept alive for a whole bench, so that our timing of a case and the peer's alternate within
// seconds, in the same thermal state: bench/attention.ts with bench/peers/torch_attention.py --serve).
// Its first line is its banner (versions); a request after the child has exited rejects with the tail
// of its stderr.
import { spawn, type ChildProcess } from "node:child_process";

export class JsonLinesPeer {
  private readonly child: ChildProcess;
  private buffered = "";
  private readonly lines: string[] = [];
  private waiter: ((line: string | undefined) => void) | undefined;
  private stderr = "";
  private exited = false;

  private constructor(command: string, args: string[]) {
    this.child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
    this.child.stdout!.setEncoding("utf8");
    this.child.stdout!.on("data", (chunk: string) => {
      this.buffered += chunk;
      let nl: number;
      while ((nl = this.buffered.indexOf("\n")) >= 0) {
        const line = this.buffered.slice(0, nl).trim();
        this.buffered = this.buffered.slice(nl + 1);
        if (line.startsWith("{")) this.push(line);  // other output (a library's notices) is not an answer
      }
    });
    this.child.stderr!.setEncoding("utf8");
    this.child.stderr!.on("data", (chunk: string) => (this.stderr = (this.stderr + chunk).slice(-4000)));
    this.child.on("exit", () => {
      this.exited = true;
      this.push(undefined);
    });
    this.child.on("error", (e) => {
      this.stderr += `\n${e.message}`;
      this.exited = true;
      this.push(undefined);
    });
  }

  /** Starts the child and waits for its banner line (rejects when it exits first). */
  static async start(command: string, args: string[], timeoutMs: number): Promise<{ peer: JsonLinesPeer; banner: unknown }> {
    const peer = new JsonLinesPeer(command, args);
    return { peer, banner: await peer.next(timeoutMs) };
  }

  /** Sends one request and waits (at most timeoutMs) for its answer line. */
  async request(value: unknown, timeoutMs: number): Promise<unknown> {
    if (this.exited) throw new Error(this.failure());
    this.child.stdin!.write(JSON.stringify(value) + "\n");
    return this.next(timeoutMs);
  }

  close(): void {
    if (!this.exited) {
      this.child.stdin!.end();
      this.child.kill();
    }
  }

  private push(line: string | undefined): void {
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w(line);
    } else if (line !== undefined) this.lines.push(line);
  }

  private next(timeoutMs: number): Promise<unknown> {
    const ready = this.lines.shift();
    if (ready !== undefined) return Promise.resolve(JSON.parse(ready));
    if (this.exited) return Promise.reject(new Error(this.failure()));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        reject(new Error(`no answer in ${timeoutMs} ms: ${this.failure()}`));
      }, timeoutMs);
      this.waiter = (line) => {
        clearTimeout(timer);
        if (line === undefined) reject(new Error(this.failure()));
        else resolve(JSON.parse(line));
      };
    });
  }

  private failure(): string {
    const tail = this.stderr.trim().split("\n").slice(-3).join(" | ");
    return `${this.exited ? `exited (${this.child.exitCode ?? this.child.signalCode})` : "running"}: ${tail}`;
  }
}
