/**
 * The producer process of the idempotent-consumer crash harness with the queue on PostgreSQL
 * (scripts/idempotent-crash.mjs --queue postgres): records each transfer in table `transfers`
 * and schedules its message in the same transaction (`schedule(..., { client })`), so that a
 * transfer exists if and only if its message does. Every fifth one it also schedules a transfer
 * `r-<i>` and rolls that transaction back: those must never be applied.
 *
 * The harness SIGKILLs it at random and starts it again; PostgreSQL may be SIGKILLed under it.
 * It skips the transfers already committed, retries a transaction that failed (a COMMIT whose
 * answer was lost shows up as a duplicate key on the retry), and prints `produced` when every
 * transfer is in, and `committed <id>` after each transfer (the harness kills it after some).
 *
 * Config: JSON in TICKWHEEL_IDEMPOTENT_CHILD: {pg, queue (open options), transfers: [{id, from,
 * to, amount, delayMs}]}.
 */

import pg from 'pg';
import { whileDown } from './postgres.mjs';

const config = JSON.parse(process.env.TICKWHEEL_IDEMPOTENT_CHILD ?? '{}');
const { DelayQueue } = await import('../dist/delay-queue.js');

const pool = new pg.Pool({ connectionString: config.pg, max: 4 });
// Idle connections lost with a PostgreSQL kill are reported here; the next query reconnects.
pool.on('error', () => {});
const queue = await whileDown(() => DelayQueue.open({ postgres: pool, ...config.queue }));

const message = (t) => ({
  topic: 'transfers',
  id: t.id,
  payload: { from: t.from, to: t.to, amount: t.amount },
  delayMs: t.delayMs,
  // Every kill costs the messages in flight an attempt: enough of them that none goes dead.
  maxAttempts: 10_000,
  backoff: { type: 'fixed', delayMs: 20 },
});

/** One transaction: the transfer's row and its message, committed or rolled back together. */
async function record(t, commit) {
  const client = await pool.connect();
  // pg's checked-out clients emit 'error' when their connection is lost: heard, not fatal.
  let lost;
  const onLost = (err) => (lost = err);
  client.on('error', onLost);
  try {
    await client.query('BEGIN');
    await client.query(
      'INSERT INTO transfers (id, source, target, amount) VALUES ($1, $2, $3, $4)',
      [t.id, t.from, t.to, t.amount],
    );
    await queue.schedule(message(t), { client });
    await client.query(commit ? 'COMMIT' : 'ROLLBACK');
  } catch (err) {
    lost ??= err;
    throw err;
  } finally {
    client.off('error', onLost);
    // A broken connection is not put back in the pool.
    client.release(lost);
  }
}

const done = await whileDown(
  async () => new Set((await pool.query('SELECT id FROM transfers')).rows.map((row) => row.id)),
);
for (const [i, t] of config.transfers.entries()) {
  if (done.has(t.id)) continue;
  for (;;) {
    try {
      if (i % 5 === 0) await record({ ...t, id: `r-${i}` }, false);
      await record(t, true);
      process.stdout.write(`committed ${t.id}\n`);
      break;
    } catch (err) {
      // Committed, its answer lost with the connection: the retry finds the key taken.
      if (err?.code === '23505') {
        process.stdout.write(`committed ${t.id}\n`);
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}
await queue.close();
await pool.end();
process.stdout.write('produced\n');
