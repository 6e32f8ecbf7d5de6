/**
 * Child of lost-connection.test.ts: runs one PostgresIdempotencyStore.once() whose effect waits,
 * its transaction's client held, until the parent has killed PostgreSQL and says `go`. Prints
 * one JSON line with how once() ended; a process that dies of pg's 'error' event prints nothing.
 */

import pg from 'pg';

const { PostgresIdempotencyStore } = await import(
  process.env.TICKWHEEL_DIST + '/idempotent/index.js'
);
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 2 });
pool.on('error', () => {});
const store = new PostgresIdempotencyStore({ pool, purgeEveryMs: 0 });
let result;
try {
  const outcome = await store.once('lost-1', async ({ client }) => {
    await client.query('SELECT 1');
    process.send('holding');
    await new Promise((resolve) => process.once('message', resolve));
  });
  result = { outcome };
} catch (err) {
  result = { error: err?.code ?? String(err) };
}
process.stdout.write(`${JSON.stringify(result)}\n`);
await store.close();
await pool.end().catch(() => {});
process.disconnect();
