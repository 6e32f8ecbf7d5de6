/**
 * What an operator or an application can do to a queue's PostgreSQL behind its back, and what
 * the queue then says: a function of its schema dropped by hand is made again by the next open
 * (functions hold nothing); a table dropped by hand stops the open, named, rather than being
 * made again empty.
 */

import { describe, expect, it } from 'vitest';
import { PostgresDriver } from '../../src/postgres/driver.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
import { withPostgres } from './with-postgres.js';

describe.runIf(postgresInstalled())('a queue on PostgreSQL changed behind its back', () => {
  const server = withPostgres();

  it('makes a function dropped by hand again at the next open', async () => {
    const first = await server.open('dropped-fn');
    await first.close();
    await server.pool.query(
      'DROP FUNCTION "tickwheel_dropped-fn".tw_take(integer, text, integer, bigint, bigint)',
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
});
