/** The contract between `idempotent()` and the stores that remember which effects happened. */

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
