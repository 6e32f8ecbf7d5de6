/**
 * The tickwheel peer of the schedules benchmark: an embedded DelayQueue on a data directory
 * (default options: fsync 'batch', so a putSchedule resolves once its record and its next
 * occurrence's message are on disk), a consumer on the occurrences' topic in the same process.
 */

import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { URL, pathToFileURL } from 'node:url';
import { memorySnapshot } from '../queue/stats.mjs';

const TOPIC = 'occurrences';

/** dist/delay-queue.js of this checkout, or of the build in TICKWHEEL_BENCH_DIST. */
async function loadQueueModule() {
  const entry =
    process.env.TICKWHEEL_BENCH_DIST === undefined
      ? new URL('../../dist/delay-queue.js', import.meta.url)
      : pathToFileURL(join(process.env.TICKWHEEL_BENCH_DIST, 'delay-queue.js'));
  try {
    return await import(entry.href);
  } catch (err) {
    throw new Error(`cannot load ${entry.pathname}; run npm run build first (${err.message})`);
  }
}

/** Loads the module, so that a memory reading taken next does not count it as the queue's. */
export async function prepare() {
  await loadQueueModule();
}

/**
 * Epoch ms, monotonic, anchored to the wall clock as the queue's own clock is (Date.now() minus
 * performance.now(), not performance.timeOrigin, which can run ahead of the wall clock).
 */
const EPOCH_OFFSET = Date.now() - performance.now();

export function now() {
  return EPOCH_OFFSET + performance.now();
}

/** Bytes of every file under `dir`. */
function bytesUnder(dir) {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    total += entry.isDirectory() ? bytesUnder(path) : statSync(path).size;
  }
  return total;
}

export async function openPeer({ dir }) {
  const { DelayQueue } = await loadQueueModule();
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const queue = await DelayQueue.open({ dir });
  const openMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  const consumers = new Set();
  return {
    name: 'tickwheel',
    now,
    open: { ms: openMs, cpuMs: (cpu.user + cpu.system) / 1000 },
    put(name, spec) {
      return queue.putSchedule(name, { topic: TOPIC, ...spec });
    },
    /** onOccurrence(occurrence epoch ms) per delivery; acked once it returns. */
    async consume(onOccurrence, concurrency) {
      const consumer = queue.consume(
        TOPIC,
        (message) => onOccurrence(Number(message.id.slice(message.id.lastIndexOf('@') + 1))),
        { concurrency },
      );
      consumers.add(consumer);
    },
    async scheduleCount() {
      return (await queue.listSchedules()).length;
    },
    /** No server process: everything is in this one. */
    async server() {
      return null;
    },
    async memory() {
      // Not while a checkpoint is written: it holds a copy of the id table only meanwhile.
      const until = performance.now() + 30_000;
      while ((await queue.stats()).store.checkpointing === 1 && performance.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return memorySnapshot();
    },
    async disk() {
      const schedulesLog = join(dir, 'schedules.log');
      return {
        bytes: bytesUnder(dir),
        schedulesLogBytes: existsSync(schedulesLog) ? statSync(schedulesLog).size : 0,
      };
    },
    async close() {
      await Promise.all([...consumers].map((consumer) => consumer.close()));
      await queue.close();
    },
  };
}
