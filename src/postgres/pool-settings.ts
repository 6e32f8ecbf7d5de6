/**
 * The settings of the pool a PostgreSQL queue makes from a connection string: its size, its
 * connections' statement_timeout, and the session settings its statements are written for.
 */

import { checkOption } from '../validate.js';

/**
 * What the queue's own connections run with whatever the database's or the role's defaults:
 * its statements are written for read committed (under serializable each conflict is retried,
 * and deliveries ran 20-200x later), and a row lock is waited for, not failed after lock_timeout.
 */
const SESSION_SETTINGS = '-c default_transaction_isolation=read\\ committed -c lock_timeout=0';

/**
 * The connection string and `options` of the queue's own pool: the string's own `options`
 * parameter (pg would take it over the config's) first, SESSION_SETTINGS after, which win.
 */
export function withSessionSettings(connectionString: string) {
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    return { connectionString, options: SESSION_SETTINGS };
  }
  const given = url.searchParams.get('options');
  if (given === null) return { connectionString, options: SESSION_SETTINGS };
  url.searchParams.delete('options');
  return { connectionString: url.toString(), options: `${given} ${SESSION_SETTINGS}` };
}

/**
 * Largest statement_timeout: a day. The answer's own timer (the timeout and a grace) must stay
 * within a Node.js timer's 2^31-1 ms, past which it would fire at once.
 */
const MAX_STATEMENT_TIMEOUT_MS = 86_400_000;

/** The pool's options: its size, and its connections' statement_timeout. */
export function checkPoolOptions(options: { poolSize?: number; statementTimeoutMs?: number }): {
  poolSize: number;
  timeout: number;
} {
  return {
    poolSize: checkOption(options.poolSize ?? 10, 'poolSize', 1, 1_000, true),
    timeout: checkOption(
      options.statementTimeoutMs ?? 10_000,
      'statementTimeoutMs',
      1,
      MAX_STATEMENT_TIMEOUT_MS,
      true,
    ),
  };
}
