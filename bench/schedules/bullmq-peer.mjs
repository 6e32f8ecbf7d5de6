/**
 * The BullMQ peer of the schedules benchmark: job schedulers (`upsertJobScheduler`) in a Queue
 * and a Worker consuming their jobs, both in this process, on a redis-server the runner started
 * (bench/queue/redis-server.mjs: loopback, AOF with fsync every second, no RDB). Like
 * tickwheel, a scheduler holds its next job (delayed) from the moment it is upserted, and the
 * Worker makes the one after when it takes a job. bullmq comes from the project's node_modules
 * or from TICKWHEEL_BENCH_DEPS (bench/queue/bullmq-peer.mjs).
 */

import { findBullmq } from '../queue/bullmq-peer.mjs';
import { redisInfo } from '../queue/redis-server.mjs';
import { memorySnapshot } from '../queue/stats.mjs';

const QUEUE = 'schedules';

function connectionFor(port) {
  // maxRetriesPerRequest: null is what BullMQ requires of Worker connections.
  return { host: '127.0.0.1', port, maxRetriesPerRequest: null };
}

export function now() {
  return Date.now();
}

/** What redis-server has used so far: CPU seconds (user + system), memory, AOF size. */
export async function redisUsage(port) {
  const [cpu, memory, persistence] = await Promise.all([
    redisInfo(port, 'cpu'),
    redisInfo(port, 'memory'),
    redisInfo(port, 'persistence'),
  ]);
  return {
    cpuMs: (Number(cpu.used_cpu_user) + Number(cpu.used_cpu_sys)) * 1000,
    usedMemory: Number(memory.used_memory),
    usedMemoryRss: Number(memory.used_memory_rss),
    aofBytes: Number(persistence.aof_current_size ?? NaN),
  };
}

/** The repeat options of a neutral spec (specs.mjs). */
function repeatOf(spec) {
  const startDate = spec.startAt === undefined ? {} : { startDate: spec.startAt };
  return spec.cron !== undefined
    ? { pattern: spec.cron, tz: spec.timezone, ...startDate }
    : { every: spec.everyMs, ...startDate };
}

function loadBullmq() {
  const found = findBullmq();
  if (found === undefined) {
    throw new Error('bullmq is not installed (see bench/README.md, TICKWHEEL_BENCH_DEPS)');
  }
  return found.bullmq;
}

/** Loads the modules, so that a memory reading taken next does not count them as the queue's. */
export async function prepare() {
  loadBullmq();
}

export async function openPeer({ port }) {
  const { Queue, Worker } = loadBullmq();
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const queue = new Queue(QUEUE, { connection: connectionFor(port) });
  queue.on('error', (err) => process.emitWarning(err));
  await queue.waitUntilReady();
  const openMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  const workers = new Set();
  return {
    name: 'bullmq',
    now,
    open: { ms: openMs, cpuMs: (cpu.user + cpu.system) / 1000 },
    put(name, spec) {
      return queue.upsertJobScheduler(name, repeatOf(spec), {
        name: 'occurrence',
        data: spec.payload,
        opts: { removeOnComplete: true },
      });
    },
    /** onOccurrence(occurrence epoch ms) per job; the job completes once it returns. */
    async consume(onOccurrence, concurrency) {
      // A scheduler's job id is `repeat:<scheduler id>:<occurrence epoch ms>`.
      const worker = new Worker(
        QUEUE,
        async (job) => onOccurrence(Number(job.id.slice(job.id.lastIndexOf(':') + 1))),
        { connection: connectionFor(port), concurrency },
      );
      worker.on('error', (err) => process.emitWarning(err));
      workers.add(worker);
      await worker.waitUntilReady();
    },
    scheduleCount() {
      return queue.getJobSchedulersCount();
    },
    server() {
      return redisUsage(port);
    },
    memory() {
      return memorySnapshot();
    },
    async disk() {
      return { bytes: (await redisUsage(port)).aofBytes };
    },
    async close() {
      await Promise.all([...workers].map((worker) => worker.close()));
      await queue.close();
    },
  };
}
