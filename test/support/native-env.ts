// native-env.ts — environment variables that native code in this process sees.
//
// Bun's process.env is a JS map: assigning to it does not call setenv(3), so a library loaded
// through bun:ffi (ours, NCCL) that reads its switches with getenv() never sees the change
// (oven-sh/bun issue 42891). Deno's does call setenv. Child processes get the JS map in both.
// setNativeEnv writes both, through libc, in either runtime.
import { runtime, T } from "../../lib/runtime/index.ts";

const LIBC = {
  setenv: { args: [T.ptr, T.ptr, T.i32], returns: T.i32 },
  unsetenv: { args: [T.ptr], returns: T.i32 },
} as const;

let libc: ReturnType<typeof runtime.open<typeof LIBC>> | undefined;
const cstr = (s: string) => new TextEncoder().encode(s + "\0");

/** Sets (or, with undefined, removes) `name` in both process.env and the C environment. */
export function setNativeEnv(name: string, value: string | undefined): void {
  libc ??= runtime.open("libc.so.6", LIBC);
  if (value === undefined) {
    delete process.env[name];
    libc.symbols.unsetenv(cstr(name));
  } else {
    process.env[name] = value;
    libc.symbols.setenv(cstr(name), cstr(value), 1);
  }
}
