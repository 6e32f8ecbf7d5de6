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

 *
 * Config: JSON in TICKWHEEL_IDEMPOTENT_CHILD: {dir, pg, redis?, store, point, after}.
 */

import pg from 'pg';

const config = JSON.parse(process.env.TICKWHEEL_IDEMPOTENT_CHILD ?? '{}');
const { DelayQueue } = await import('../dist/delay-queue.js');
const { idempotent, PostgresIdempotencyStore, RedisIdempotencyStore } =
  await import('../dist/idempotent/index.js');

const pool = new pg.Pool({ connectionString: config.pg, max: 4 });
const store =
  config.store === 'postgres'
    ? new PostgresIdempotencyStore({ pool, purgeEveryMs: 0 })
    : await RedisIdempotencyStore.open({ redis: config.redis, claimMs: 1_000 });
const queue = await DelayQueue.open({ dir: config.dir });

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

let dead = 0;
for (;;) {
  await new Promise((resolve) => setTimeout(resolve, 100));
  const stats = await queue.stats();
  const t = stats.topics?.transfers;
  dead = t?.dead ?? 0;
  if (t === undefined || t.scheduled + t.ready + t.inflight === 0) break;
}
await consumer.close();
await queue.close();
await store.close();
await pool.end();
process.stdout.write(`drained dead=${dead}\n`);
