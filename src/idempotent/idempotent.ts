/**
 * `idempotent(handler, { store })`: a consumer handler whose effect happens once per message,
 * however often it is delivered (docs/idempotent.md); for any handler `(message) => ...`.
 */

import { emitCodedWarning, TickwheelTypeError } from '../errors.js';
import { checkCallback, checkOptions, describe, invalidOption } from '../validate.js';
import { checkKey, type IdempotencyStore, type KeyedMessage, type Outcome } from './types.js';

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

const OPTIONS = ['store', 'key', 'onOutcome'];

/** The default key; a message without a topic and an id (strings) has none. */
export function messageKey(message: KeyedMessage): string {
  const { topic, id } = (message ?? {}) as Partial<KeyedMessage>;
  if (typeof topic !== 'string' || typeof id !== 'string' || id === '') {
    // Keyed "undefined/undefined", every such message would pass for the first one's duplicate.
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_MESSAGE',
      `the default key is <topic>/<id>, and this message has no topic and id strings (got ${describe(message)}); give idempotent() a key option for messages of another shape`,
    );
  }
  return `${topic}/${id}`;
}

/** Calls onOutcome; one that throws is warned about: the effect is done, the delivery stands. */
function tell<M>(onOutcome: (outcome: Outcome, message: M) => void, outcome: Outcome, message: M) {
  try {
    onOutcome(outcome, message);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    emitCodedWarning('ERR_TICKWHEEL_LISTENER_FAILED', `onOutcome threw: ${why}`, err);
  }
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
  checkOptions(options, OPTIONS, 'idempotent()', 'idempotent(handler, { store })');
  const store = options.store;
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
  const { onOutcome } = options;
  if (onOutcome !== undefined) checkCallback(onOutcome, 'onOutcome');
  return async (message: M) => {
    const key = keyOf(message);
    if (typeof key !== 'string') {
      throw invalidOption(`key() must return a non-empty string, got ${describe(key)}`);
    }
    checkKey(key);
    const outcome = await store.once(key, (context) => handler(message, context));
    if (onOutcome !== undefined) tell(onOutcome, outcome, message);
  };
}
