/**
 * Which commits wait for the WAL flush on PostgresDriver: schedules and fires do (what the
 * server's synchronous_commit says), takes never, acks only when durable. Each statement of the
 * driver runs here inside a transaction of the test's own, which reads the synchronous_commit
 * its COMMIT would use before committing.
 */

import { describe, expect, it } from 'vitest';
import pg from 'pg';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
import type { PgPool, PgResult } from '../../src/postgres/pg.js';
import { at, message, own, windowOf, withPostgres } from './with-postgres.js';

/** The pool given to the driver: every query in a transaction that notes its commit's setting. */
function noting(pool: pg.Pool, seen: Array<{ fn: string; commit: string }>): PgPool {
  return {
    async query(text: string, values?: unknown[]): Promise<PgResult> {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await client.query(text, values);
        const setting = await client.query("SELECT current_setting('synchronous_commit') AS s");
        await client.query('COMMIT');
        const fn = /\.(tw_\w+)\(/.exec(text)?.[1];
        if (fn !== undefined) seen.push({ fn, commit: String(setting.rows[0].s) });
        return result as unknown as PgResult;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    },
    connect: () => pool.connect() as never,
    end: async () => {},
    on: () => pool,
  };
}

describe.runIf(postgresInstalled())('PostgresDriver: commits that wait for the disk', () => {
  const pg0 = withPostgres();

  it('waits on schedules, fires and durable acks; not on takes and other acks', async () => {
    const seen: Array<{ fn: string; commit: string }> = [];
    const driver = await pg0.open(undefined, undefined, { postgres: noting(pg0.pool, seen) });
    const owner = await own(driver, 1);
    const due = Date.now() - 1_000;
    const w = windowOf(due);
    const ids = ['w-1', 'w-2', 'w-3'];
    await driver.schedule(
      1,
      ids.map((id) => message({ id, deliverAt: due, topic: 'mail' })),
    );
    await driver.load(1, owner, (w + 1) * 30_000, false);
    const read = await driver.read(1, `w${w}`, 0, 100);
    const placed = read.live.map((row) => ({ ...at(1, row.id), seg: `w${w}`, index: row.index }));
    expect(await driver.fire(1, owner, 0, placed)).toMatchObject({ fired: 3 });
    const taken = await driver.take(1, 'mail', 10, 30_000, 1 << 20);
    expect(taken.map((t) => t.id)).toEqual(ids);
    const delivery = (id: string) => ({ ...at(1, id), attempt: 1 });

    expect(await driver.ack(1, [delivery('w-1')], true)).toEqual([true]);
    expect(await driver.ack(1, [delivery('w-2')], false)).toEqual([true]);
    expect(await driver.ackMany!([{ partition: 1, deliveries: [delivery('w-3')] }])).toEqual([
      [true],
    ]);
    expect(await driver.get(at(1, 'w-3'))).toMatchObject({ status: 'acked' });

    const commits = (fn: string) => seen.filter((s) => s.fn === fn).map((s) => s.commit);
    expect(commits('tw_schedule')).toEqual(['on']);
    expect(commits('tw_fire')).toEqual(['on']);
    expect(commits('tw_take')).toEqual(['off']);
    expect(commits('tw_ack')).toEqual(['on', 'off', 'off']);
  });
});
