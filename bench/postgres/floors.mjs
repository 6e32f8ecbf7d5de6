/**
 * The `floors` cell of `npm run bench:postgres`: what the run's PostgreSQL does at best, with no
 * queue around it, measured once (not per peer) on a database of its own, from this process
 * through `pg` as every peer talks to it:
 *
 *   - one statement a call, each awaited before the next (a durable single schedule makes at
 *     least one such call): `SELECT 1`, and an autocommit INSERT of one row (a bigint key and
 *     60 bytes) into a table with a primary key;
 *   - 1,000 rows a statement, on such a table: INSERT, UPDATE by key, DELETE by key: rows a second
 *     and PostgreSQL CPU per row (every server process, as the cells count it).
 *
 * targets.mjs sets the throughput targets beside these: a target above what a bare
 * statement does cannot be met by any design that keeps a row per message.
 */

import { Buffer } from 'node:buffer';
import { loadPackage } from './deps.mjs';
import { serverCpuSeconds } from './server-cpu.mjs';

const SINGLE = 2_000;
const BATCHED = 200_000;
const BATCH = 1_000;
const PAYLOAD_BYTES = 60;

async function timed(postgresPid, rows, fn) {
  const cpuBefore = serverCpuSeconds(postgresPid);
  const started = performance.now();
  await fn();
  const seconds = (performance.now() - started) / 1000;
  const cpu = serverCpuSeconds(postgresPid) - cpuBefore;
  return {
    perSecond: Math.round(rows / seconds),
    postgresUsPerRow: Number(((cpu * 1e6) / rows).toFixed(1)),
  };
}

/** The floors on the database at `url`; `postgresPid`: the postmaster, for CPU. */
export async function measureFloors(url, postgresPid) {
  const { Client } = loadPackage('pg');
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`create table floor_rows (id bigint primary key, v bytea not null)`);
    const payload = Buffer.alloc(PAYLOAD_BYTES, 7);
    // Warm: the connection's first statements plan and cache what the rest reuse.
    for (let i = 0; i < 50; i++) await client.query('select 1');
    const selectOne = await timed(postgresPid, SINGLE, async () => {
      for (let i = 0; i < SINGLE; i++) await client.query('select 1');
    });
    const insertOne = await timed(postgresPid, SINGLE, async () => {
      for (let i = 0; i < SINGLE; i++) {
        await client.query('insert into floor_rows (id, v) values ($1, $2)', [-1 - i, payload]);
      }
    });
    const keys = (from) => Array.from({ length: BATCH }, (_, i) => from + i);
    const payloads = Array.from({ length: BATCH }, () => payload);
    const batches = (sql, values) =>
      timed(postgresPid, BATCHED, async () => {
        for (let from = 0; from < BATCHED; from += BATCH) await client.query(sql, values(from));
      });
    const insertBatch = await batches(
      'insert into floor_rows select * from unnest($1::bigint[], $2::bytea[])',
      (from) => [keys(from), payloads],
    );
    const updateBatch = await batches(
      'update floor_rows set v = $2 where id = any($1::bigint[])',
      (from) => [keys(from), Buffer.alloc(PAYLOAD_BYTES, 8)],
    );
    const deleteBatch = await batches(
      'delete from floor_rows where id = any($1::bigint[])',
      (from) => [keys(from)],
    );
    return { selectOne, insertOne, insertBatch, updateBatch, deleteBatch, batch: BATCH };
  } finally {
    await client.end();
  }
}
