/**
 * The pg-boss peer (10.x): one queue, `send(name, data, { startAfter })` for a single delayed
 * job, `insert([...])` for a batch, `work()` consuming them in this process. A job is done when
 * the work handler resolves (pg-boss completes the batch after it). Everything else is pg-boss's
 * defaults: its maintenance runs, and completed jobs stay in the job table until archived (12 h)
 * and in the archive until deleted (7 days), which is what the soak cell sees.
 *
 * The consumer's two settings, both with the same `batchSize` (`--pgboss-batch`): pg-boss's
 * worker sleeps for its polling interval after every fetch, full or not, so one worker delivers
 * at most batchSize a polling interval; with its default batchSize of 1 it would take half a job
 * a second.
 *   low-latency  pollingIntervalSeconds 0.5, the least pg-boss accepts
 *   default      pg-boss's default polling, every 2 s
 */

import { schemaBytes, walBytes } from './catalog.mjs';
import { findPackage, loadPackage } from './deps.mjs';

export const NAME = 'pg-boss';
const QUEUE = 'bench';
const SCHEMA = 'pgboss';

/** undefined when the peer can run here, else why not. */
export function unavailable() {
  return findPackage('pg-boss').missing;
}

export function version() {
  return findPackage('pg-boss').version;
}

export function consumerSettings(mode, { pgbossBatch }) {
  const settings = { batchSize: pgbossBatch };
  if (mode === 'low-latency') settings.pollingIntervalSeconds = 0.5;
  return settings;
}

export async function openPeer({ url }) {
  const PgBoss = loadPackage('pg-boss');
  const boss = new PgBoss({ connectionString: url });
  const errors = [];
  boss.on('error', (err) => {
    if (errors.length < 10) errors.push(err.message);
    else errors[9] = `${err.message} (and more)`;
  });
  await boss.start();
  await boss.createQueue(QUEUE);
  const db = boss.getDb();
  const query = async (text, values = []) => (await db.executeSql(text, values)).rows;
  const data = (due) => ({ due });
  return {
    name: NAME,
    version: version(),
    errors,
    async scheduleOne(due) {
      await boss.send(QUEUE, data(due), { startAfter: new Date(due) });
    },
    async scheduleMany(dues) {
      await boss.insert(
        dues.map((due) => ({ name: QUEUE, data: data(due), startAfter: new Date(due) })),
      );
    },
    /** Runs a worker in this process; onDelivered(due) for each job as its handler runs. */
    async consume(mode, options, onDelivered) {
      const settings = consumerSettings(mode, options);
      const id = await boss.work(QUEUE, settings, async (jobs) => {
        for (const job of jobs) onDelivered(job.data.due);
      });
      return { settings, close: () => boss.offWork({ id }) };
    },
    /** Jobs not yet completed: created and retry (pg-boss's queue size), and active. */
    async pending() {
      const [row] = await query(
        `select count(*) filter (where state < 'active')::bigint as waiting,
                count(*) filter (where state = 'active')::bigint as active
           from ${SCHEMA}.job where name = $1`,
        [QUEUE],
      );
      return Number(row.waiting) + Number(row.active);
    },
    bytes: () => schemaBytes(query, SCHEMA),
    walBytes: () => walBytes(query),
    async close() {
      await boss.stop({ graceful: true, wait: true, timeout: 10_000 });
    },
  };
}
