/**
 * The PostgreSQL idempotency store (src/idempotent/postgres.ts) on a real PostgreSQL started by
 * the test: the handler's writes and the done mark commit or roll back together; a duplicate
 * runs nothing; a concurrent delivery of the same key waits for the first and is a duplicate;
 * retention deletes old keys; bad options get named errors; a transaction that PostgreSQL rolls
 * back at COMMIT (a handler caught an SQL error inside it) is a failed delivery, never 'ran'.
 */

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  PostgresIdempotencyStore,
  type PgClient,
  type PgPool,
  idempotent,
  messageKey,
  postgresMigration,
} from '../../src/idempotent/index.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { endPool, postgresInstalled, startPostgres } from '../../scripts/postgres.mjs';
import { waitFor } from '../support/wait-for.js';

describe.runIf(postgresInstalled())('the PostgreSQL idempotency store', () => {
  let server: { url: string; stop(): Promise<void> };
  let pool: pg.Pool;

  beforeAll(async () => {
    server = await startPostgres();
    pool = new pg.Pool({ connectionString: server.url, max: 5 });
    await pool.query('CREATE TABLE notes (key text, body text)');
  }, 60_000);

  afterAll(async () => {
    if (pool) await endPool(pool);
    await server?.stop();
  });

  const notes = async (key: string) =>
    Number((await pool.query('SELECT count(*) FROM notes WHERE key = $1', [key])).rows[0].count);

  it('runs the effect once per message, in the same transaction as the done mark', async () => {
    const store = new PostgresIdempotencyStore({ pool, table: 'done_a' });
    let calls = 0;
    const handler = idempotent(
      async (message: { id: string; topic: string }, { client }) => {
        calls++;
        await client.query('INSERT INTO notes VALUES ($1, $2)', [messageKey(message), 'x']);
      },
      { store },
    );
    const message = { id: 'm-1', topic: 'mail' };
    await handler(message);
    await handler(message);
    await handler({ ...message });
    expect(calls).toBe(1);
    expect(await notes('mail/m-1')).toBe(1);
    expect(store.stats()).toMatchObject({ ran: 1, duplicates: 2, failed: 0 });
    // The same id on another topic is another message.
    await handler({ id: 'm-1', topic: 'sms' });
    expect(calls).toBe(2);
    await store.close();
  });

  it('rolls back the effect and the mark together when the handler throws', async () => {
    const store = new PostgresIdempotencyStore({ pool, table: 'done_b' });
    let fail = true;
    const handler = idempotent(
      async (message: { id: string; topic: string }, { client }) => {
        await client.query('INSERT INTO notes VALUES ($1, $2)', [messageKey(message), 'y']);
        if (fail) throw new Error('the mail server said no');
      },
      { store },
    );
    await expect(handler({ id: 'm-2', topic: 'mail' })).rejects.toThrow('the mail server said no');
    expect(await notes('mail/m-2')).toBe(0);
    expect(
      (await pool.query('SELECT count(*) FROM done_b WHERE key = $1', ['mail/m-2'])).rows[0].count,
    ).toBe('0');
    // The retry runs it: nothing was marked.
    fail = false;
    await handler({ id: 'm-2', topic: 'mail' });
    expect(await notes('mail/m-2')).toBe(1);
    expect(store.stats()).toMatchObject({ ran: 1, failed: 1, duplicates: 0 });
    await store.close();
  });

  it('fails a delivery whose handler ended the transaction itself, whatever it did after', async () => {
    const store = new PostgresIdempotencyStore({ pool, table: 'done_e' });
    const ends = {
      'rollback, then a write outside any transaction': ['ROLLBACK'],
      'rollback, then a transaction of its own': ['ROLLBACK', 'BEGIN'],
      'commit, then a write outside any transaction': ['COMMIT'],
    };
    for (const [what, statements] of Object.entries(ends)) {
      const handler = idempotent(
        async (message: { id: string; topic: string }, { client }) => {
          for (const statement of statements) await client.query(statement);
          await client.query('INSERT INTO notes VALUES ($1, $2)', [messageKey(message), what]);
        },
        { store },
      );
      const message = { id: what, topic: 'ends' };
      await expect(handler(message), what).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_IDEMPOTENT_ROLLED_BACK',
        reason: 'ended',
        message: expect.stringMatching(/ended the transaction/),
      });
    }
    expect(store.stats()).toMatchObject({ ran: 0, failed: 3 });
    // The pool's connections are whole: the next delivery runs and commits with its mark.
    const handler = idempotent(
      async (message: { id: string; topic: string }, { client }) => {
        await client.query('INSERT INTO notes VALUES ($1, $2)', [messageKey(message), 'ok']);
      },
      { store },
    );
    await handler({ id: 'after', topic: 'ends' });
    await handler({ id: 'after', topic: 'ends' });
    expect(await notes('ends/after')).toBe(1);
    await store.close();
  });

  it('refuses a key PostgreSQL could not keep with a named error, and keeps the longest allowed', async () => {
    const store = new PostgresIdempotencyStore({ pool, table: 'done_f' });
    for (const key of ['nul \u0000 inside', 'k'.repeat(1_000_000)]) {
      await expect(store.once(key, () => {})).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
      });
    }
    const longest = 'é'.repeat(512); // 1,024 bytes of UTF-8
    expect(await store.once(longest, () => {})).toBe('ran');
    expect(await store.once(longest, () => {})).toBe('duplicate');
    await store.close();
  });

  it('makes a concurrent delivery of the same key wait for the first, then skip', async () => {
    const store = new PostgresIdempotencyStore({ pool, table: 'done_c' });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let calls = 0;
    const handler = idempotent(
      async (message: { id: string; topic: string }, { client }) => {
        calls++;
        await client.query('INSERT INTO notes VALUES ($1, $2)', [messageKey(message), 'z']);
        await gate;
      },
      { store },
    );
    const first = handler({ id: 'm-3', topic: 'mail' });
    await waitFor(() => calls === 1);
    const second = handler({ id: 'm-3', topic: 'mail' });
    // The second waits in PostgreSQL, on the first's uncommitted key.
    await waitFor(blockedOnLock);
    expect(calls).toBe(1);
    release();
    await Promise.all([first, second]);
    expect(calls).toBe(1);
    expect(await notes('mail/m-3')).toBe(1);
    expect(store.stats()).toMatchObject({ ran: 1, duplicates: 1 });
    await store.close();
  });

  /** Whether a session of the server waits for a lock another one holds. */
  const blockedOnLock = async (): Promise<boolean> =>
    (
      await pool.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
      )
    ).rows[0].n > 0;

  /** A pool like `pg`'s whose results carry no command tag (rows and rowCount only). */
  const tagless = (inner: pg.Pool): PgPool => {
    const strip = ({ rowCount, rows }: pg.QueryResult) => ({ rowCount, rows });
    return {
      query: async (text, values) => strip(await inner.query(text, values)),
      connect: async () => {
        const client = await inner.connect();
        const wrapped: PgClient = {
          query: async (text, values) => strip(await client.query(text, values)),
          release: (err) => client.release(err),
        };
        return wrapped;
      },
    };
  };

  it.each([
    ['a pg Pool', 'done_f', () => pool as PgPool],
    ['a pool whose results have no command tag', 'done_g', () => tagless(pool)],
  ])(
    'fails the delivery when COMMIT rolls back a transaction the handler left aborted (%s)',
    async (_, table, poolOf) => {
      const store = new PostgresIdempotencyStore({ pool: poolOf(), table });
      let careless = true;
      const handler = idempotent(
        async (message: { id: string; topic: string }, { client }) => {
          await client.query('INSERT INTO notes VALUES ($1, $2)', [messageKey(message), 'r']);
          if (careless) {
            // An error caught and dropped: the transaction is aborted all the same.
            await client.query('SELECT 1 / 0').catch(() => {});
          }
        },
        { store },
      );
      const message = { id: 'm-rb', topic: table };
      await expect(handler(message)).rejects.toMatchObject({
        name: 'IdempotentRollbackError',
        code: 'ERR_TICKWHEEL_IDEMPOTENT_ROLLED_BACK',
      });
      expect(await notes(`${table}/m-rb`)).toBe(0);
      expect(store.stats()).toMatchObject({ ran: 0, failed: 1 });
      // Nothing was marked done, so the retry runs the effect.
      careless = false;
      await handler(message);
      expect(await notes(`${table}/m-rb`)).toBe(1);
      expect(store.stats()).toMatchObject({ ran: 1, failed: 1, duplicates: 0 });
      await store.close();
    },
  );

  it('deletes keys past retention, and only those', async () => {
    const store = new PostgresIdempotencyStore({
      pool,
      table: 'done_d',
      retentionMs: 3_600_000,
      purgeEveryMs: 0,
    });
    const handler = idempotent(async () => {}, { store });
    await handler({ id: 'old', topic: 't' });
    await handler({ id: 'new', topic: 't' });
    await pool.query(
      `UPDATE done_d SET processed_at = now() - interval '2 hours' WHERE key = 't/old'`,
    );
    expect(await store.purge()).toBe(1);
    expect((await pool.query('SELECT key FROM done_d')).rows).toEqual([{ key: 't/new' }]);
    expect(store.stats().purged).toBe(1);
    await store.close();
  });

  it('creates its table with the documented migration, and refuses bad options by name', async () => {
    expect(postgresMigration('app.processed')).toContain(
      'CREATE TABLE IF NOT EXISTS app.processed',
    );
    expect(() => new PostgresIdempotencyStore({ pool, table: 'x; DROP TABLE notes' })).toThrow(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
    );
    expect(() => new PostgresIdempotencyStore({ pool, retentionMs: 1_000 })).toThrow(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
    );
    expect(() => new PostgresIdempotencyStore({ pool: {} as unknown as pg.Pool })).toThrow(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
    );
    expect(() => idempotent(async () => {}, { store: {} as never })).toThrow(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
    );
    const store = new PostgresIdempotencyStore({ pool, table: 'done_e' });
    const handler = idempotent(async () => {}, { store, key: () => '' });
    await expect(handler({ id: 'a', topic: 't' })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    await store.close();
    await expect(store.once('k', () => {})).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_CLOSED' });
  });
});
