/**
 * A schedule in the application's own transaction (queue.schedule(message, { client })): the
 * message exists if and only if that transaction commits, and is delivered from the commit on,
 * also when it came due while the transaction was still open. A real PostgreSQL, a queue opened
 * as users open it, the application's client from its own pool.
 */

import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import type { Queue } from '../../src/queue/api.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { endPool, postgresInstalled, startPostgres } from '../../scripts/postgres.mjs';

const server: { url?: string; stop?: () => Promise<void> } = {};
let app: pg.Pool;
const opened: Queue[] = [];
let queues = 0;

async function openQueue(): Promise<Queue> {
  const queue = await DelayQueue.open({
    postgres: server.url as string,
    queue: `tx-${++queues}`,
    partitions: 4,
    windowMs: 1_000,
    leaseMs: 1_000,
    poolSize: 4,
    onError: () => {},
  });
  opened.push(queue);
  return queue;
}

/** Runs `work` in a transaction on a client of the application's pool; commits or rolls back. */
async function inTransaction<T>(
  end: 'COMMIT' | 'ROLLBACK',
  work: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await app.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query(end);
    return result;
  } finally {
    client.release();
  }
}

describe.skipIf(!postgresInstalled())('schedule in the application transaction', () => {
  beforeAll(async () => {
    const started = (await startPostgres()) as { url: string; stop(): Promise<void> };
    server.url = started.url;
    server.stop = () => started.stop();
    app = new pg.Pool({ connectionString: started.url, max: 4 });
    await app.query('CREATE TABLE orders (id text PRIMARY KEY)');
  }, 60_000);
  afterEach(async () => {
    for (const queue of opened.splice(0)) await queue.close();
  });
  afterAll(async () => {
    if (app) await endPool(app);
    await server.stop?.();
  });

  it('exists only once the transaction commits, with the rows written beside it', async () => {
    const queue = await openQueue();
    const start = Date.now();
    const seenInside = await inTransaction('COMMIT', async (client) => {
      await client.query("INSERT INTO orders VALUES ('o-1')");
      const scheduled = await queue.schedule(
        { topic: 'orders', id: 'o-1', payload: { order: 1 }, deliverAt: start + 300 },
        { client },
      );
      expect(scheduled).toEqual({ id: 'o-1', deliverAt: start + 300 });
      // Not committed: the queue's own connections do not see it.
      return queue.get('o-1');
    });
    expect(seenInside).toBeUndefined();
    expect(await queue.get('o-1')).toMatchObject({ status: 'scheduled', deliverAt: start + 300 });
    const [message] = await queue.receive('orders', { waitMs: 10_000 });
    expect(message).toMatchObject({ id: 'o-1', payload: { order: 1 }, attempts: 1 });
    expect(Date.now()).toBeGreaterThanOrEqual(start + 300);
    expect(await queue.ack(message.receipt)).toBe(true);
  });

  it('never exists when the transaction rolls back', async () => {
    const queue = await openQueue();
    await inTransaction('ROLLBACK', async (client) => {
      await client.query("INSERT INTO orders VALUES ('o-2')");
      await queue.scheduleMany(
        [
          { topic: 'orders', id: 'o-2', payload: 2 },
          { topic: 'orders', payload: 'no id' },
        ],
        { client },
      );
    });
    expect(await queue.get('o-2')).toBeUndefined();
    expect((await app.query("SELECT 1 FROM orders WHERE id = 'o-2'")).rowCount).toBe(0);
    expect(await queue.topicInfo('orders')).toMatchObject({ pending: 0 });
    // A message that was never committed is never delivered.
    expect(await queue.receive('orders', { waitMs: 1_500 })).toEqual([]);
  });

  it('delivers from the commit on what came due while the transaction was open', async () => {
    const queue = await openQueue();
    const ids = await inTransaction('COMMIT', async (client) => {
      const made = await queue.scheduleMany(
        Array.from({ length: 20 }, (_, i) => ({ topic: 'now', payload: i })),
        { client },
      );
      // Due at once, but nothing of it is visible until the commit.
      await new Promise((resolve) => setTimeout(resolve, 300));
      return made.map((m) => m.id);
    });
    expect(new Set(ids).size).toBe(20);
    const got: string[] = [];
    while (got.length < 20) {
      const batch = await queue.receive('now', { max: 20, waitMs: 10_000 });
      expect(batch.length).toBeGreaterThan(0);
      got.push(...batch.map((m) => m.id));
      await queue.ackMany(batch.map((m) => m.receipt));
    }
    expect(got.sort()).toEqual([...ids].sort());
  });

  it('makes the tables a schedule needs outside the transaction, which then locks no table whole', async () => {
    const queue = await openQueue();
    await inTransaction('COMMIT', async (client) => {
      // Due in 400 days: a window whose table is not made yet.
      await queue.schedule(
        { topic: 'far', id: 'far-1', payload: 1, delayMs: 400 * 86_400_000 },
        { client },
      );
      const { rows } = await client.query(
        `SELECT c.relname, l.mode FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
         WHERE l.pid = pg_backend_pid() AND l.mode = 'AccessExclusiveLock'`,
      );
      // Made in it, a table would hold records and tombs so until the commit: every call of the
      // queue would wait behind it.
      expect(rows).toEqual([]);
    });
    expect(await queue.get('far-1')).toMatchObject({ status: 'scheduled' });
  });

  it("makes a table while an application's transaction that scheduled is open, without waiting for it", async () => {
    const queue = await openQueue();
    await inTransaction('ROLLBACK', async (client) => {
      // The transaction writes a record: it holds `records` until it ends.
      await queue.schedule({ topic: 'tx', id: 'in-tx', payload: 1, delayMs: 60_000 }, { client });
      // Another window's table, made while that transaction is open: made whole-table-locking,
      // it would wait for the transaction, which waits for it here, until the statement timeout.
      await queue.schedule({ topic: 'far', id: 'far-2', payload: 2, delayMs: 500 * 86_400_000 });
      expect(await queue.get('far-2')).toMatchObject({ status: 'scheduled' });
    });
    expect(await queue.get('in-tx')).toBeUndefined();
  }, 60_000);

  it('refuses a client where no transaction can be joined, and one that is not a client', async () => {
    const memory = await DelayQueue.open({ store: new MemoryStore() });
    opened.push(memory);
    const client = { query: async () => ({ rows: [] }) };
    await expect(memory.schedule({ topic: 't', payload: 1 }, { client })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
      message: /only on a queue on PostgreSQL/,
    });
    const queue = await openQueue();
    const notAClient = { client: {} } as unknown as { client: typeof client };
    await expect(queue.schedule({ topic: 't', payload: 1 }, notAClient)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
      message: /client must be a client of your PostgreSQL/,
    });
    const unknown = { transaction: client } as unknown as { client: typeof client };
    await expect(queue.scheduleMany([{ topic: 't', payload: 1 }], unknown)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    expect(await queue.topicInfo('t')).toMatchObject({ pending: 0 });
    // A client whose query() answers in another shape: a named error, its outcome unknown.
    for (const answer of [{ rows: [] }, { rows: [{}] }, {}]) {
      const odd = { query: async () => answer } as unknown as typeof client;
      await expect(
        queue.schedule({ topic: 't', payload: 1 }, { client: odd }),
      ).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_INVALID_STATE',
        outcome: 'unknown',
        message: /must resolve to \{ rows \}/,
      });
    }
  });
});
