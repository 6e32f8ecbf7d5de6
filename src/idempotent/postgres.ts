/**
 * The PostgreSQL idempotency store: the key goes in in the handler's transaction, so the effect
 * and the "done" mark commit together. BEGIN; INSERT the key ON CONFLICT DO NOTHING (0 rows:
 * ROLLBACK, 'duplicate'); the handler; COMMIT, 'ran'. A COMMIT after a failed statement answers
 * with the tag ROLLBACK, not an error: the delivery must fail (no tags: the key is read first).
 * A handler that ends the transaction itself (ROLLBACK or COMMIT on the client it was given) would
 * leave its later writes outside it and the mark perhaps undone: before COMMIT, the transaction
 * is checked to be the one that wrote the mark.
 */

import { TickwheelError, checkOpen } from '../errors.js';
import { checkOption, describe, invalidOption } from '../validate.js';
import {
  checkKey,
  emptyStats,
  type IdempotencyStats,
  type IdempotencyStore,
  type Outcome,
} from './types.js';

export interface PgResult {
  rowCount: number | null;
  rows?: Array<Record<string, unknown>>;
  /** The command tag (`pg` has it): `ROLLBACK` for a COMMIT of an aborted transaction. */
  command?: string;
}

/** `pg`'s PoolClient. */
export interface PgClient {
  query(text: string, values?: unknown[]): Promise<PgResult>;
  release(err?: Error | boolean): void;
  /** pg's clients emit 'error' when their connection is lost, a query running or not. */
  on?(event: 'error', listener: (err: Error) => void): unknown;
  off?(event: 'error', listener: (err: Error) => void): unknown;
}

/** `pg`'s Pool. */
export interface PgPool {
  connect(): Promise<PgClient>;
  query(text: string, values?: unknown[]): Promise<PgResult>;
}

export interface PostgresIdempotencyOptions {
  pool: PgPool;
  /** Table of done keys, created on first use when missing. Default `tickwheel_processed`. */
  table?: string;
  /** Longer than a message can be delivered again (requeues too). Default 30 days; >= 1 hour. */
  retentionMs?: number;
  /** How often keys past retention are deleted; 0: never (call `purge()`). Default 1 hour. */
  purgeEveryMs?: number;
}

const HOUR = 3_600_000;
/** A table name, optionally with its schema: unquoted identifiers only. */
const TABLE = /^([a-z_][a-z0-9_]{0,62}\.)?[a-z_][a-z0-9_]{0,62}$/;

/** The SQL that makes the table (what the store runs on first use; for migration tools). */
export function postgresMigration(table = 'tickwheel_processed'): string {
  checkTable(table);
  const index = `${table.replace(/^.*\./, '')}_processed_at`;
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (`,
    '  key text PRIMARY KEY,',
    '  processed_at timestamptz NOT NULL DEFAULT now()',
    ');',
    `CREATE INDEX IF NOT EXISTS ${index} ON ${table} (processed_at);`,
  ].join('\n');
}

function checkTable(table: unknown): string {
  if (typeof table !== 'string' || !TABLE.test(table)) {
    throw invalidOption(
      `table must be a lower-case SQL name (schema.table allowed), got ${describe(table)}`,
    );
  }
  return table;
}

export class PostgresIdempotencyStore implements IdempotencyStore<{ client: PgClient }> {
  private readonly pool: PgPool;
  private readonly table: string;
  private readonly retentionMs: number;
  private readonly counts = emptyStats();
  private migrated: Promise<void> | undefined;
  private purger: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(options: PostgresIdempotencyOptions) {
    const pool = options?.pool;
    if (
      pool === null ||
      typeof pool !== 'object' ||
      typeof pool.connect !== 'function' ||
      typeof pool.query !== 'function'
    ) {
      throw invalidOption(`pool must be a pg Pool (connect() and query()), got ${describe(pool)}`);
    }
    this.pool = pool;
    this.table = checkTable(options.table ?? 'tickwheel_processed');
    this.retentionMs = checkOption(options.retentionMs ?? 30 * 24 * HOUR, 'retentionMs', HOUR);
    const every = checkOption(options.purgeEveryMs ?? HOUR, 'purgeEveryMs', 0, 2 ** 31 - 1);
    if (every > 0) {
      this.purger = setInterval(() => {
        this.purge().catch(() => {
          // The next round tries again; purge() called by hand reports its error.
        });
      }, every);
      this.purger.unref();
    }
  }

  /** Creates the table if it is missing (once; `once` calls it first). */
  migrate(): Promise<void> {
    this.migrated ??= this.pool
      .query(postgresMigration(this.table))
      .then(() => undefined)
      .catch((err: unknown) => {
        this.migrated = undefined;
        throw err;
      });
    return this.migrated;
  }

  async once(key: string, effect: (context: { client: PgClient }) => unknown): Promise<Outcome> {
    checkOpen(this.closed, 'this idempotency store is closed');
    checkKey(key);
    await this.migrate();
    const client = await this.pool.connect();
    // If a transaction may be open a failure rolls it back; a client that cannot is destroyed.
    let open = false;
    let broken: Error | undefined;
    // A connection lost while held is an 'error' event, which kills the process unless heard;
    // the transaction's next query fails with it.
    const lost = (err: Error) => (broken = err);
    client.on?.('error', lost);
    try {
      await client.query('BEGIN');
      open = true;
      const inserted = await client.query(
        `INSERT INTO ${this.table} (key) VALUES ($1) ON CONFLICT (key) DO NOTHING ` +
          'RETURNING txid_current()::text AS tx',
        [key],
      );
      if (inserted.rowCount === 0) {
        await client.query('ROLLBACK');
        open = false;
        this.counts.duplicates++;
        return 'duplicate';
      }
      try {
        await effect({ client });
        await this.checkStanding(client, key, inserted.rows?.[0]?.tx);
      } catch (err) {
        this.counts.failed++;
        throw err;
      }
      const committed = await client.query('COMMIT');
      open = false;
      if (committed.command === 'ROLLBACK') {
        this.counts.failed++;
        throw rolledBack(key);
      }
      this.counts.ran++;
      return 'ran';
    } catch (err) {
      if (open && broken === undefined) {
        await client.query('ROLLBACK').catch((failure: unknown) => {
          broken = failure instanceof Error ? failure : new Error(String(failure));
        });
      }
      throw err;
    } finally {
      client.off?.('error', lost);
      client.release(broken);
    }
  }

  /**
   * Fails unless the transaction still holds the mark, is the one that wrote it (`tx`; a client
   * without rows: the mark alone) and is not aborted: the handler did not end it.
   */
  private async checkStanding(client: PgClient, key: string, tx: unknown): Promise<void> {
    let found: PgResult;
    try {
      found = await client.query(
        `SELECT txid_current_if_assigned()::text AS tx FROM ${this.table} WHERE key = $1`,
        [key],
      );
    } catch (err) {
      throw rolledBack(key, err);
    }
    const now = found.rows?.[0]?.tx;
    if (found.rowCount === 0 || (tx !== undefined && now !== tx)) throw endedByHandler(key);
  }

  /** Deletes keys older than the retention; resolves how many went. */
  async purge(): Promise<number> {
    await this.migrate();
    const result = await this.pool.query(
      `DELETE FROM ${this.table} WHERE processed_at < now() - make_interval(secs => $1)`,
      [this.retentionMs / 1000],
    );
    const n = result.rowCount ?? 0;
    this.counts.purged += n;
    return n;
  }

  stats(): IdempotencyStats {
    return { ...this.counts };
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.purger !== undefined) clearInterval(this.purger);
  }
}

/** The handler returned, but a statement of its transaction failed: rolled back at COMMIT. */
export class IdempotentRollbackError extends TickwheelError<'ERR_TICKWHEEL_IDEMPOTENT_ROLLED_BACK'> {
  readonly key: string;
  /**
   * 'aborted': a statement of the handler failed; 'ended': the handler ended the transaction
   * itself (ROLLBACK or COMMIT on its client), so what it wrote after that is outside it.
   */
  readonly reason: 'aborted' | 'ended';
  constructor(key: string, options?: ErrorOptions, reason: 'aborted' | 'ended' = 'aborted') {
    super(
      'ERR_TICKWHEEL_IDEMPOTENT_ROLLED_BACK',
      reason === 'aborted'
        ? `the transaction of ${JSON.stringify(key)} was rolled back, not committed: a statement ` +
            'in the handler failed (an SQL error caught inside the transaction still aborts it), ' +
            'so neither its writes nor the done mark were kept and the delivery is retried. Let ' +
            "the error reach the handler's caller, or wrap a statement that may fail in a SAVEPOINT."
        : `the handler of ${JSON.stringify(key)} ended the transaction it was given (a ROLLBACK ` +
            'or COMMIT on its client): what it wrote after that was not in the transaction of the ' +
            'done mark, which may be undone, so the delivery fails and may run again. Leave ' +
            'BEGIN, COMMIT and ROLLBACK to the store; use SAVEPOINTs inside the handler.',
      options,
    );
    this.reason = reason;
    this.name = 'IdempotentRollbackError';
    this.key = key;
  }
}

/** The mark is not in the transaction COMMIT would end: the handler ended or replaced it. */
function endedByHandler(key: string): IdempotentRollbackError {
  return new IdempotentRollbackError(key, undefined, 'ended');
}

function rolledBack(key: string, cause?: unknown): IdempotentRollbackError {
  return new IdempotentRollbackError(key, cause === undefined ? undefined : { cause });
}
