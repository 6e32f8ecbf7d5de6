/**
 * Reaching PostgreSQL at open: a node started while its database is down, restarting or still
 * starting up keeps trying until `connectTimeoutMs` rather than dying on the first refused
 * connection. A refusal that waiting does not cure (a wrong password, a missing database, a
 * schema it may not write) ends the wait at once.
 */

import { TickwheelUnavailableError } from '../errors.js';
import { retryUntil } from '../retry.js';
import { hidePassword, invalidOption } from '../validate.js';
import { named, type PgModule } from './pg.js';

/**
 * A connection string pg can read as meant: pg reads any scheme (mysql://..., http://...) as a
 * PostgreSQL URL, takes text that is not a URL for a host name, and an empty string for
 * 127.0.0.1:5432.
 */
export function checkConnectionString(url: string): void {
  if (!/^(postgres|postgresql):\/\/./i.test(url) && !/^socket:\/\/./i.test(url)) {
    const shown = url === '' ? 'an empty string' : JSON.stringify(hidePassword(url).slice(0, 80));
    throw invalidOption(
      `postgres must be a postgres:// or postgresql:// connection string (or a pg.Pool), got ${shown}`,
    );
  }
}

function isUnavailable(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === 'ERR_TICKWHEEL_UNAVAILABLE';
}

/**
 * One connection made and closed, within `leftMs`: a host that drops packets times out instead
 * of holding the open for as long as TCP keeps trying. Errors are named (pg.ts).
 */
export async function probe(pg: PgModule, url: string, leftMs: number): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: leftMs });
  // A connection that fails after connect() has settled must not be an unhandled 'error'.
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (err) {
    throw named(err, 'a connection');
  }
  await client.end().catch(() => undefined);
}

/**
 * Runs `attempt` (given the time left) until it succeeds or fails with another error than
 * ERR_TICKWHEEL_UNAVAILABLE (retry.ts). Past `timeoutMs`, ERR_TICKWHEEL_UNAVAILABLE naming
 * where it kept trying.
 */
export function untilReachable<T>(
  where: string,
  timeoutMs: number,
  attempt: (leftMs: number) => Promise<T>,
): Promise<T> {
  return retryUntil(timeoutMs, attempt, isUnavailable, (err) => {
    const cause = (err as { cause?: unknown }).cause ?? err;
    const why = cause instanceof Error ? cause.message : String(cause);
    return new TickwheelUnavailableError(
      'ERR_TICKWHEEL_UNAVAILABLE',
      `could not reach PostgreSQL at ${where} (kept trying for ${timeoutMs} ms, the connect ` +
        `timeout): ${why}`,
      { cause },
    );
  });
}
