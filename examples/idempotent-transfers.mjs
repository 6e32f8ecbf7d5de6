// Exactly-once effects on at-least-once delivery: transfers between two accounts in PostgreSQL,
// each message's writes committed in one transaction with its "done" mark. A message delivered
// again (as after a crash between the commit and the ack) finds its key and changes nothing.
// The queue lives in the same database (docs/postgres.md), on the application's pool, and the
// transfers are scheduled in the transaction that records them.
//
// Uses DATABASE_URL if set; otherwise starts its own PostgreSQL (scripts/postgres.mjs, from this
// repository) in a temporary directory.
// Run: npm run build && node examples/idempotent-transfers.mjs

import pg from 'pg';
import { idempotent, PostgresIdempotencyStore } from 'tickwheel/idempotent';
import { DelayQueue } from 'tickwheel/queue';

const local = process.env.DATABASE_URL ? undefined : await import('../scripts/postgres.mjs');
const own = await local?.startPostgres();
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL ?? own.url });
// pg emits 'error' on the pool when an idle connection is lost (the server restarts or shuts
// down); without a listener that ends the process. The pool replaces the connection itself.
pool.on('error', (err) => console.error(`idle PostgreSQL connection lost: ${err.message}`));

try {
  await pool.query('DROP TABLE IF EXISTS example_accounts, example_transfers');
  await pool.query('CREATE TABLE example_accounts (id int PRIMARY KEY, balance bigint NOT NULL)');
  await pool.query('INSERT INTO example_accounts VALUES (1, 100), (2, 100)');

  const store = new PostgresIdempotencyStore({ pool, table: 'example_processed' });
  const queue = await DelayQueue.open({ postgres: pool, queue: 'example-transfers' });
  const seen = [];
  const handler = idempotent(
    async (message, { client }) => {
      // client is this delivery's transaction: both updates commit with the done mark.
      const { from, to, amount } = message.payload;
      await client.query('UPDATE example_accounts SET balance = balance - $1 WHERE id = $2', [
        amount,
        from,
      ]);
      await client.query('UPDATE example_accounts SET balance = balance + $1 WHERE id = $2', [
        amount,
        to,
      ]);
    },
    { store, onOutcome: (outcome, message) => console.log(`${message.id}: ${outcome}`) },
  );

  const consumer = queue.consume('transfers', async (message) => {
    await handler(message);
    seen.push(message);
  });
  // The transfers are scheduled in the transaction that records them: both or neither.
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('CREATE TABLE IF NOT EXISTS example_transfers (id text PRIMARY KEY)');
    await client.query("INSERT INTO example_transfers VALUES ('t-1'), ('t-2'), ('t-3')");
    await queue.scheduleMany(
      [
        { topic: 'transfers', id: 't-1', payload: { from: 1, to: 2, amount: 10 }, delayMs: 100 },
        { topic: 'transfers', id: 't-2', payload: { from: 2, to: 1, amount: 5 }, delayMs: 150 },
        { topic: 'transfers', id: 't-3', payload: { from: 1, to: 2, amount: 20 }, delayMs: 200 },
      ],
      { client },
    );
    await client.query('COMMIT');
  } finally {
    client.release();
  }
  while (seen.length < 3) await new Promise((resolve) => setTimeout(resolve, 20));
  await consumer.close();

  // t-1 again, as a consumer that died after the commit and before the ack would get it.
  process.stdout.write('t-1 delivered again: ');
  await handler(seen.find((message) => message.id === 't-1'));

  const { rows } = await pool.query('SELECT id, balance FROM example_accounts ORDER BY id');
  console.log(`balances: ${rows.map((r) => `${r.id}=${r.balance}`).join(' ')}`);
  const { ran, duplicates } = store.stats();
  console.log(`stats: ran ${ran}, duplicates ${duplicates}`);
  await store.close();
  await queue.close();
} finally {
  await (local ? local.endPool(pool) : pool.end());
  await own?.stop();
}
