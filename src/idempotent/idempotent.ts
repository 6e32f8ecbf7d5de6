/**
 * `idempotent(handler, { store })`: a consumer handler whose effect happens once per message,
 * however often it is delivered (docs/idempotent.md); for any handler `(message) => ...`.
 */

import { checkCallback, describe, invalidOption } from '../validate.js';
import type { IdempotencyStore, KeyedMessage, Outcome } from './types.js';

export interface IdempotentOptions<M extends KeyedMessage, Context> {
  store: IdempotencyStore<Context>;
  /**
   * Default `<topic>/<id>`. An id used again for a new message (a daily reminder under one id)
   * needs a key that tells the two apart, such as the id with the day in it.
   */
  key?: (message: M) => string;
  /** After each delivery (for logs and metrics). */
  onOutcome?: (outcome: Outcome, message: M) => void;
}

/** The default key. */
export function messageKey(message: KeyedMessage): string {
  return `${message.topic}/${message.id}`;
}

/**
 * Wraps `handler` so that its effect happens once per key. A duplicate resolves without calling
 * it (the consumer then acks); an effect that throws marks nothing and the error reaches the
 * consumer (which nacks, so the queue retries it).
 */
export function idempotent<M extends KeyedMessage, Context, R>(
  handler: (message: M, context: Context) => R | Promise<R>,
  options: IdempotentOptions<M, Context>,
): (message: M) => Promise<void> {
  checkCallback(handler, 'handler');
  const store = options?.store;
  if (
    store === null ||
    typeof store !== 'object' ||
    typeof (store as { once?: unknown }).once !== 'function'
  ) {
    throw invalidOption(
      `store must be an idempotency store (PostgresIdempotencyStore, RedisIdempotencyStore), got ${describe(store)}`,
    );
  }
  const keyOf = options.key ?? messageKey;
  if (typeof keyOf !== 'function') {
    throw invalidOption(`key must be a function of the message, got ${describe(keyOf)}`);
  }
  return async (message: M) => {
    const key = keyOf(message);
    if (typeof key !== 'string' || key.length === 0) {
      throw invalidOption(`key() must return a non-empty string, got ${describe(key)}`);
    }
    const outcome = await store.once(key, (context) => handler(message, context));
    options.onOutcome?.(outcome, message);
  };
}
