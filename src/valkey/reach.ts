/**
 * Reaching Valkey/Redis: the bound on every call, which failures mean "the server is not there
 * now" rather than "the call is wrong", and opening again and again through those until a
 * deadline (a node started while its primary restarts must not die on the first reset).
 */

import { TickwheelStateError, TickwheelUnavailableError } from '../errors.js';
import { retryUntil } from '../retry.js';
import { hidePassword } from '../validate.js';

/** A server at its maxmemory refuses a function that may write before running it. */
export const OOM = /^OOM\b/;
/** Replies by which a server says "not now" during a failover: the command was not run. */
// MOVED and ASK reach here only from a pinned connection; a WAIT sent to a primary demoted
// since is refused so too (test/cluster/schedule-failover.test.ts).
export const REFUSALS =
  /^(CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN|READONLY|MOVED|ASK|OOM)\b|^ERR WAIT(AOF)? cannot be used with replica/;
/**
 * Replies that waiting does not cure: a wrong or missing password, a user without the right, a
 * database number the server does not have.
 */
const MISCONFIGURED =
  /^(WRONGPASS|NOAUTH|NOPERM)\b|^ERR (DB index is out of range|invalid password)/;
/** FCALL of a function the server does not have (Valkey and Redis answer alike). */
export const NO_FUNCTION = /^ERR Function not found/i;

/** node-redis's errors for a connection that is down or went down (outcome unknown). */
export function isConnectionError(err: unknown): boolean {
  // node-redis's TimeoutError keeps Error's name: its class tells. DisconnectsClientError: the
  // Cluster client dropped a node that left its slot map with calls still on it.
  const name = `${(err as { name?: string } | null)?.name ?? ''} ${(err as object | null)?.constructor?.name ?? ''}`;
  const code = (err as { code?: string } | null)?.code ?? '';
  return (
    /Socket|ClientClosed|ClientOffline|DisconnectsClient|Connection|Reconnect|Timeout/.test(name) ||
    /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|ENOTCONN)$/.test(code)
  );
}

/** Whether `err` says the server is not there now: worth trying again later. */
export function isUnreachable(err: unknown): boolean {
  if (misconfigured(err) !== undefined) return false;
  if ((err as { code?: unknown } | null)?.code === 'ERR_TICKWHEEL_UNAVAILABLE') return true;
  return isConnectionError(err) || REFUSALS.test(err instanceof Error ? err.message : '');
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
  const trouble = OOM.test(why)
    ? `Valkey/Redis at ${shown} is at its maxmemory and refuses writes${after}`
    : `could not reach Valkey/Redis at ${shown}${after}`;
  return new TickwheelUnavailableError('ERR_TICKWHEEL_UNAVAILABLE', `${trouble}: ${why}`, {
    cause,
  });
}

/** The refusal's text when `err` (or its cause) is one waiting does not cure, else undefined. */
export function misconfigured(err: unknown): string | undefined {
  for (let at: unknown = err, depth = 0; at instanceof Error && depth < 3; depth++) {
    if (MISCONFIGURED.test(at.message)) return at.message;
    at = (at as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * Runs `attempt` (given the time left) until it succeeds or fails for another reason than the
 * server's absence (retry.ts). Past `timeoutMs`, ERR_TICKWHEEL_UNAVAILABLE. A refusal waiting
 * does not cure (a wrong password) ends it at once with ERR_TICKWHEEL_INVALID_STATE.
 */
export async function untilReachable<T>(
  urls: readonly string[],
  timeoutMs: number,
  attempt: (leftMs: number) => Promise<T>,
): Promise<T> {
  try {
    return await retryUntil(timeoutMs, attempt, isUnreachable, (err) => {
      const last = (err as { cause?: unknown }).cause ?? err;
      return unavailable(urls, last, ` (kept trying for ${timeoutMs} ms, the connect timeout)`);
    });
  } catch (err) {
    const refusal = misconfigured(err);
    if (refusal === undefined) throw err;
    throw new TickwheelStateError(
      'ERR_TICKWHEEL_INVALID_STATE',
      `Valkey/Redis at ${urls.map(hidePassword).join(', ')} refused the connection: ${refusal}`,
      { cause: err },
    );
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
 * Runs a node-redis command that must answer within `ms`, else a TimeoutError and the command
 * aborted. Our own timer rather than node-redis's `timeout` option, whose AbortSignal.timeout
 * per command lives the whole timeout: tens of KB of old-space garbage per message under load.
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

/** `call`, or a rejection (`late`) once `ms` have passed, after which `onLate` runs. */
export function withinMs<T>(
  call: Promise<T>,
  ms: number,
  late = (): Error =>
    Object.assign(new Error(`no answer within ${ms} ms`), { name: 'TimeoutError' }),
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
