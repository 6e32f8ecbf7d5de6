/**
 * The queue's own connections run with read committed and no lock_timeout, whatever the
 * database's or the role's defaults say: under serializable every conflict of its statements is
 * retried (deliveries ran 20-200x later), and a lock_timeout fails schedules that only had to
 * wait for a row lock. Defaults set as a DBA would, on a real PostgreSQL.
 */

import pg from 'pg';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
import { PostgresDriver } from '../../src/postgres/driver.js';
import { withPostgres } from './with-postgres.js';

interface Pool {
  query(sql: string): Promise<{ rows: Record<string, string>[] }>;
}

describe.runIf(postgresInstalled())("the queue's connections on PostgreSQL", () => {
  const server = withPostgres();

  it("keep read committed and no lock_timeout under a database's other defaults", async () => {
    const { rows } = await server.pool.query('SELECT current_database() AS db');
    const db = rows[0].db as string;
    await server.pool.query(
      `ALTER DATABASE "${db}" SET default_transaction_isolation TO 'serializable'`,
    );
    await server.pool.query(`ALTER DATABASE "${db}" SET lock_timeout TO '5ms'`);
    try {
      const driver = await server.open();
      const pool = (
        driver as unknown as {
          pool: { query(sql: string): Promise<{ rows: Record<string, string>[] }> };
        }
      ).pool;
      // Every connection of its pool, not only the first.
      const seen = await Promise.all(
        Array.from({ length: 4 }, () =>
          pool.query(
            "SELECT current_setting('transaction_isolation') AS iso, current_setting('lock_timeout') AS lt",
          ),
        ),
      );
      for (const {
        rows: [row],
      } of seen)
        expect(row).toEqual({ iso: 'read committed', lt: '0' });
      // What a new connection of anyone else gets: the database's defaults hold there.
      const other = new pg.Client({ connectionString: server.url });
      await other.connect();
      try {
        const {
          rows: [row],
        } = await other.query("SELECT current_setting('transaction_isolation') AS iso");
        expect(row.iso).toBe('serializable');
      } finally {
        await other.end();
      }
      // A connection string with options of its own: those kept, these added.
      const url = new URL(server.url);
      url.searchParams.set('options', '-c application_name=mine');
      const own = await PostgresDriver.open({
        postgres: url.toString(),
        queue: 'own',
        poolSize: 1,
      });
      try {
        const ownPool = (own as unknown as { pool: Pool }).pool;
        const {
          rows: [row],
        } = await ownPool.query(
          "SELECT current_setting('transaction_isolation') AS iso, current_setting('lock_timeout') AS lt, current_setting('application_name') AS app",
        );
        expect(row).toEqual({ iso: 'read committed', lt: '0', app: 'mine' });
      } finally {
        await own.close();
      }
    } finally {
      await server.pool.query(`ALTER DATABASE "${db}" RESET default_transaction_isolation`);
      await server.pool.query(`ALTER DATABASE "${db}" RESET lock_timeout`);
    }
  });
});
