/** The contract between `idempotent()` and the stores that remember which effects happened. */

import { invalidOption } from '../validate.js';

/** What a store remembers a message by: anything with the queue's id and topic. */
export interface KeyedMessage {
  readonly id: string;
  readonly topic: string;
}

/** What `once` did: ran the effect, or found the key done and ran nothing. */
export type Outcome = 'ran' | 'duplicate';

/** Counts of a store since it was made. */
export interface IdempotencyStats {
  ran: number;
  /** Deliveries whose key was already done: acked without running the handler. */
  duplicates: number;
  /** Effects that threw: nothing marked, the delivery fails (and is retried by the queue). */
  failed: number;
  /** Redis store only: effects that outlived their claim (another may have run them too). */
  claimsExpired: number;
  purged: number;
}

/**
 * `once(key, effect)` runs `effect` unless `key` is done, and marks it done if it succeeds;
 * `context` is what the store lends the effect (the PostgreSQL store's transaction client).
 */
export interface IdempotencyStore<Context> {
  once(key: string, effect: (context: Context) => unknown): Promise<Outcome>;
  stats(): IdempotencyStats;
  /** Stops the store's own timers (retention). Does not close what the user passed in. */
  close(): Promise<void>;
}

export function emptyStats(): IdempotencyStats {
  return { ran: 0, duplicates: 0, failed: 0, claimsExpired: 0, purged: 0 };
}

/** The longest key a store takes, in UTF-8 bytes (PostgreSQL's index holds ~2.7 KB a row). */
export const MAX_KEY_BYTES = 1024;
/** With the u flag a surrogate pair is one code point: this finds only unpaired halves. */
const LONE_SURROGATE = /\p{Surrogate}/u;

/**
 * Refuses a key every store could not keep as it is: empty, over MAX_KEY_BYTES, with a NUL
 * (PostgreSQL's text has none) or a lone surrogate (UTF-8 has none: two keys would be one).
 */
export function checkKey(key: unknown): string {
  let why: string | undefined;
  if (typeof key !== 'string' || key.length === 0) why = 'a non-empty string';
  else if (key.includes('\0')) why = 'a string without NUL characters';
  else if (LONE_SURROGATE.test(key)) why = 'well-formed text (it has a lone surrogate)';
  else if (Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) {
    why = `at most ${MAX_KEY_BYTES} bytes (UTF-8)`;
  }
  if (why === undefined) return key as string;
  const shown = typeof key === 'string' ? JSON.stringify(key.slice(0, 60)) : String(key);
  throw invalidOption(`an idempotency key must be ${why}, got ${shown}`);
}
