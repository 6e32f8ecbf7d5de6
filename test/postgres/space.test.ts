/**
 * What PostgresDriver's messages cost on disk, and how the space comes back: a table of
 * records is dropped whole once nothing in its segments lives (never vacuumed row by row), and
 * a pending far-future message takes under 150 bytes of tables and indexes.
 */

import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
import { PostgresDriver } from '../../src/postgres/driver.js';
import { waitFor } from '../support/wait-for.js';
import {
  FAR,
  at,
  located,
  message,
  own,
  run,
  windowOf,
  windowSegment,
  withPostgres,
} from './with-postgres.js';

describe.runIf(postgresInstalled())('PostgresDriver: space', () => {
  const pg = withPostgres();

  /** Bytes of the queue's tables (`like` their names) and their indexes and TOAST. */
  const bytes = async (schema: string, like = '%') => {
    const { rows } = await pg.pool.query(
      `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint AS n FROM pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname LIKE $2`,
      [schema, like],
    );
    return Number(rows[0].n);
  };
  const tables = async (schema: string) => {
    const { rows } = await pg.pool.query(
      `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = to_regclass($1) ORDER BY 1`,
      [`"${schema}".records`],
    );
    return rows.map((row) => String(row.relname));
  };

  it('drops a window table once nothing in it lives, freeing its space at once', async () => {
    const driver = await pg.open();
    const w = windowOf(FAR);
    const ids = Array.from({ length: 500 }, (_, i) => `m-${i}`);
    await driver.schedule(
      0,
      ids.map((id) => message({ id, deliverAt: FAR + 1, payload: 'x'.repeat(1_000) })),
    );
    const later = FAR + 30 * 86_400_000;
    await driver.schedule(1, [message({ id: 'later', deliverAt: later })]);
    const here = await windowSegment(pg.pool, driver.schema, w);
    const there = await windowSegment(pg.pool, driver.schema, windowOf(later));
    const span = `records_${here.span}`;
    expect(await tables(driver.schema)).toContain(span);
    const full = await bytes(driver.schema, 'records%');
    // Something still lives in the span: nothing is dropped.
    for (const id of ids.slice(1)) await driver.cancel(at(0, id));
    expect(await driver.reap()).toEqual([]);
    expect(await tables(driver.schema)).toContain(span);
    await driver.cancel(at(0, ids[0]));
    expect(await driver.reap()).toEqual([here.span]);
    expect(await tables(driver.schema)).toEqual([`records_${there.span}`]);
    expect(await bytes(driver.schema, 'records%')).toBeLessThan(full - 500 * 1_000);
    expect(await driver.windows(0, -Infinity, Infinity)).toEqual([]);
    // A window scheduled again after its table went is made anew.
    await driver.schedule(0, [message({ id: 'again', deliverAt: FAR + 1 })]);
    expect(await driver.get(at(0, 'again'))).toMatchObject({ status: 'scheduled' });
    expect(await driver.segmentSizes(0)).toEqual({ [`w${here.segment}`]: 1 });
  });

  it('reaps by itself after a load, at most once per reapEveryMs', async () => {
    const driver = await PostgresDriver.open({
      postgres: pg.url,
      queue: 'reaping',
      reapEveryMs: 1,
    });
    try {
      await driver.config(4, 30_000);
      const owner = await own(driver, 0);
      await driver.schedule(0, [message({ id: 'gone', deliverAt: FAR })]);
      await driver.cancel(at(0, 'gone'));
      expect(await tables(driver.schema)).toHaveLength(1);
      await driver.load(0, owner, 1, false);
      await waitFor(async () => (await tables(driver.schema)).length === 0);
    } finally {
      await driver.close();
    }
  });

  it("keeps a partition's current near segment, and drops rotated ones once empty", async () => {
    const driver = await pg.open(undefined, undefined, { reapEveryMs: 0 });
    const owner = await own(driver, 2);
    const now = Date.now();
    const first = await driver.load(2, owner, now + 60_000, false);
    await driver.schedule(2, [message({ id: 'near', deliverAt: now + 1_000 })]);
    expect(await driver.nearSegments(2)).toEqual([first!.near]);
    await driver.cancel(at(2, 'near'));
    // Empty, but current: kept.
    expect(await driver.reap()).toEqual([]);
    const rotated = await driver.load(2, owner, now + 60_000, true);
    expect(rotated!.near).not.toBe(first!.near);
    // Its table holds the other partitions' current near segments too (numbers are queue-wide),
    // so it goes only once they have rotated on.
    for (let i = 0; i < 70; i++) {
      for (const p of [0, 1, 3]) {
        const o = await own(driver, p, `node-${i}`);
        await driver.load(p, o, now, true);
        await driver.lease(p, 'release', o, 0);
      }
      await driver.load(2, owner, now, true);
    }
    expect(await driver.reap()).toContain('n0');
    expect(await tables(driver.schema)).not.toContain('records_n0');
  });

  it('stores a pending far-future message in under 150 bytes (located, 20-byte payload)', async () => {
    const driver = await pg.open();
    const count = 20_000;
    const before = await bytes(driver.schema);
    for (let from = 0; from < count; from += 2_000) {
      const records = Array.from({ length: 2_000 }, (_, i) =>
        located(FAR + ((from + i) % 1_000) * 10, 'invoice', 'p'.repeat(20)),
      );
      await driver.schedule(from % 4, [run(records)]);
    }
    await pg.pool.query(`VACUUM ANALYZE "${driver.schema}".records`);
    const perMessage = ((await bytes(driver.schema)) - before) / count;
    expect(perMessage).toBeLessThan(150);
    console.log(`PostgreSQL: ${perMessage.toFixed(1)} bytes per pending located message`);
  }, 60_000);

  it('stores a pending far-future message with an id in under 300 bytes (20-byte payload)', async () => {
    const driver = await pg.open();
    const count = 10_000;
    const before = await bytes(driver.schema);
    for (let from = 0; from < count; from += 1_000) {
      const batch = Array.from({ length: 1_000 }, (_, i) =>
        message({ id: `order-${from + i}`, deliverAt: FAR + i * 10, payload: 'p'.repeat(20) }),
      );
      await driver.schedule(from % 4, batch);
    }
    await pg.pool.query(`VACUUM ANALYZE "${driver.schema}".states`);
    const perMessage = ((await bytes(driver.schema)) - before) / count;
    expect(perMessage).toBeLessThan(300);
    console.log(`PostgreSQL: ${perMessage.toFixed(1)} bytes per pending message with an id`);
  }, 60_000);
});
