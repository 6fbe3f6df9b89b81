// token-file.ts — the job token of a one-host job that was given none.
//
// When every rank runs on this host and no WEFT_STORE_TOKEN is set, rank 0 makes a random token
// and writes it to <tmpdir>/weft-<uid>/store-<port>.token: a directory only this user may enter,
// a file only this user may read. The other ranks (the same user, on the same host) read it from
// there, so another user's process on the host cannot join the job or forge its values. A file
// left behind by a job that died is replaced by the next rank 0 on that port; a rank that read
// the stale one is refused, reads again and retries (tcp-store.ts).
import { chmodSync, lstatSync, mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";

function uid(): number {
  return process.getuid?.() ?? 0;
}

function directory(): string {
  return join(tmpdir(), `weft-${uid()}`);
}

export function tokenFilePath(port: number): string {
  return join(directory(), `store-${port}.token`);
}

/** The private directory, made if missing; throws when it exists but another user could use it. */
function privateDirectory(): string {
  const dir = directory();
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  if (!st.isDirectory() || st.uid !== uid()) {
    throw new Error(`${dir} is not a directory owned by this user (uid ${uid()}): remove it, or set WEFT_STORE_TOKEN`);
  }
  if ((st.mode & 0o077) !== 0) chmodSync(dir, 0o700);
  return dir;
}

/** Rank 0: writes the token for `port` (atomically: a reader sees the old file or the new one). */
export function publishToken(port: number, token: string): void {
  privateDirectory();
  const path = tokenFilePath(port);
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, token, { mode: 0o600 });
  renameSync(tmp, path);
}

/** Another rank: the token rank 0 published for `port`, or undefined while there is none (or the
 * file is not this user's private file, which is never trusted). */
export function readToken(port: number): string | undefined {
  const path = tokenFilePath(port);
  try {
    const st = lstatSync(path);
    if (!st.isFile() || st.uid !== uid() || (st.mode & 0o077) !== 0) return undefined;
    const dir = lstatSync(directory());
    if (!dir.isDirectory() || dir.uid !== uid() || (dir.mode & 0o077) !== 0) return undefined;
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

/** Rank 0 at close: removes the file if it still holds this job's token. */
export function withdrawToken(port: number, token: string): void {
  try {
    if (readToken(port) === token) unlinkSync(tokenFilePath(port));
  } catch {
    // another job took the port and rewrote the file since: it is theirs now
  }
}
