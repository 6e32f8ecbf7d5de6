/**
 * The Graphile Worker peer (0.17.x): `WorkerUtils.addJob(task, payload, { runAt })` for a single
 * delayed job, `addJobs([...])` for a batch (one `add_jobs` call), and `run({ taskList,
 * concurrency, pollInterval })` consuming them in this process. A job is deleted once its task
 * resolves (with completions batched, up to completeJobBatchDelay later). Graphile Worker is woken by NOTIFY when jobs are added, but a job added for later is
 * found by polling: its pollInterval bounds the lateness of a lone job.
 *
 * The consumer's two settings, both with the same concurrency (`--graphile-concurrency`, 10), a
 * pool of concurrency + 2 connections (its docs' advice) and its batching, as its performance
 * docs advise for many short jobs: a local queue of `--graphile-local-queue` (500) jobs fetched
 * and locked at once, and completions batched over `--graphile-complete-batch` (250 ms, the
 * docs' starting point); `--graphile-local-queue off --graphile-complete-batch off` are Graphile
 * Worker's own defaults (none), where each job is fetched and completed by a query of its own.
 *   low-latency  pollInterval 100 ms (`--graphile-poll-ms`)
 *   default      Graphile Worker's default pollInterval, 2 s
 */

import { schemaBytes, walBytes } from './catalog.mjs';
import { findPackage, loadPackage } from './deps.mjs';

export const NAME = 'graphile';
const TASK = 'bench';
const SCHEMA = 'graphile_worker';

export function unavailable() {
  return findPackage('graphile-worker').missing;
}

export function version() {
  return findPackage('graphile-worker').version;
}

export function consumerSettings(mode, options) {
  const { graphileConcurrency, graphilePollMs, graphileLocalQueue, graphileCompleteBatchMs } =
    options;
  const settings = { concurrency: graphileConcurrency, maxPoolSize: graphileConcurrency + 2 };
  if (mode === 'low-latency') settings.pollInterval = graphilePollMs;
  if (graphileLocalQueue > 0) settings.localQueueSize = graphileLocalQueue;
  if (graphileCompleteBatchMs >= 0) settings.completeJobBatchDelay = graphileCompleteBatchMs;
  return settings;
}

/** run()'s options for `settings`: the batching settings go in a preset. */
function runOptions({ localQueueSize, completeJobBatchDelay, ...settings }) {
  const worker = {};
  if (localQueueSize !== undefined) worker.localQueue = { size: localQueueSize };
  if (completeJobBatchDelay !== undefined) worker.completeJobBatchDelay = completeJobBatchDelay;
  return Object.keys(worker).length === 0 ? settings : { ...settings, preset: { worker } };
}

export async function openPeer({ url }) {
  const { Logger, makeWorkerUtils, run } = loadPackage('graphile-worker');
  const errors = [];
  // Graphile Worker logs every job at info level: only errors are kept, for the results.
  const logger = new Logger(() => (level, message) => {
    if (level !== 'error') return;
    if (errors.length < 10) errors.push(message);
    else errors[9] = `${message} (and more)`;
  });
  const utils = await makeWorkerUtils({ connectionString: url, logger });
  await utils.migrate();
  const query = async (text, values = []) =>
    (await utils.withPgClient((client) => client.query(text, values))).rows;
  const runners = new Set();
  return {
    name: NAME,
    version: version(),
    errors,
    async scheduleOne(due) {
      await utils.addJob(TASK, { due }, { runAt: new Date(due) });
    },
    async scheduleMany(dues) {
      await utils.addJobs(
        dues.map((due) => ({ identifier: TASK, payload: { due }, runAt: new Date(due) })),
      );
    },
    async consume(mode, options, onDelivered) {
      const settings = consumerSettings(mode, options);
      const runner = await run({
        connectionString: url,
        logger,
        noHandleSignals: true,
        ...runOptions(settings),
        taskList: {
          [TASK]: async (payload) => {
            onDelivered(payload.due);
          },
        },
      });
      runners.add(runner);
      return {
        settings,
        close: async () => {
          runners.delete(runner);
          await runner.stop();
        },
      };
    },
    async pending() {
      const [row] = await query(`select count(*)::bigint as n from ${SCHEMA}._private_jobs`);
      return Number(row.n);
    },
    bytes: () => schemaBytes(query, SCHEMA),
    walBytes: () => walBytes(query),
    async close() {
      await Promise.all([...runners].map((runner) => runner.stop()));
      await utils.release();
    },
  };
}
