/**
 * The tickwheel peer: an embedded DelayQueue on a file store in a data directory, producer
 * and consumer in this process. Every schedule() resolves only once its record is fsynced
 * ('batch' group commit), so an acknowledged message survives a crash of the process and a
 * power cut.
 */

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { URL, pathToFileURL } from 'node:url';
import { memorySnapshot, perMessage } from './stats.mjs';

const TOPIC = 'bench';

/**
 * dist/delay-queue.js of this checkout, or of another build given by TICKWHEEL_BENCH_DIST (a
 * dist folder), to compare a change against the same workloads.
 */
async function loadQueueModule() {
  const entry =
    process.env.TICKWHEEL_BENCH_DIST === undefined
      ? new URL('../../dist/delay-queue.js', import.meta.url)
      : pathToFileURL(queueEntryOf(process.env.TICKWHEEL_BENCH_DIST));
  try {
    return await import(entry.href);
  } catch (err) {
    throw new Error(`cannot load ${entry.pathname}; run npm run build first (${err.message})`);
  }
}

/** The tickwheel/queue module of a dist folder: older builds named it queue-entry.js. */
function queueEntryOf(dist) {
  const entry = join(dist, 'delay-queue.js');
  return existsSync(entry) ? entry : join(dist, 'queue-entry.js');
}

/**
 * The clock the queue fires by, for the bench to read lateness on: the queue's default
 * (SystemClock with epoch: monotonic, anchored to the wall clock when made), given to it at open.
 * A clock of the bench's own (performance.timeOrigin + performance.now()) can stand a fraction
 * of a millisecond or more from it, which read on-time deliveries as early.
 */
async function queueClock() {
  const entry =
    process.env.TICKWHEEL_BENCH_DIST === undefined
      ? new URL('../../dist/index.js', import.meta.url)
      : pathToFileURL(join(process.env.TICKWHEEL_BENCH_DIST, 'index.js'));
  const { SystemClock } = await import(entry.href);
  return new SystemClock({ epoch: true });
}

/**
 * Opens the queue. `queueOptions` may override horizonMs / windowMs (the burst-from-disk
 * cell) and fsync.
 */
export async function openPeer({ dir, queueOptions = {} }) {
  const { DelayQueue } = await loadQueueModule();
  const clock = await queueClock();
  const openedAt = performance.now();
  const queue = await DelayQueue.open({ dir, fsync: 'batch', clock, ...queueOptions });
  const openMs = performance.now() - openedAt;
  return {
    name: 'tickwheel',
    queue,
    openMs,
    now: () => clock.now(),
    /** Schedules messages due at `due` (epoch ms); resolves with their ids once durable. */
    async schedule(messages) {
      // scheduleMany: our counterpart of BullMQ's addBulk (each record still waits for the
      // fsync that covers it; the batch shares group commits and one promise).
      const requests = new Array(messages.length);
      for (let i = 0; i < messages.length; i++) {
        const { payload } = messages[i];
        requests[i] = { topic: TOPIC, payload, deliverAt: payload.due };
      }
      const results = await queue.scheduleMany(requests);
      return results.map((result) => result.id);
    },
    /** Calls onMessage(payload) for every delivery; acks once it returns. */
    consume(onMessage, concurrency) {
      return queue.consume(TOPIC, (message) => onMessage(message.payload), { concurrency });
    },
    async memoryMark() {
      // Measured once no checkpoint is being written: a snapshot holds a copy of the id table
      // (as many bytes again) only while it is written, which is not per-message memory.
      const until = performance.now() + 30_000;
      while ((await queue.stats()).store.checkpointing === 1 && performance.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return memorySnapshot();
    },
    memoryPerMessage(before, after, n) {
      return perMessage(before, after, n);
    },
    async diskBytes() {
      return (await queue.stats()).store.logBytes;
    },
    async stats() {
      const stats = await queue.stats();
      return {
        // When the wheel made messages ready, minus their due time: the last 4,096 only.
        fireLatenessMs: stats.latenessMs,
        scheduled: stats.scheduled,
        delivered: stats.delivered,
        acked: stats.acked,
        inMemory: stats.inMemory,
        store: stats.store,
      };
    },
    close: () => queue.close(),
  };
}

/** Opens a data directory left by a killed process and reports how the recovery went. */
export async function recoverPeer({ dir, samples }, notify) {
  const { DelayQueue } = await loadQueueModule();
  const before = await memorySnapshot();
  const openedAt = performance.now();
  const queue = await DelayQueue.open({ dir, fsync: 'batch' });
  const openMs = performance.now() - openedAt;
  notify({ type: 'opened' });
  const recovery = queue.recovery;
  const after = await memorySnapshot();
  const live = recovery.live;
  let missing = 0;
  const missingIds = [];
  for (let start = 0; start < samples.length; start += 256) {
    const chunk = samples.slice(start, start + 256);
    const found = await Promise.all(chunk.map((id) => queue.get(id)));
    for (let i = 0; i < chunk.length; i++) {
      if (found[i] === undefined || found[i].status !== 'scheduled') {
        missing++;
        if (missingIds.length < 10) missingIds.push(chunk[i]);
      }
    }
  }
  await queue.close();
  return {
    openMs,
    recoveryDurationMs: recovery.durationMs,
    live,
    corrupt: recovery.corrupt.length,
    truncatedBytes: recovery.truncatedBytes,
    samplesChecked: samples.length,
    samplesMissing: missing,
    missingIds,
    memoryAfterRecovery: { before, after, perMessage: perMessage(before, after, live) },
  };
}
