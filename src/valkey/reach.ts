/**
 * Reaching Valkey/Redis: the bound on every call, which failures mean "the server is not there
 * now" (down, restarting, loading its data, failing over) rather than "the call is wrong", and
 * opening a node again and again through such failures until a deadline.
 *
 * A running node rides out an outage: its calls fail ERR_TICKWHEEL_UNAVAILABLE, its background
 * work retries. A node that is opening must do the same, or one started while its primary
 * restarts dies on the first reset connection (untilReachable).
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { TickwheelUnavailableError } from '../errors.js';

/** Replies by which a server says "not now" during a failover: the command was not run. */
// MOVED and ASK reach here only from a pinned connection (the Cluster client follows them).
// A WAIT or WAITAOF sent to a server that is a replica by then is refused so too (seen after a
// failover whose killed primary came back as a replica: test/cluster/schedule-failover.test.ts).
export const REFUSALS =
  /^(CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN|READONLY|MOVED|ASK)\b|^ERR WAIT(AOF)? cannot be used with replica/;
/** FCALL of a function the server does not have (Valkey and Redis answer alike). */
export const NO_FUNCTION = /^ERR Function not found/i;

/** node-redis's errors for a connection that is down or went down (outcome unknown). */
export function isConnectionError(err: unknown): boolean {
  // node-redis's TimeoutError (a call past commandTimeoutMs) keeps Error's name and has no
  // message: its class tells. DisconnectsClientError: the Cluster client dropped the connection
  // of a node that left its slot map (a primary killed, its replica promoted) with calls still
  // on it (test/cluster/schedule-failover.test.ts).
  const name = `${(err as { name?: string } | null)?.name ?? ''} ${(err as object | null)?.constructor?.name ?? ''}`;
  const code = (err as { code?: string } | null)?.code ?? '';
  return (
    /Socket|ClientClosed|ClientOffline|DisconnectsClient|Connection|Reconnect|Timeout/.test(name) ||
    /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|ENOTCONN)$/.test(code)
  );
}

/** Whether `err` says the server is not there now: worth trying again later, as it was. */
function isUnreachable(err: unknown): boolean {
  if ((err as { code?: unknown } | null)?.code === 'ERR_TICKWHEEL_UNAVAILABLE') return true;
  return isConnectionError(err) || REFUSALS.test(err instanceof Error ? err.message : '');
}

/** A URL as it may be shown: its password starred. */
export function hidePassword(url: string): string {
  return url.replace(/(\/\/[^:@/]*:)[^@/]*@/, '$1***@');
}

export function unavailable(
  urls: readonly string[],
  cause: unknown,
  after = '',
): TickwheelUnavailableError {
  const shown = urls.map(hidePassword).join(', ');
  const why =
    cause instanceof Error
      ? cause.message || `${cause.constructor.name} (no answer in time)`
      : String(cause);
  const error = new TickwheelUnavailableError(
    'ERR_TICKWHEEL_UNAVAILABLE',
    `could not reach Valkey/Redis at ${shown}${after}: ${why}`,
  );
  (error as Error & { cause?: unknown }).cause = cause;
  return error;
}

/**
 * Runs `attempt` (given the time left) until it succeeds, or fails otherwise than for want of
 * the server (isUnreachable: that failure is thrown as it is), pausing 100 ms, then twice as
 * long each time up to 2 s, with jitter so that nodes started together do not knock together.
 * Past `timeoutMs` the last failure is thrown as ERR_TICKWHEEL_UNAVAILABLE. `attempt` must
 * leave nothing open when it fails, and must be safe to repeat.
 */
export async function untilReachable<T>(
  urls: readonly string[],
  timeoutMs: number,
  attempt: (leftMs: number) => Promise<T>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let pause = 100; ; pause = Math.min(pause * 2, 2_000)) {
    try {
      return await attempt(Math.max(1, deadline - Date.now()));
    } catch (err) {
      if (!isUnreachable(err)) throw err;
      const wait = pause / 2 + Math.random() * (pause / 2);
      if (Date.now() + wait >= deadline) {
        const last = (err as { cause?: unknown }).cause ?? err;
        throw unavailable(urls, last, ` (kept trying for ${timeoutMs} ms, the connect timeout)`);
      }
      await sleep(wait);
    }
  }
}

/**
 * `connection` connects by `deadline`, or is destroyed: rejects ERR_TICKWHEEL_UNAVAILABLE when
 * the deadline passed first, or with the failure to connect.
 */
export async function withDeadline(
  connection: { connect(): Promise<unknown>; destroy(): unknown },
  deadline: number,
  urls: readonly string[],
): Promise<void> {
  try {
    await withinMs(connection.connect(), Math.max(0, deadline - Date.now()), () =>
      unavailable(urls, new Error('connecting took too long')),
    );
  } catch (err) {
    destroyQuietly(connection);
    throw err;
  }
}

/** Drops a connection; one that never connected (destroy() then throws) needs nothing. */
export function destroyQuietly(connection: { destroy(): unknown } | undefined): void {
  try {
    connection?.destroy();
  } catch {
    // Never connected, or already gone.
  }
}

/**
 * Runs a node-redis command that must answer within `ms`: past that it rejects with a
 * TimeoutError, and the command is aborted (one not written yet is then never sent). Our own
 * timer rather than node-redis's `timeout` option, which makes an AbortSignal.timeout per
 * command whose timer and listeners live the whole timeout whatever the answer: with a 10 s
 * bound that was tens of KB of old-space garbage per message under steady load, and a 20-30 ms
 * mark-compact pause every two seconds.
 */
export function within<T, O extends object>(
  ms: number,
  run: (options: O & { abortSignal: AbortSignal }) => Promise<T>,
  options?: O,
): Promise<T> {
  const controller = new AbortController();
  const call = run({ ...(options as O), abortSignal: controller.signal });
  return withinMs(call, ms, undefined, () => controller.abort());
}

function timeoutError(ms: number): Error {
  const error = new Error(`no answer within ${ms} ms`);
  error.name = 'TimeoutError';
  return error;
}

/**
 * `call`, or a rejection once `ms` have passed without an answer (a TimeoutError, or what `late`
 * makes), after which `onLate` runs. The timer goes as soon as the race is decided.
 */
export function withinMs<T>(
  call: Promise<T>,
  ms: number,
  late = (): Error => timeoutError(ms),
  onLate?: () => void,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      // The timeout first: the race settles with it, not with what onLate makes `call` do.
      reject(late());
      onLate?.();
    }, ms);
  });
  return Promise.race([call, timeout]).finally(() => clearTimeout(timer));
}
