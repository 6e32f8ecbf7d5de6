/** `tickwheel/idempotent`: exactly-once effects on at-least-once delivery (docs/idempotent.md). */

export { idempotent, messageKey, type IdempotentOptions } from './idempotent.js';
export {
  IdempotentRollbackError,
  PostgresIdempotencyStore,
  postgresMigration,
  type PgClient,
  type PgPool,
  type PgResult,
  type PostgresIdempotencyOptions,
} from './postgres.js';
export { RedisIdempotencyStore, type RedisIdempotencyOptions } from './redis.js';
export type { IdempotencyStats, IdempotencyStore, KeyedMessage, Outcome } from './types.js';
