/**
 * What an operator or an application can do to a queue's PostgreSQL behind its back, and what
 * the queue then says: a function of its schema dropped by hand is made again by the next open
 * (functions hold nothing); a table dropped by hand stops the open, named, rather than being
 * made again empty; a pg.Pool of the application's ended under the queue fails its calls with
 * ERR_TICKWHEEL_INVALID_STATE, which waiting does not cure, not ERR_TICKWHEEL_UNAVAILABLE.
 */

import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import { PostgresDriver } from '../../src/postgres/driver.js';
import { named } from '../../src/postgres/pg.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
import { withPostgres } from './with-postgres.js';

describe.runIf(postgresInstalled())('a queue on PostgreSQL changed behind its back', () => {
  const server = withPostgres();

  it('makes a function dropped by hand again at the next open', async () => {
    const first = await server.open('dropped-fn');
    await first.close();
    await server.pool.query(
      'DROP FUNCTION "tickwheel_dropped-fn".tw_take(integer, text, integer, bigint, bigint, float8)',
    );
    const driver = await server.open('dropped-fn');
    expect(await driver.take(0, 't', 1, 30_000, 1 << 20)).toEqual([]);
  });

  it('refuses to open on a schema whose table was dropped by hand, naming it', async () => {
    const first = await server.open('dropped-table');
    await first.close();
    await server.pool.query('DROP TABLE "tickwheel_dropped-table".states CASCADE');
    const opening = PostgresDriver.open({ postgres: server.url, queue: 'dropped-table' });
    const err = (await opening.catch((e: unknown) => e)) as Error & { code?: string };
    expect(err.code).toBe('ERR_TICKWHEEL_INVALID_STATE');
    expect(err.message).toContain('lacks states');
    expect(err.message).toContain('DROP SCHEMA "tickwheel_dropped-table" CASCADE');
    // Nothing was made again meanwhile (CASCADE dropped the functions on its rows too).
    const { rows } = await server.pool.query(
      `SELECT to_regclass('"tickwheel_dropped-table".states') IS NULL AS gone`,
    );
    expect(rows[0].gone).toBe(true);
  });

  it('fails the calls of a queue whose pg.Pool was ended with ERR_TICKWHEEL_INVALID_STATE', async () => {
    // Bounded as docs/postgres.md asks: pg-pool leaves a query that waits for a connection
    // when end() is called waiting until connectionTimeoutMillis.
    const pool = new pg.Pool({
      connectionString: server.url,
      max: 2,
      connectionTimeoutMillis: 2_000,
    });
    const queue = await DelayQueue.open({
      postgres: pool,
      queue: 'ended-pool',
      partitions: 2,
      onFault: () => undefined,
    });
    try {
      await pool.end();
      const err = (await queue
        .schedule({ topic: 't', payload: 1, delayMs: 10 })
        .catch((e: unknown) => e)) as Error & { code?: string };
      expect(err.code).toBe('ERR_TICKWHEEL_INVALID_STATE');
      expect(err.message).toContain('pg.Pool');
      expect(err.message).toContain('was ended');
    } finally {
      await queue.close();
    }
  });
});

describe('errors of PostgreSQL short of resources', () => {
  it('say so (SQLSTATE class 53), not that PostgreSQL did not answer', () => {
    const full = Object.assign(new Error('could not extend file: No space left on device'), {
      code: '53100',
    });
    const err = named(full, 'a schedule');
    expect(err).toMatchObject({ code: 'ERR_TICKWHEEL_UNAVAILABLE' });
    expect(err.message).toBe(
      'PostgreSQL lacked the resources for a schedule (disk, memory or connections): could not extend file: No space left on device (SQLSTATE 53100)',
    );
    const gone = Object.assign(new Error('Connection terminated unexpectedly'), {});
    expect(named(gone, 'a schedule').message).toMatch(/^PostgreSQL did not answer a schedule/);
  });
});
