// local-store.ts — the store interface for several ranks inside one process (Communicator.local):
// one shared map, no sockets, the same limits and errors as the TCP store.
import { ArgumentError, TimeoutError } from "../errors.ts";
import { checkKey, checkTimeout, DEFAULT_TIMEOUT_MS, StoreBase, toBytes } from "./store-api.ts";

interface LocalShared {
  data: Map<string, Uint8Array>;
  watchers: Map<string, (() => void)[]>;
}

/** The store interface for several ranks in one process: no sockets, one shared map. */
export class LocalStore extends StoreBase {
  readonly rank: number;
  readonly worldSize: number;
  readonly #shared: LocalShared;

  private constructor(rank: number, worldSize: number, shared: LocalShared, timeoutMs: number) {
    super(timeoutMs);
    this.rank = rank;
    this.worldSize = worldSize;
    this.#shared = shared;
  }

  /** One store per rank of a group of `worldSize` ranks, all sharing one map. */
  static group(worldSize: number, opts: { timeoutMs?: number } = {}): LocalStore[] {
    const op = "LocalStore.group";
    if (!Number.isInteger(worldSize) || worldSize < 1) throw new ArgumentError(op, "worldSize", `must be a positive integer (got ${worldSize})`);
    const timeoutMs = checkTimeout(op, opts?.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    const shared: LocalShared = { data: new Map(), watchers: new Map() };
    return Array.from({ length: worldSize }, (_, r) => new LocalStore(r, worldSize, shared, timeoutMs));
  }

  async set(key: string, value: Uint8Array | string): Promise<void> {
    const op = "Store.set";
    checkKey(op, key);
    const bytes = toBytes(value, op);
    this.guard(op);
    this.#shared.data.set(key, bytes.slice());
    const ws = this.#shared.watchers.get(key);
    this.#shared.watchers.delete(key);
    ws?.forEach((w) => w());
  }

  protected async waitKeys(op: string, keys: string[], timeoutMs: number, values: boolean,
    describe: (missing: string[]) => string): Promise<(Uint8Array | undefined)[]> {
    this.guard(op);
    const { data, watchers } = this.#shared;
    const missing = keys.filter((k) => !data.has(k));
    if (missing.length > 0) {
      await new Promise<void>((resolve, reject) => {
        const left = new Set(missing);
        const timer = setTimeout(() => reject(new TimeoutError(describe([...left]), { code: "E_TIMEOUT", op })), timeoutMs);
        for (const k of missing) {
          const list = watchers.get(k) ?? [];
          list.push(() => {
            left.delete(k);
            if (left.size === 0) {
              clearTimeout(timer);
              resolve();
            }
          });
          watchers.set(k, list);
        }
      });
    }
    return keys.map((k) => (values ? data.get(k) : undefined));
  }

  async close(): Promise<void> {
    this.markClosed();
  }
}
