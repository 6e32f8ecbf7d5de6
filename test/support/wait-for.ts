/**
 * Waiting for a condition instead of sleeping for a guessed time: a test that sleeps and then
 * asserts passes or fails with the machine's load, one that waits for the condition only
 * takes longer on a slow machine.
 */

export interface WaitForOptions {
  /** How long the condition may take before the wait fails (default 10 s). */
  timeoutMs?: number;
  /** The pause between two checks (default 10 ms). */
  intervalMs?: number;
  /** What is awaited, for the error message. */
  what?: string;
}

/**
 * Resolves with the condition's first truthy result. A condition that throws counts as not
 * yet, so an `expect(...)` can be the condition; when the time is up, its last error is thrown.
 */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  options: WaitForOptions = {},
): Promise<NonNullable<T>> {
  const { timeoutMs = 10_000, intervalMs = 10, what } = options;
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    let failure: unknown;
    try {
      const result = await condition();
      if (result) return result as NonNullable<T>;
    } catch (err) {
      failure = err;
    }
    if (performance.now() > deadline) {
      if (failure !== undefined) throw failure;
      throw new Error(
        `not so after ${timeoutMs} ms: ${what ?? condition.toString().replace(/\s+/g, ' ')}`,
      );
    }
    await sleep(intervalMs);
  }
}

/** A pause that decides nothing: pacing a load, or letting time pass in a test of time itself. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
