/**
 * A schedule in a transaction of a query builder's (docs/postgres.md, "Scheduling in your own
 * transaction"): the adapters the docs give for Kysely and Drizzle, each a `query(text, values)`
 * over the builder's transaction. The message exists if and only if that transaction commits.
 */

import { drizzle } from 'drizzle-orm/node-postgres';
import { type SQL, sql as drizzleSql } from 'drizzle-orm';
import { CompiledQuery, Kysely, PostgresDialect, sql as kyselySql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import type { Queue } from '../../src/queue/api.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { endPool, postgresInstalled, startPostgres } from '../../scripts/postgres.mjs';

/** The docs' adapter for a Kysely transaction. */
function kyselyClient(trx: Kysely<unknown>) {
  return {
    query: (text: string, values: unknown[]) => trx.executeQuery(CompiledQuery.raw(text, values)),
  };
}

/** The docs' adapter for a Drizzle (node-postgres) transaction: $n become Drizzle's parameters. */
function drizzleClient(tx: { execute(query: SQL): Promise<{ rows: unknown[] }> }) {
  return {
    query(text: string, values: unknown[]) {
      const parts = text.split(/\$(\d+)/);
      const chunks = parts.map((part, i) =>
        i % 2 === 0
          ? drizzleSql.raw(part)
          : drizzleSql`${drizzleSql.param(values[Number(part) - 1])}`,
      );
      return tx.execute(drizzleSql.join(chunks));
    },
  };
}

describe.skipIf(!postgresInstalled())('schedule in a query builder transaction', () => {
  let server: { url: string; stop(): Promise<void> };
  let pool: pg.Pool;
  let queue: Queue;

  beforeAll(async () => {
    server = await startPostgres();
    pool = new pg.Pool({ connectionString: server.url, max: 4 });
    await pool.query('CREATE TABLE orders (id text PRIMARY KEY)');
    queue = await DelayQueue.open({ postgres: server.url, queue: 'builders', partitions: 4 });
  }, 60_000);
  afterAll(async () => {
    await queue?.close();
    if (pool) await endPool(pool);
    await server?.stop();
  });

  const later = () => Date.now() + 3_600_000;

  it('Kysely: exists if and only if the transaction commits', async () => {
    const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
    await db.transaction().execute(async (trx) => {
      await kyselySql`INSERT INTO orders VALUES ('k-1')`.execute(trx);
      await queue.schedule(
        { topic: 'orders', id: 'k-1', payload: { order: 'k-1' }, deliverAt: later() },
        { client: kyselyClient(trx) },
      );
    });
    expect(await queue.get('k-1')).toMatchObject({ status: 'scheduled' });
    await expect(
      db.transaction().execute(async (trx) => {
        await queue.schedule(
          { topic: 'orders', id: 'k-2', payload: {}, deliverAt: later() },
          { client: kyselyClient(trx) },
        );
        throw new Error('the order failed');
      }),
    ).rejects.toThrow('the order failed');
    expect(await queue.get('k-2')).toBeUndefined();
  });

  it('Drizzle: exists if and only if the transaction commits, batches too', async () => {
    const db = drizzle(pool);
    await db.transaction(async (tx) => {
      await tx.execute(drizzleSql`INSERT INTO orders VALUES ('d-1')`);
      await queue.scheduleMany(
        [
          { topic: 'orders', id: 'd-1', payload: { order: 'd-1' }, deliverAt: later() },
          { topic: 'orders', payload: { order: 'd-1', located: true }, deliverAt: later() },
        ],
        { client: drizzleClient(tx) },
      );
    });
    expect(await queue.get('d-1')).toMatchObject({ status: 'scheduled' });
    expect((await queue.topicInfo('orders')).pending).toBe(3);
    await expect(
      db.transaction(async (tx) => {
        await queue.schedule(
          { topic: 'orders', id: 'd-2', payload: {}, deliverAt: later() },
          { client: drizzleClient(tx) },
        );
        throw new Error('the order failed');
      }),
    ).rejects.toThrow('the order failed');
    expect(await queue.get('d-2')).toBeUndefined();
    const orders = await pool.query('SELECT id FROM orders ORDER BY id');
    expect(orders.rows.map((row) => row.id)).toEqual(['d-1', 'k-1']);
  });
});
