/**
 * The cells of the PostgreSQL peers' benchmark, each run in a process of its own (cell.mjs) on a
 * fresh database, against a peer of the shape pg-boss-peer.mjs and graphile-peer.mjs share:
 *
 *   scheduleOne(due), scheduleMany(dues)      delayed messages due at epoch ms
 *   consume(mode, options, onDelivered(due))  a consumer in this process → { settings, close }
 *   pending(), bytes(), walBytes(), errors, close()
 *
 * Every cell returns its numbers with `cpu`: milliseconds of this process's CPU and of every
 * PostgreSQL server process over the measured part, and both per message.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { LatenessRecorder } from '../queue/stats.mjs';
import { cpuMeter } from './server-cpu.mjs';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
/** The producer's steady schedule goes out in ten batches a second. */
const SLICES_PER_SECOND = 10;

const round1 = (value) => Math.round(value * 10) / 10;
const perSecond = (n, ms) => Math.round((n / ms) * 1000);

/** Runs fn() as the measured part of a cell: wall time, CPU and WAL written, per message. */
async function measured(peer, context, n, fn) {
  const walBefore = await peer.walBytes();
  const cpu = cpuMeter(context.postgresPid);
  const started = performance.now();
  const value = await fn();
  const ms = performance.now() - started;
  const cpuUsed = cpu.stop(n);
  const wal = (await peer.walBytes()) - walBefore;
  return { value, ms, cpu: cpuUsed, walBytesPerMessage: round1(wal / n) };
}

async function scheduleInBatches(peer, dues, batch) {
  for (let start = 0; start < dues.length; start += batch) {
    await peer.scheduleMany(dues.slice(start, start + batch));
  }
}

/** Counts deliveries and their lateness: the handler's time (Date.now()) minus the due time. */
function deliveryLog() {
  const lateness = new LatenessRecorder();
  const log = {
    delivered: 0,
    lastAt: 0,
    onDelivered(due) {
      const at = Date.now();
      lateness.add(at - due);
      log.delivered++;
      log.lastAt = at;
    },
    lateness,
  };
  return log;
}

/** Resolves once `until()` holds or at `deadline` (epoch ms); whether it held. */
async function waitFor(until, deadline, everyMs = 20) {
  while (!until()) {
    if (Date.now() >= deadline) return false;
    await sleep(everyMs);
  }
  return true;
}

/**
 * Schedules `rate` messages a second for `seconds`, each due `leadMs` after the moment its slice
 * goes out, in ten batches a second; due times are whole milliseconds, evenly spread.
 * Returns { scheduled, lastDue, producerLagMaxMs } once the last batch is in.
 */
async function produceAtRate(peer, { rate, seconds, leadMs }, onSlice = () => {}) {
  const perSlice = rate / SLICES_PER_SECOND;
  const slices = Math.round(seconds * SLICES_PER_SECOND);
  const sliceMs = 1000 / SLICES_PER_SECOND;
  const startAt = Date.now() + 100;
  let scheduled = 0;
  let lastDue = startAt;
  let producerLagMaxMs = 0;
  for (let k = 0; k < slices; k++) {
    const sliceAt = startAt + k * sliceMs;
    const wait = sliceAt - Date.now();
    if (wait > 0) await sleep(wait);
    producerLagMaxMs = Math.max(producerLagMaxMs, Date.now() - sliceAt);
    const first = Math.round(k * perSlice);
    const end = Math.round((k + 1) * perSlice);
    const dues = [];
    for (let i = first; i < end; i++) {
      dues.push(startAt + leadMs + Math.round((i * 1000) / rate));
    }
    if (dues.length === 0) continue;
    await peer.scheduleMany(dues);
    scheduled += dues.length;
    lastDue = dues[dues.length - 1];
    onSlice(k);
  }
  return { scheduled, lastDue, producerLagMaxMs };
}

/**
 * Before a schedule cell's measured part, `options.warmup` messages by the path it measures
 * (`schedule`: one at a time, or in batches), due an hour after the cell's own: every peer's
 * code is compiled and its pool's connections open, as in a process that has been scheduling.
 * Answers how many.
 */
async function warmUp(peer, options, schedule) {
  const due = Date.now() + 2 * HOUR_MS;
  const dues = Array.from({ length: options.warmup }, (_, i) => due + i);
  if (schedule === 'batches') await scheduleInBatches(peer, dues, options.batch);
  else for (const at of dues) await peer.scheduleOne(at);
  return dues.length;
}

/**
 * A schedule cell's numbers: n messages in `run` (measured()), and how many of them are pending
 * after (those of the warm-up not counted).
 */
async function scheduled(peer, n, run, warmed) {
  return {
    n,
    warmup: warmed,
    ms: Math.round(run.ms),
    perSecond: perSecond(n, run.ms),
    pendingAfter: (await peer.pending()) - warmed,
    walBytesPerMessage: run.walBytesPerMessage,
    cpu: run.cpu,
  };
}

// ---- the cells -----------------------------------------------------------------------------

/** N messages due in an hour, one schedule at a time, each awaited. */
export async function scheduleSingle(peer, options, context) {
  const n = options.single;
  const warmed = await warmUp(peer, options, 'one');
  const due = Date.now() + HOUR_MS;
  const run = await measured(peer, context, n, async () => {
    for (let i = 0; i < n; i++) await peer.scheduleOne(due + i);
  });
  return scheduled(peer, n, run, warmed);
}

/**
 * N messages due in an hour from C callers at once, each awaiting one schedule before its next:
 * request handlers of a web server scheduling as they go. A peer may gather concurrent calls
 * (tickwheel's producer sends a turn's schedules as one statement a partition); pg-boss and
 * Graphile Worker make an INSERT a call over their pools.
 */
export async function scheduleConcurrent(peer, options, context) {
  const n = options.concurrent;
  const callers = options.callers;
  const warmed = await warmUp(peer, options, 'one');
  const due = Date.now() + HOUR_MS;
  let next = 0;
  const caller = async () => {
    while (next < n) await peer.scheduleOne(due + next++);
  };
  const run = await measured(peer, context, n, () =>
    Promise.all(Array.from({ length: callers }, caller)),
  );
  return { callers, ...(await scheduled(peer, n, run, warmed)) };
}

/** N messages due in an hour, in batches (one batch awaited before the next). */
export async function scheduleBatched(peer, options, context) {
  const n = options.batched;
  const warmed = await warmUp(peer, options, 'batches');
  const base = Date.now() + HOUR_MS;
  const dues = Array.from({ length: n }, (_, i) => base + i);
  const run = await measured(peer, context, n, () => scheduleInBatches(peer, dues, options.batch));
  return { batch: options.batch, ...(await scheduled(peer, n, run, warmed)) };
}

/**
 * A steady `rate` due a second for `latenessSeconds`, each scheduled `leadMs` ahead, consumed by
 * the peer's worker in this process with the settings of `options.mode`.
 */
export async function lateness(peer, options, context) {
  const deliveries = deliveryLog();
  const consumer = await peer.consume(options.mode, options, deliveries.onDelivered);
  try {
    const run = await measured(peer, context, options.rate * options.latenessSeconds, async () => {
      const produced = await produceAtRate(peer, {
        rate: options.rate,
        seconds: options.latenessSeconds,
        leadMs: options.leadMs,
      });
      context.progress(`scheduled ${produced.scheduled}, waiting for the last to be delivered`);
      const drained = await waitFor(
        () => deliveries.delivered >= produced.scheduled,
        produced.lastDue + options.drainSeconds * 1000,
      );
      return { ...produced, drained };
    });
    const { scheduled, drained, producerLagMaxMs, lastDue } = run.value;
    return {
      mode: options.mode,
      settings: consumer.settings,
      rate: options.rate,
      seconds: options.latenessSeconds,
      leadMs: options.leadMs,
      scheduled,
      delivered: deliveries.delivered,
      drained,
      ...(drained
        ? {}
        : {
            note: `did not drain: ${deliveries.delivered} of ${scheduled} delivered ${options.drainSeconds} s after the last was due`,
          }),
      producerLagMaxMs,
      lastDeliveryAfterLastDueMs: deliveries.lastAt - lastDue,
      lateness: deliveries.lateness.summary(),
      cpu: run.cpu,
    };
  } finally {
    await consumer.close();
  }
}

/**
 * N messages due within the same second, scheduled in batches beforehand while the consumer
 * (low-latency settings) waits; the time from the first due time until the last is delivered.
 */
export async function burst(peer, options, context) {
  const n = options.burst;
  const deliveries = deliveryLog();
  const consumer = await peer.consume('low-latency', options, deliveries.onDelivered);
  try {
    const leadMs = options.burstLeadMs ?? 5_000 + Math.round(n * 0.25);
    const firstDue = Date.now() + leadMs;
    const dues = Array.from({ length: n }, (_, i) => firstDue + Math.floor((i * 1000) / n));
    const scheduleStarted = performance.now();
    await scheduleInBatches(peer, dues, options.batch);
    const scheduleMs = performance.now() - scheduleStarted;
    const scheduledBeforeDue = Date.now() < firstDue;
    context.progress(
      `scheduled ${n} in ${Math.round(scheduleMs)} ms, ` +
        `${scheduledBeforeDue ? 'before' : 'AFTER'} the first was due`,
    );
    const run = await measured(peer, context, n, () =>
      waitFor(() => deliveries.delivered >= n, firstDue + options.burstTimeoutSeconds * 1000, 5),
    );
    const drained = run.value;
    return {
      n,
      settings: consumer.settings,
      leadMs,
      scheduleMs: Math.round(scheduleMs),
      scheduledBeforeDue,
      delivered: deliveries.delivered,
      drained,
      // From the first due time to the last delivery; the messages fall due over 1 s of it.
      drainMs: drained ? deliveries.lastAt - firstDue : null,
      ...(drained
        ? {}
        : {
            note: `did not drain in ${options.burstTimeoutSeconds} s: ${deliveries.delivered} of ${n} delivered`,
          }),
      lateness: deliveries.lateness.summary(),
      cpu: run.cpu,
    };
  } finally {
    await consumer.close();
  }
}

/** RSS of this process after a full collection (run with --expose-gc). */
function rss() {
  globalThis.gc?.();
  return process.memoryUsage().rss;
}

/**
 * N far-future messages (due in 30 days) pending: bytes of the peer's tables, indexes and TOAST
 * per message, as they stand after the inserts (no VACUUM, no CHECKPOINT), and this process's
 * RSS (the peers hold no pending message in Node: it is the client's footprint).
 */
export async function pending(peer, options, context) {
  const n = options.pending;
  const base = Date.now() + 30 * DAY_MS;
  const before = await peer.bytes();
  const rssBefore = rss();
  const dues = Array.from({ length: n }, (_, i) => base + i);
  const run = await measured(peer, context, n, async () => {
    for (let start = 0; start < n; start += options.batch) {
      await peer.scheduleMany(dues.slice(start, start + options.batch));
      if ((start / options.batch) % 100 === 99)
        context.progress(`${start + options.batch} pending`);
    }
  });
  dues.length = 0;
  const after = await peer.bytes();
  const perMessage = (key) => round1((after[key] - before[key]) / n);
  return {
    n,
    pendingAfter: await peer.pending(),
    scheduledPerSecond: perSecond(n, run.ms),
    measuredAs: 'pg_total_relation_size of every table of the schema, no VACUUM or CHECKPOINT',
    bytesPerMessage: {
      total: perMessage('totalBytes'),
      heap: perMessage('heapBytes'),
      indexes: perMessage('indexBytes'),
    },
    totalBytes: { before: before.totalBytes, after: after.totalBytes },
    largest: after.largest,
    walBytesPerMessage: run.walBytesPerMessage,
    nodeRssBytes: { before: rssBefore, after: rss() },
    cpu: run.cpu,
  };
}

/**
 * Schedule, deliver and ack at `soakRate` a second for `soakMinutes`, low-latency consumer,
 * messages due 1 s ahead; the schema's bytes sampled every `soakSampleSeconds` (a minute). What is live at any time is
 * about soakRate messages: anything the tables keep beyond that is growth.
 */
export async function soak(peer, options, context) {
  const deliveries = deliveryLog();
  const consumer = await peer.consume('low-latency', options, deliveries.onDelivered);
  const samples = [];
  const sample = async (second) => {
    const bytes = await peer.bytes();
    samples.push({
      second,
      totalBytes: bytes.totalBytes,
      heapBytes: bytes.heapBytes,
      indexBytes: bytes.indexBytes,
      pending: await peer.pending(),
      delivered: deliveries.delivered,
    });
    context.progress(`${second} s: ${bytes.totalBytes} bytes, ${deliveries.delivered} delivered`);
  };
  const startedAt = Date.now();
  try {
    await sample(0);
    const seconds = options.soakMinutes * 60;
    const slicesPerSample = options.soakSampleSeconds * SLICES_PER_SECOND;
    const sampling = [];
    const run = await measured(peer, context, options.soakRate * seconds, async () => {
      const produced = await produceAtRate(
        peer,
        { rate: options.soakRate, seconds, leadMs: 1000 },
        (k) => {
          if ((k + 1) % slicesPerSample === 0) {
            sampling.push(sample((k + 1) / SLICES_PER_SECOND));
          }
        },
      );
      const drained = await waitFor(
        () => deliveries.delivered >= produced.scheduled,
        produced.lastDue + options.drainSeconds * 1000,
      );
      await Promise.all(sampling);
      return { ...produced, drained };
    });
    await sample(Math.round((Date.now() - startedAt) / 1000));
    const totals = samples.map((s) => s.totalBytes);
    return {
      rate: options.soakRate,
      minutes: options.soakMinutes,
      sampleSeconds: options.soakSampleSeconds,
      settings: consumer.settings,
      scheduled: run.value.scheduled,
      delivered: deliveries.delivered,
      drained: run.value.drained,
      totalBytes: { first: totals[0], last: totals[totals.length - 1], max: Math.max(...totals) },
      samples,
      lateness: deliveries.lateness.summary(),
      cpu: run.cpu,
    };
  } finally {
    await consumer.close();
  }
}

export const CELLS = {
  'schedule-single': scheduleSingle,
  'schedule-concurrent': scheduleConcurrent,
  'schedule-batched': scheduleBatched,
  lateness,
  burst,
  pending,
  soak,
};
