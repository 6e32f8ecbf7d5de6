/**
 * The tickwheel peer: a queue on PostgreSQL, `DelayQueue.open({ postgres: url, queue })` from
 * this checkout's dist/ (npm run build first; TICKWHEEL_BENCH_DIST names another build), one node
 * in this process holding every partition, its producer and its consumer.
 * `schedule({ topic, payload, deliverAt })` for a single delayed message, `scheduleMany([...])`
 * for a batch, `consume(topic, handler, { concurrency })` taking them; a message is acked when
 * the handler resolves. Messages are scheduled without ids, as the others' jobs are: each is a
 * located record appended to its window's segment (docs/postgres.md).
 *
 * Its settings are the queue's defaults (partitions 64, windowMs 30 s, poolSize 10) and a
 * consumer of `--tickwheel-concurrency` (10, Graphile Worker's) receiving `--tickwheel-prefetch`
 * (500, as Graphile Worker's local queue) ahead. Both lateness settings are the
 * same: the owner's timer wheel fires each message at its due time and the consumer is woken by
 * LISTEN/NOTIFY, so there is no polling interval to choose.
 */

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { URL, fileURLToPath, pathToFileURL } from 'node:url';
import { schemaBytes, walBytes } from './catalog.mjs';
import { findPackage, loadPackage } from './deps.mjs';

export const NAME = 'tickwheel';
const QUEUE = 'bench';
const TOPIC = 'bench';
/** The schema of queue `bench` (docs/postgres.md, "One schema per queue"). */
const SCHEMA = `tickwheel_${QUEUE}`;

function distEntry() {
  return process.env.TICKWHEEL_BENCH_DIST === undefined
    ? fileURLToPath(new URL('../../dist/delay-queue.js', import.meta.url))
    : join(process.env.TICKWHEEL_BENCH_DIST, 'delay-queue.js');
}

/** undefined when the peer can run here, else why not. */
export function unavailable() {
  if (!existsSync(distEntry())) return `${distEntry()} is missing: run npm run build first`;
  return findPackage('pg').missing;
}

/** This checkout's version: the build measured is the one in dist/. */
export function version() {
  const about = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
  return `${about.version} (this checkout)`;
}

export function consumerSettings(_mode, { tickwheelConcurrency, tickwheelPrefetch }) {
  return { concurrency: tickwheelConcurrency, prefetch: tickwheelPrefetch, partitions: 64 };
}

export async function openPeer({ url }) {
  const { DelayQueue } = await import(pathToFileURL(distEntry()).href);
  const errors = [];
  const keep = (err) => {
    const message = err instanceof Error ? err.message : String(err);
    if (errors.length < 10) errors.push(message);
    else errors[9] = `${message} (and more)`;
  };
  // Background faults (a lease lost, a write retried) are counted by code for the results.
  const faults = {};
  const onFault = (fault) => {
    if (fault.level !== 'info') faults[fault.code] = (faults[fault.code] ?? 0) + 1;
  };
  // TICKWHEEL_BENCH_FIRE_AHEAD_MS: the queue's fireAheadMs (bench/README.md, "PostgreSQL peers").
  const ahead = process.env.TICKWHEEL_BENCH_FIRE_AHEAD_MS;
  const queue = await DelayQueue.open({
    postgres: url,
    queue: QUEUE,
    onError: keep,
    onFault,
    ...(ahead === undefined ? {} : { fireAheadMs: Number(ahead) }),
  });
  // The catalog is read on a connection of its own, outside the queue's pool.
  const { Client } = loadPackage('pg');
  const catalog = new Client({ connectionString: url });
  await catalog.connect();
  const query = async (text, values = []) => (await catalog.query(text, values)).rows;
  const consumers = new Set();
  const request = (due) => ({ topic: TOPIC, payload: { due }, deliverAt: due });
  return {
    name: NAME,
    version: version(),
    errors,
    faults,
    async scheduleOne(due) {
      await queue.schedule(request(due));
    },
    async scheduleMany(dues) {
      await queue.scheduleMany(dues.map(request));
    },
    async consume(mode, options, onDelivered) {
      const settings = consumerSettings(mode, options);
      const consumer = queue.consume(TOPIC, (message) => onDelivered(message.payload.due), {
        concurrency: settings.concurrency,
        prefetch: settings.prefetch,
        onError: keep,
      });
      consumers.add(consumer);
      return {
        settings,
        close: async () => {
          consumers.delete(consumer);
          await consumer.close();
        },
      };
    },
    /** Live messages that are not dead: scheduled, ready or in flight. */
    async pending() {
      return (await queue.topicInfo(TOPIC)).pending;
    },
    bytes: () => schemaBytes(query, SCHEMA),
    walBytes: () => walBytes(query),
    async close() {
      await Promise.all([...consumers].map((consumer) => consumer.close()));
      await queue.close();
      await catalog.end();
    },
  };
}
