/**
 * idempotent() around the client SDK's consume (a real tickwheel server over HTTP, a real
 * PostgreSQL): a delivery that outlives its visibility timeout is redelivered while the first is
 * still inside its transaction; the second waits on the first's key and is a duplicate, so the
 * handler runs once and the effect happens once though the message was delivered twice.
 */

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TickwheelClient } from '../../src/client/index.js';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import { PostgresIdempotencyStore, idempotent } from '../../src/idempotent/index.js';
import { createServer, type TickwheelServer } from '../../src/server/index.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { endPool, postgresInstalled, startPostgres } from '../../scripts/postgres.mjs';
import { waitFor } from '../support/wait-for.js';

describe.runIf(postgresInstalled())('idempotent() with the client SDK', () => {
  let postgres: { url: string; stop(): Promise<void> };
  let pool: pg.Pool;
  let queue: DelayQueue;
  let server: TickwheelServer;
  let url: string;

  beforeAll(async () => {
    postgres = await startPostgres();
    pool = new pg.Pool({ connectionString: postgres.url, max: 5 });
    await pool.query('CREATE TABLE sent (message text, attempt int)');
    queue = await DelayQueue.open({ store: new MemoryStore() });
    server = await createServer({ queue, logLevel: 'silent', maxWaitMs: 2000 });
    await server.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(server.server.address() as { port: number }).port}`;
  }, 60_000);

  afterAll(async () => {
    await server?.close();
    await queue?.close();
    if (pool) await endPool(pool);
    await postgres?.stop();
  });

  /** Whether a session of the server waits for a lock another one holds. */
  const blockedOnLock = async (): Promise<boolean> =>
    (
      await pool.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
      )
    ).rows[0].n > 0;

  it('applies a message redelivered during its first delivery once', async () => {
    const client = new TickwheelClient({ url });
    const store = new PostgresIdempotencyStore({ pool, table: 'client_done' });
    const attempts: number[] = [];
    const handler = idempotent(
      async (message: { id: string; topic: string; attempts: number }, { client: db }) => {
        attempts.push(message.attempts);
        await db.query('INSERT INTO sent VALUES ($1, $2)', [message.id, message.attempts]);
        // The first delivery outlives its visibility timeout: it holds its key until the
        // message has come again and that delivery waits on the key.
        if (message.attempts === 1) await waitFor(blockedOnLock);
      },
      { store },
    );
    const consumer = client.consume('mail', handler, { concurrency: 2, visibilityMs: 200 });
    try {
      await client.schedule({ topic: 'mail', id: 'welcome-7', payload: 'hi', delayMs: 0 });
      await waitFor(() => store.stats().duplicates + store.stats().ran >= 2);
      // Delivered twice; the second waited on the first's key, then found it done.
      expect(store.stats()).toMatchObject({ ran: 1, duplicates: 1 });
      expect(attempts).toEqual([1]);
      const { rows } = await pool.query('SELECT message, attempt FROM sent');
      expect(rows).toEqual([{ message: 'welcome-7', attempt: 1 }]);
    } finally {
      await consumer.close();
      await client.close();
      await store.close();
    }
  }, 20_000);
});
