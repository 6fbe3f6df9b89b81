// case.ts — one bad-input case: what to call, the error class it must throw, the argument it must name.
export interface BadInputCase {
  name: string;
  run: () => unknown | Promise<unknown>;
  error: abstract new (...args: never[]) => Error;
  names: string;
}
