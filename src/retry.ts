/**
 * Trying again until a deadline: a node opened while its store is down, restarting or still
 * starting keeps trying rather than dying on the first refused connection (src/valkey/reach.ts,
 * src/postgres/reach.ts say which failures are worth a wait).
 */

import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Runs `attempt` (given the time left) until it succeeds or fails in a way `retryable` does not
 * take, pausing 100 ms doubling to 2 s, jittered. Past `timeoutMs`, throws what `gaveUp` makes
 * of the last failure. `attempt` must leave nothing open when it fails.
 */
export async function retryUntil<T>(
  timeoutMs: number,
  attempt: (leftMs: number) => Promise<T>,
  retryable: (err: unknown) => boolean,
  gaveUp: (last: unknown) => Error,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let pause = 100; ; pause = Math.min(pause * 2, 2_000)) {
    try {
      return await attempt(Math.max(1, deadline - Date.now()));
    } catch (err) {
      if (!retryable(err)) throw err;
      const wait = pause / 2 + Math.random() * (pause / 2);
      if (Date.now() + wait >= deadline) throw gaveUp(err);
      await sleep(wait);
    }
  }
}
