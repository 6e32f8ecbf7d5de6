/**
 * The two peers of the cluster benchmark, behind one small interface, on the same Valkey
 * Cluster:
 *
 *   - `tickwheel`: a node of a tickwheel queue on the Cluster (`DelayQueue.open({ redis })`),
 *     with the durability the variant names (`async`, `replicated`, `fsynced`);
 *   - `bullmq`: a BullMQ Queue (delayed jobs) and Worker on an ioredis Cluster connection, with
 *     the `{bench}` hash-tag prefix BullMQ needs on a Cluster (its whole queue in one slot).
 *
 *   const peer = await openPeer('tickwheel', urls, { durability: 'replicated', queue: 'q1' });
 *   await peer.schedule([{ payload, due }]);           // due: epoch ms
 *   const consumer = peer.consume((due) => ..., 64);  // the handler gets the due time
 *   await consumer.close(); await peer.close();
 *
 * bullmq is looked up as bench/queue does (the project's node_modules, then TICKWHEEL_BENCH_DEPS).
 */

import { createRequire } from 'node:module';
import { join } from 'node:path';
import { URL } from 'node:url';
import { findBullmq } from '../queue/bullmq-peer.mjs';

const TOPIC = 'bench';

export async function openPeer(kind, urls, options = {}) {
  if (kind === 'tickwheel') return openTickwheel(urls, options);
  if (kind === 'bullmq') return openBullmq(urls, options);
  throw new Error(`unknown peer ${kind}`);
}

async function openTickwheel(urls, { durability = 'replicated', queue = 'bench', nodeId } = {}) {
  const { DelayQueue } = await import('../../dist/delay-queue.js');
  const q = await DelayQueue.open({
    redis: urls,
    queue,
    durability,
    nodeId,
    onError: (err) => process.stderr.write(`tickwheel background: ${err?.message ?? err}\n`),
  });
  const consumers = new Set();
  return {
    name: `tickwheel (${durability})`,
    async schedule(messages) {
      const results = await q.scheduleMany(
        messages.map(({ payload, due }) => ({ topic: TOPIC, payload, deliverAt: due })),
      );
      return results.map((r) => r.id);
    },
    consume(onMessage, concurrency) {
      const consumer = q.consume(TOPIC, (message) => onMessage(message.deliverAt), {
        concurrency,
      });
      consumers.add(consumer);
      return {
        close: async () => {
          consumers.delete(consumer);
          await consumer.close();
        },
      };
    },
    async close() {
      await Promise.all([...consumers].map((c) => c.close()));
      await q.close();
    },
  };
}

function loadIoredis() {
  const bases = [join(process.cwd(), 'package.json')];
  if (process.env.TICKWHEEL_BENCH_DEPS) {
    bases.push(join(process.env.TICKWHEEL_BENCH_DEPS, 'package.json'));
  }
  for (const base of bases) {
    try {
      return createRequire(base)('ioredis');
    } catch {
      // the next place
    }
  }
  throw new Error('ioredis is not installed next to bullmq (TICKWHEEL_BENCH_DEPS)');
}

async function openBullmq(urls) {
  const found = findBullmq();
  if (found === undefined) {
    throw new Error('bullmq is not installed: set TICKWHEEL_BENCH_DEPS (see bench/README.md)');
  }
  const { Queue, Worker } = found.bullmq;
  const { Cluster } = loadIoredis();
  const nodes = urls.map((url) => {
    const { hostname, port } = new URL(url);
    return { host: hostname, port: Number(port) };
  });
  // maxRetriesPerRequest: null is what BullMQ requires of Worker connections.
  const connect = () => new Cluster(nodes, { redisOptions: { maxRetriesPerRequest: null } });
  const connections = [];
  const connection = () => {
    const c = connect();
    c.on('error', () => {});
    connections.push(c);
    return c;
  };
  const queue = new Queue(TOPIC, { connection: connection(), prefix: '{bench}' });
  queue.on('error', () => {});
  await queue.waitUntilReady();
  const workers = new Set();
  return {
    name: `bullmq ${found.version}`,
    version: found.version,
    async schedule(messages) {
      const at = Date.now();
      const jobs = await queue.addBulk(
        messages.map(({ payload, due }) => ({
          name: 'message',
          data: { due, payload },
          opts: { delay: Math.max(0, due - at), removeOnComplete: true, removeOnFail: true },
        })),
      );
      return jobs.map((job) => job.id);
    },
    consume(onMessage, concurrency) {
      const worker = new Worker(TOPIC, async (job) => onMessage(job.data.due), {
        connection: connection(),
        prefix: '{bench}',
        concurrency,
      });
      worker.on('error', () => {});
      workers.add(worker);
      return {
        close: async () => {
          workers.delete(worker);
          await worker.close();
        },
      };
    },
    async close() {
      await Promise.all([...workers].map((w) => w.close()));
      await queue.close();
      for (const c of connections) c.disconnect();
    },
  };
}
