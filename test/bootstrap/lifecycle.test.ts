// Joining and leaving the TCP store: a wrong port says so while it waits and fails at its own
// bound, a port in use says what to do, a store used after close() throws DisposedError, and a
// one-host job without a token authenticates with the one rank 0 keeps in a private file.
// CPU only: runs in CI.
import { describe, expect, test } from "../support/test-api.ts";
import { existsSync, lstatSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

import { LocalStore, Store } from "../../lib/bootstrap.ts";
import { ArgumentError, DisposedError, TimeoutError } from "../../lib/errors.ts";
import { runtime } from "../../lib/runtime/index.ts";
import { freePorts } from "../support/report-channel.ts";

/** console.error lines written while `f` runs. */
async function stderrLines<T>(f: () => Promise<T>): Promise<{ result: T; lines: string[] }> {
  const lines: string[] = [];
  const error = console.error;
  console.error = (...a: unknown[]) => void lines.push(a.join(" "));
  try {
    return { result: await f(), lines };
  } finally {
    console.error = error;
  }
}

describe("reaching rank 0", () => {
  test("a wrong MASTER_PORT says after 5 s that nothing listens there (ECONNREFUSED), and fails at connectTimeoutMs", async () => {
    const [port] = await freePorts(1);
    const t0 = performance.now();
    const { result: err, lines } = await stderrLines(() =>
      Store.connect({ rank: 1, worldSize: 2, addr: "127.0.0.1", port: port!, connectTimeoutMs: 6500 } as Parameters<typeof Store.connect>[0])
        .catch((e) => e));
    const ms = performance.now() - t0;
    console.log(`  wrong port: progress line after 5 s, TimeoutError after ${ms.toFixed(0)} ms`);
    expect(err).toBeInstanceOf(TimeoutError);
    expect(err.message).toContain(`127.0.0.1:${port}`);
    expect(err.message).toContain("ECONNREFUSED");
    expect(err.message).toContain("MASTER_PORT");
    expect(lines.some((l) => l.includes(`still cannot reach the store at 127.0.0.1:${port} (ECONNREFUSED) after 5 s`))).toBe(true);
    expect(ms).toBeGreaterThan(6000);
    expect(ms).toBeLessThan(9000);
  }, 15_000);

  test("a port in use: ArgumentError naming the port, EADDRINUSE, and what to do", async () => {
    const held = runtime.sockets.listen("127.0.0.1", 0, () => ({ data() {}, close() {} }));
    try {
      const err = await Store.connect({ rank: 0, worldSize: 2, addr: "127.0.0.1", port: held.port }).catch((e) => e);
      expect(err).toBeInstanceOf(ArgumentError);
      expect(err.argument).toBe("port");
      expect(err.message).toContain(`${held.port} is already in use`);
      expect(err.message).toContain("EADDRINUSE");
      expect(err.message).toContain("MASTER_PORT");
    } finally {
      held.stop();
    }
  });

  test("bindAddr that is not an address of this host: ArgumentError naming bindAddr (EADDRNOTAVAIL)", async () => {
    const err = await Store.connect({ rank: 0, worldSize: 2, addr: "127.0.0.1", port: 0, bindAddr: "203.0.113.7" } as Parameters<typeof Store.connect>[0])
      .catch((e) => e);
    expect(err).toBeInstanceOf(ArgumentError);
    expect(err.argument).toBe("bindAddr");
    expect(err.message).toContain("EADDRNOTAVAIL");
  });
});

describe("after close()", () => {
  test("every call on a closed Store throws DisposedError, and a pending get rejects with it", async () => {
    const s = await Store.connect({ rank: 0, worldSize: 1, addr: "127.0.0.1", port: 0 });
    await s.set("a", "b");
    const pending = s.get("never", 60_000).catch((e) => e);
    await s.close();
    expect(await pending).toBeInstanceOf(DisposedError);
    await expect(s.set("a", "c")).rejects.toBeInstanceOf(DisposedError);
    await expect(s.get("a")).rejects.toBeInstanceOf(DisposedError);
    await expect(s.wait(["a"])).rejects.toBeInstanceOf(DisposedError);
    await expect(s.barrier("b")).rejects.toBeInstanceOf(DisposedError);
    await expect(s.allGather("g", Uint8Array.of(1))).rejects.toBeInstanceOf(DisposedError);
    await s.close(); // idempotent
  });

  test("the same for LocalStore", async () => {
    const [s] = LocalStore.group(1);
    await s!.close();
    await expect(s!.set("a", "b")).rejects.toBeInstanceOf(DisposedError);
    await expect(s!.get("a")).rejects.toBeInstanceOf(DisposedError);
    await expect(s!.barrier("b")).rejects.toBeInstanceOf(DisposedError);
  });
});

describe("a one-host job without WEFT_STORE_TOKEN", () => {
  const dir = join(tmpdir(), `weft-${process.getuid?.() ?? 0}`);

  test("rank 0 keeps its token in a file only this user can read; the other ranks join with it; close() removes it", async () => {
    const r0 = await Store.connect({ rank: 0, worldSize: 2, addr: "127.0.0.1", port: 0 });
    const file = join(dir, `store-${r0.port}.token`);
    expect(lstatSync(dir).mode & 0o777).toBe(0o700);
    expect(lstatSync(file).mode & 0o777).toBe(0o600);
    const r1 = await Store.connect({ rank: 1, worldSize: 2, addr: "127.0.0.1", port: r0.port });
    await r1.set("k", "v");
    expect(new TextDecoder().decode(await r0.get("k", 2000))).toBe("v");
    await r1.close();
    await r0.close();
    expect(existsSync(file)).toBe(false);
  });

  test("a file left by an earlier job on the port is replaced: a rank already waiting joins the new job", async () => {
    const [port] = await freePorts(1);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(join(dir, `store-${port}.token`), "stale-token-of-a-job-that-died", { mode: 0o600 });
    const r1 = Store.connect({ rank: 1, worldSize: 2, addr: "127.0.0.1", port: port!, timeoutMs: 10_000 });
    await sleep(200);
    const r0 = await Store.connect({ rank: 0, worldSize: 2, addr: "127.0.0.1", port: port! });
    const one = await r1;
    await one.set("x", "y");
    expect(new TextDecoder().decode(await r0.get("x", 2000))).toBe("y");
    await one.close();
    await r0.close();
  });

  test("a token path that is not this user's private directory is not used: rank 0 says to set WEFT_STORE_TOKEN", async () => {
    const saved = process.env.TMPDIR;
    const scratch = join(tmpdir(), `weft-test-${process.pid}`);
    mkdirSync(scratch, { recursive: true });
    writeFileSync(join(scratch, `weft-${process.getuid?.() ?? 0}`), "not a directory");
    process.env.TMPDIR = scratch;
    try {
      const err = await Store.connect({ rank: 0, worldSize: 2, addr: "127.0.0.1", port: 0 }).catch((e) => e);
      expect(err).toBeInstanceOf(ArgumentError);
      expect(err.argument).toBe("token");
      expect(err.message).toContain("WEFT_STORE_TOKEN");
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  test("a connection without the file's token is refused like any stranger", async () => {
    await using r0 = await Store.connect({ rank: 0, worldSize: 2, addr: "127.0.0.1", port: 0 });
    const err = await Store.connect({ rank: 1, worldSize: 2, addr: "127.0.0.1", port: r0.port, token: "a-guess-at-the-token-0000" } as Parameters<typeof Store.connect>[0])
      .catch((e) => e);
    expect(err).toBeInstanceOf(ArgumentError);
    expect(err.argument).toBe("token");
  });
});
