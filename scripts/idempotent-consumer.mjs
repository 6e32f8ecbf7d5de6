/**
 * The consumer process of the idempotent-consumer crash harness (scripts/idempotent-crash.mjs):
 * consumes topic `transfers` of an embedded queue, moving money between rows of PostgreSQL once
 * per message through `idempotent()`, and SIGKILLs itself at the point it is told:
 *
 *   before-effect   the handler has started, nothing written
 *   inside-effect   the transfer is written, its transaction not committed
 *   after-effect    Redis store: the transfer is committed, the key not yet marked done
 *   after-commit    the store reports 'ran' (committed and marked), the message not yet acked
 *   random          `after` ms after it starts consuming, wherever it is then
 *
 * With `queue` (its open options) the queue is on PostgreSQL, in the database of the transfers, fed
 * by scripts/idempotent-producer.mjs while this runs; the consumer is drained once all
 * `expected` transfers are recorded and none is left in the queue. PostgreSQL may be killed
 * under it: what fails meanwhile is retried.
 *
 * Config: JSON in TICKWHEEL_IDEMPOTENT_CHILD: {dir, pg, redis?, store, point, after, queue?,
 * expected?}.
 */

import pg from 'pg';
import { whileDown } from './postgres.mjs';

const config = JSON.parse(process.env.TICKWHEEL_IDEMPOTENT_CHILD ?? '{}');
const { DelayQueue } = await import('../dist/delay-queue.js');
const { idempotent, PostgresIdempotencyStore, RedisIdempotencyStore } =
  await import('../dist/idempotent/index.js');

const pool = new pg.Pool({ connectionString: config.pg, max: 8 });
// Idle connections lost with a PostgreSQL kill are reported here; the next query reconnects.
pool.on('error', () => {});

const store =
  config.store === 'postgres'
    ? new PostgresIdempotencyStore({ pool, purgeEveryMs: 0 })
    : await RedisIdempotencyStore.open({ redis: config.redis, claimMs: 1_000 });
const queue = await whileDown(() =>
  config.queue === undefined
    ? DelayQueue.open({ dir: config.dir })
    : DelayQueue.open({ postgres: pool, ...config.queue }),
);

let ran = 0;
function crashAt(point) {
  if (point === config.point && ran >= config.after) process.kill(process.pid, 'SIGKILL');
}

/** The effect: one transfer, and a ledger row that says it happened (duplicates show there). */
async function transfer(db, message) {
  const { from, to, amount } = message.payload;
  crashAt('before-effect');
  await db.query('UPDATE accounts SET balance = balance - $1 WHERE id = $2', [amount, from]);
  await db.query('UPDATE accounts SET balance = balance + $1 WHERE id = $2', [amount, to]);
  await db.query('INSERT INTO ledger (message, amount) VALUES ($1, $2)', [message.id, amount]);
  crashAt('inside-effect');
}

const onOutcome = (outcome) => {
  if (outcome !== 'ran') return;
  ran++;
  crashAt('after-commit');
};

const handler =
  config.store === 'postgres'
    ? idempotent((message, { client }) => transfer(client, message), { store, onOutcome })
    : idempotent(
        async (message) => {
          // The Redis store cannot join the transaction: the effect commits on its own.
          const client = await pool.connect();
          try {
            await client.query('BEGIN');
            await transfer(client, message);
            await client.query('COMMIT');
          } catch (err) {
            await client.query('ROLLBACK').catch(() => {});
            throw err;
          } finally {
            client.release();
          }
          crashAt('after-effect');
        },
        { store, onOutcome },
      );

const consumer = queue.consume('transfers', handler, {
  concurrency: 2,
  visibilityMs: 1_000,
  // A busy claim (Redis store) or a lost race is retried by the queue; nothing to report.
  onError: () => {},
});

if (config.point === 'random') setTimeout(() => process.kill(process.pid, 'SIGKILL'), config.after);

/** Whether every transfer is recorded (always, with the queue embedded: scheduled up front). */
async function allRecorded() {
  if (config.expected === undefined) return true;
  const { rows } = await pool.query('SELECT count(*)::int AS n FROM transfers');
  return rows[0].n === config.expected;
}

let dead = 0;
for (;;) {
  await new Promise((resolve) => setTimeout(resolve, 100));
  try {
    // Recorded first: a transfer's message exists from its commit on.
    if (!(await allRecorded())) continue;
    const stats = await queue.stats();
    const t = stats.topics?.transfers;
    dead = t?.dead ?? 0;
    if (t === undefined || t.scheduled + t.ready + t.inflight === 0) break;
  } catch {
    // PostgreSQL down: asked again.
  }
}
// Said before closing: PostgreSQL may be killed meanwhile, and the run's outcome is known.
process.stdout.write(`drained dead=${dead}\n`);
await consumer.close();
await queue.close();
await store.close();
await pool.end();
