// argument-error.ts (test support) — the one check the validation tests make of bad input: the call
// throws an ArgumentError that names the argument at fault.
import { ArgumentError } from "../../lib/errors.ts";
import { expect } from "./test-api.ts";

/** Runs fn and expects an ArgumentError whose `argument` is `argument` (or matches it, a RegExp),
 * and whose message matches `message` when given; returns the message. */
export function argError(fn: () => unknown, argument: string | RegExp, message?: RegExp): string {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ArgumentError);
    const named = (e as ArgumentError).argument;
    if (typeof argument === "string") expect(named).toBe(argument);
    else expect(named).toMatch(argument);
    if (message !== undefined) expect((e as Error).message).toMatch(message);
    return (e as Error).message;
  }
  throw new Error(`expected an ArgumentError naming '${argument}'`);
}
