// native-env.ts — environment variables that native code in this process sees.
//
// Bun's process.env is a JS map: assigning to it does not call setenv(3), so a library loaded
// through bun:ffi (ours, NCCL) that reads its switches with getenv() never sees the change
// (oven-sh/bun issue 42891). Child processes do get the JS map. setNativeEnv writes both.
import { dlopen } from "bun:ffi";

let libc: ReturnType<typeof open> | undefined;
function open() {
  return dlopen("libc.so.6", {
    setenv: { args: ["cstring", "cstring", "i32"], returns: "i32" },
    unsetenv: { args: ["cstring"], returns: "i32" },
  });
}
const cstr = (s: string) => Buffer.from(s + "\0");

/** Sets (or, with undefined, removes) `name` in both process.env and the C environment. */
export function setNativeEnv(name: string, value: string | undefined): void {
  libc ??= open();
  if (value === undefined) {
    delete process.env[name];
    libc.symbols.unsetenv(cstr(name));
  } else {
    process.env[name] = value;
    libc.symbols.setenv(cstr(name), cstr(value), 1);
  }
}
