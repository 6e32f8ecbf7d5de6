/**
 * The BullMQ peer: delayed jobs (`{ delay }`) in a Queue, a Worker consuming them, both in
 * this process, on the redis-server the runner started (AOF, fsync every second). An add is
 * acknowledged once Redis has applied it and written it to the AOF file (not fsynced), so it
 * survives a crash of redis-server but not a power cut.
 *
 * bullmq is looked up in the project's node_modules first, then in the directory named by
 * TICKWHEEL_BENCH_DEPS (a folder with its own node_modules holding bullmq and ioredis), for
 * machines where it cannot be a devDependency.
 */

import { createRequire } from 'node:module';
import { join } from 'node:path';
import { URL, fileURLToPath } from 'node:url';
import { redisInfo } from './redis-server.mjs';

const QUEUE = 'bench';

function requireFrom() {
  const bases = [fileURLToPath(new URL('../../package.json', import.meta.url))];
  if (process.env.TICKWHEEL_BENCH_DEPS) {
    bases.push(join(process.env.TICKWHEEL_BENCH_DEPS, 'package.json'));
  }
  return bases.map((base) => createRequire(base));
}

/** { version, bullmq } or undefined when bullmq cannot be loaded here. */
export function findBullmq() {
  for (const require of requireFrom()) {
    try {
      const bullmq = require('bullmq');
      const version = require('bullmq/package.json').version;
      return { version, bullmq };
    } catch {
      // try the next place
    }
  }
  return undefined;
}

export function now() {
  return Date.now();
}

function loadBullmq() {
  const found = findBullmq();
  if (found === undefined) {
    throw new Error(
      'bullmq is not installed: npm install -D bullmq, or set TICKWHEEL_BENCH_DEPS to a folder ' +
        'where `npm install bullmq ioredis` was run',
    );
  }
  return found.bullmq;
}

function connectionFor(port) {
  // maxRetriesPerRequest: null is what BullMQ requires of Worker connections.
  return { host: '127.0.0.1', port, maxRetriesPerRequest: null };
}

async function redisMemory(port) {
  const [memory, persistence] = await Promise.all([
    redisInfo(port, 'memory'),
    redisInfo(port, 'persistence'),
  ]);
  return {
    usedMemory: Number(memory.used_memory),
    usedMemoryRss: Number(memory.used_memory_rss),
    aofBytes: Number(persistence.aof_current_size ?? NaN),
  };
}

export async function openPeer({ port }) {
  const { Queue, Worker } = loadBullmq();
  const openedAt = performance.now();
  const queue = new Queue(QUEUE, { connection: connectionFor(port) });
  // Connection errors are expected in the crash cell, once redis-server is killed.
  let connectionErrors = 0;
  queue.on('error', () => connectionErrors++);
  await queue.waitUntilReady();
  const openMs = performance.now() - openedAt;
  const workers = new Set();
  return {
    name: 'bullmq',
    queue,
    openMs,
    now,
    /** addBulk of delayed jobs due at payload.due (epoch ms); resolves with their job ids. */
    async schedule(messages) {
      const at = Date.now();
      const jobs = await queue.addBulk(
        messages.map(({ payload }) => ({
          name: 'message',
          data: payload,
          opts: { delay: Math.max(0, payload.due - at), removeOnComplete: true },
        })),
      );
      return jobs.map((job) => job.id);
    },
    consume(onMessage, concurrency) {
      const worker = new Worker(QUEUE, async (job) => onMessage(job.data), {
        connection: connectionFor(port),
        concurrency,
      });
      worker.on('error', (err) => process.emitWarning(err));
      workers.add(worker);
      return {
        close: async () => {
          workers.delete(worker);
          await worker.close();
        },
      };
    },
    async memoryMark() {
      return redisMemory(port);
    },
    memoryPerMessage(before, after, n) {
      const round = (bytes) => Math.round((bytes / n) * 10) / 10;
      return {
        usedMemoryBytes: round(after.usedMemory - before.usedMemory),
        usedMemoryRssBytes: round(after.usedMemoryRss - before.usedMemoryRss),
      };
    },
    async diskBytes() {
      return (await redisMemory(port)).aofBytes;
    },
    async stats() {
      const cpu = await redisInfo(port, 'cpu');
      return {
        connectionErrors,
        counts: await queue.getJobCounts('delayed', 'wait', 'active', 'completed', 'failed'),
        redisCpuSeconds: Number(cpu.used_cpu_user) + Number(cpu.used_cpu_sys),
      };
    },
    async close() {
      await Promise.all([...workers].map((worker) => worker.close()));
      await queue.close();
    },
  };
}

/** After redis-server was killed and started again: what survived. */
export async function verifyPeer({ port, samples }) {
  const { Queue } = loadBullmq();
  const queue = new Queue(QUEUE, { connection: connectionFor(port) });
  try {
    const delayed = await queue.getDelayedCount();
    let missing = 0;
    const missingIds = [];
    for (let start = 0; start < samples.length; start += 256) {
      const chunk = samples.slice(start, start + 256);
      const states = await Promise.all(chunk.map((id) => queue.getJobState(id)));
      for (let i = 0; i < chunk.length; i++) {
        if (states[i] !== 'delayed') {
          missing++;
          if (missingIds.length < 10) missingIds.push(chunk[i]);
        }
      }
    }
    return {
      live: delayed,
      samplesChecked: samples.length,
      samplesMissing: missing,
      missingIds,
    };
  } finally {
    await queue.close();
  }
}
