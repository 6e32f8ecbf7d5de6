/**
 * The workloads, written once against a peer adapter (tickwheel-peer.mjs, bullmq-peer.mjs):
 *
 *   peer.now()                   epoch ms on the peer's clock
 *   peer.schedule(messages)      durable adds of [{ payload }] due at payload.due; -> ids
 *   peer.consume(fn, n)          runs fn(payload) for each delivery, n at a time, then acks
 *   peer.memoryMark()            / peer.memoryPerMessage(before, after, n) / peer.diskBytes()
 *
 * Every message carries its due time in its payload, so lateness is measured the same way for
 * both peers: the consumer's clock when the handler starts, minus the due time.
 */

import { clearInterval, setInterval } from 'node:timers';
import { LatenessRecorder } from './stats.mjs';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

export function payloadFor(n, due) {
  return { n, user: `user-${n % 1_000_000}`, due };
}

/** Messages n .. n+count-1, due at dueOf(n). */
export function batchOf(start, count, dueOf) {
  const messages = new Array(count);
  for (let i = 0; i < count; i++)
    messages[i] = { payload: payloadFor(start + i, dueOf(start + i)) };
  return messages;
}

/**
 * Schedules n messages as fast as the peer takes them: `lanes` producers, each sending a batch
 * of `batch` and waiting for it to be acknowledged before the next. Calls onAcked(count, ids)
 * after each batch.
 */
async function scheduleAll(peer, { n, batch, lanes, dueOf, onAcked, offset = 0 }) {
  let next = 0;
  const lane = async () => {
    while (next < n) {
      const start = next;
      const count = Math.min(batch, n - start);
      next += count;
      const ids = await peer.schedule(batchOf(offset + start, count, dueOf));
      onAcked?.(count, ids);
    }
  };
  await Promise.all(Array.from({ length: lanes }, lane));
}

/**
 * Puts `n` messages due at once through schedule, delivery and ack before a measurement, and
 * waits until all are delivered, so the measured part runs on warm code paths (JIT-compiled,
 * caches and pools grown), as in a service that has been running. Same for every peer.
 */
export async function warmUp(peer, { n, batch, lanes, concurrency }, progress) {
  if (!(n > 0)) return;
  let delivered = 0;
  let allDelivered;
  const done = new Promise((resolve) => (allDelivered = resolve));
  const consumer = peer.consume(() => {
    if (++delivered === n) allDelivered();
  }, concurrency);
  // Due over half a second from a moment after the schedules are in, so they go through the
  // timer path as the measured messages do (not only the "already due" one).
  const at = Math.ceil(peer.now()) + 300;
  // Numbers far above any measured message's, so no id or payload is shared with them.
  await scheduleAll(peer, { n, batch, lanes, dueOf: (i) => at + (i % 500), offset: 1e9 });
  await Promise.race([done, sleep(120_000)]);
  await consumer.close();
  progress?.(`warm-up: ${delivered.toLocaleString('en-US')} delivered`);
}

/** Calls report() at most every `everyMs`. */
function throttle(everyMs, report) {
  let last = 0;
  return (...args) => {
    const t = performance.now();
    if (t - last < everyMs) return;
    last = t;
    report(...args);
  };
}

/** Durable schedule throughput: n far-future messages (due in an hour), acknowledged. */
export async function throughput(peer, options, progress) {
  const { n, batch, lanes } = options;
  const dueAt = Math.floor(peer.now()) + 3_600_000;
  // A short warm-up, so the JIT and connections are not timed.
  await scheduleAll(peer, { n: Math.min(n, 5_000), batch, lanes, dueOf: () => dueAt });
  let acked = 0;
  const started = performance.now();
  const report = throttle(1000, () => {
    const seconds = (performance.now() - started) / 1000;
    progress(
      `${acked.toLocaleString('en-US')}/${n.toLocaleString('en-US')} acknowledged, ${Math.round(acked / seconds).toLocaleString('en-US')}/s`,
    );
  });
  await scheduleAll(peer, {
    n,
    batch,
    lanes,
    dueOf: () => dueAt,
    offset: 1_000_000_000,
    onAcked: (count) => {
      acked += count;
      report();
    },
  });
  const ms = performance.now() - started;
  return {
    n,
    batch,
    lanes,
    ms: Math.round(ms),
    perSecond: Math.round((n / ms) * 1000),
    stats: await peer.stats(),
  };
}

/**
 * A burst: n messages due within the same `spreadMs` (0: the very same millisecond), scheduled
 * `leadMs` ahead while a consumer already waits. Lateness of every delivery.
 */
export async function burst(peer, options, progress) {
  const { n, batch, lanes, spreadMs, leadMs, concurrency, warmup = 0 } = options;
  await warmUp(peer, { n: warmup, batch, lanes, concurrency }, progress);
  const lateness = new LatenessRecorder(n);
  let delivered = 0;
  let lastDelivery = 0;
  let allDelivered;
  const done = new Promise((resolve) => (allDelivered = resolve));
  const consumer = peer.consume((payload) => {
    const t = peer.now();
    lateness.add(t - payload.due);
    lastDelivery = t;
    if (++delivered === n) allDelivered();
  }, concurrency);
  const dueStart = Math.ceil(peer.now()) + leadMs;
  const dueOf = (i) => dueStart + Math.floor((i * spreadMs) / n);
  const scheduleStarted = performance.now();
  let acked = 0;
  const report = throttle(1000, () =>
    progress(`scheduled ${acked.toLocaleString('en-US')}/${n.toLocaleString('en-US')}`),
  );
  await scheduleAll(peer, {
    n,
    batch,
    lanes,
    dueOf,
    onAcked: (count) => {
      acked += count;
      report();
    },
  });
  const scheduleMs = performance.now() - scheduleStarted;
  const marginMs = dueStart - peer.now();
  const inMemoryAtDue = (await peer.stats()).inMemory;
  progress(
    `all ${n.toLocaleString('en-US')} scheduled in ${Math.round(scheduleMs)} ms; first due in ${Math.round(marginMs)} ms`,
  );
  const deadline = dueStart + spreadMs + 120_000;
  const watch = setInterval(
    () => progress(`delivered ${delivered.toLocaleString('en-US')}/${n.toLocaleString('en-US')}`),
    2000,
  );
  await Promise.race([done, sleep(deadline - peer.now())]);
  clearInterval(watch);
  const stats = await peer.stats();
  await consumer.close();
  const dueEnd = dueStart + spreadMs;
  return {
    n,
    spreadMs,
    leadMs,
    concurrency,
    scheduleMs: Math.round(scheduleMs),
    marginMs: Math.round(marginMs),
    valid: marginMs > 0,
    inMemoryBeforeDue: inMemoryAtDue,
    delivered,
    lost: n - delivered,
    drainMs: Math.round(lastDelivery - dueEnd),
    lateness: lateness.summary(),
    ...(stats.fireLatenessMs === undefined ? {} : { fireLatenessMs: stats.fireLatenessMs }),
  };
}

/**
 * Steady state: `rate` messages a second scheduled for `seconds`, each due 1-3 s later, and
 * delivered by a consumer in the same process. Lateness of every delivery.
 */
export async function steady(peer, options, progress) {
  const { rate, seconds, concurrency, warmup = 0 } = options;
  await warmUp(peer, { n: warmup, batch: 1000, lanes: 4, concurrency }, progress);
  const total = Math.round(rate * seconds);
  const lateness = new LatenessRecorder(total);
  let delivered = 0;
  let firstDelivery = 0;
  let lastDelivery = 0;
  const consumer = peer.consume((payload) => {
    const t = peer.now();
    lateness.add(t - payload.due);
    if (delivered++ === 0) firstDelivery = t;
    lastDelivery = t;
  }, concurrency);
  const cpuBefore = process.cpuUsage();
  const statsBefore = await peer.stats();
  let sent = 0;
  let acked = 0;
  let outstanding = 0;
  let behind = 0;
  const chunk = Math.max(1, Math.min(1000, Math.round(rate / 100)));
  const started = performance.now();
  const report = throttle(5000, () => {
    const elapsed = (performance.now() - started) / 1000;
    progress(
      `${Math.round(elapsed)}/${seconds} s: scheduled ${Math.round(acked / elapsed).toLocaleString('en-US')}/s, delivered ${delivered.toLocaleString('en-US')}, outstanding ${outstanding}`,
    );
  });
  const failures = [];
  while (performance.now() - started < seconds * 1000) {
    const owed = Math.min(total, Math.floor(((performance.now() - started) / 1000) * rate));
    // Never more than a second's worth unacknowledged: a peer that cannot keep up falls behind.
    while (sent < owed && outstanding < rate) {
      const count = Math.min(chunk, owed - sent);
      const start = sent;
      sent += count;
      outstanding += count;
      const at = Math.ceil(peer.now());
      const dueOf = (i) => at + 1000 + ((i * 7919) % 2000);
      peer
        .schedule(batchOf(start, count, dueOf))
        .then(
          () => (acked += count),
          (err) => failures.push(String(err)),
        )
        .finally(() => (outstanding -= count));
    }
    if (sent < owed) behind++;
    report();
    await sleep(5);
  }
  const produceMs = performance.now() - started;
  while (outstanding > 0) await sleep(5);
  // Everything is due at most 3 s after its schedule; allow generous time for a backlog.
  const drainUntil = performance.now() + 30_000;
  while (delivered < acked && performance.now() < drainUntil) await sleep(20);
  const statsAfter = await peer.stats();
  await consumer.close();
  const cpu = process.cpuUsage(cpuBefore);
  const summary = lateness.summary();
  return {
    rate,
    seconds,
    concurrency,
    scheduled: acked,
    scheduledPerSecond: Math.round((acked / produceMs) * 1000),
    delivered,
    deliveredPerSecond: Math.round((delivered / Math.max(1, lastDelivery - firstDelivery)) * 1000),
    lost: acked - delivered,
    producerFellBehindTicks: behind,
    scheduleFailures: failures.length,
    processCpuPercent: Math.round(((cpu.user + cpu.system) / 1000 / produceMs) * 100),
    redisCpuSeconds:
      statsAfter.redisCpuSeconds === undefined
        ? undefined
        : Math.round((statsAfter.redisCpuSeconds - statsBefore.redisCpuSeconds) * 10) / 10,
    lateness: summary,
    ...(statsAfter.fireLatenessMs === undefined
      ? {}
      : { fireLatenessMs: statsAfter.fireLatenessMs }),
  };
}

/**
 * Fills the peer with n far-future messages (due in 30 days), measures memory, reports
 * 'filled', then keeps scheduling until the runner kills the process (or the store under it).
 * `send` streams { type: 'acked', count, samples } so the runner knows what was acknowledged.
 */
export async function fill(peer, options, progress, send) {
  const { n, batch, lanes, spread = 1 } = options;
  const dueAt = Math.floor(peer.now()) + 30 * 86_400_000;
  // One a minute over `spread` minutes (1: all due at the same time).
  const dueOf = (i) => dueAt + (i % spread) * 60_000;
  const before = await peer.memoryMark();
  let acked = 0;
  let samples = [];
  const flush = () => {
    send({ type: 'acked', count: acked, samples });
    samples = [];
  };
  const onAcked = (count, ids) => {
    acked += count;
    samples.push(ids[ids.length - 1]);
  };
  const streaming = setInterval(flush, 100);
  const started = performance.now();
  const report = throttle(3000, () => {
    const seconds = (performance.now() - started) / 1000;
    progress(
      `${acked.toLocaleString('en-US')}/${n.toLocaleString('en-US')} pending, ${Math.round(acked / seconds).toLocaleString('en-US')}/s`,
    );
  });
  await scheduleAll(peer, {
    n,
    batch,
    lanes,
    dueOf,
    onAcked: (count, ids) => {
      onAcked(count, ids);
      report();
    },
  });
  const fillMs = performance.now() - started;
  const after = await peer.memoryMark();
  const disk = await peer.diskBytes();
  flush();
  const result = {
    n,
    fillMs: Math.round(fillMs),
    perSecond: Math.round((n / fillMs) * 1000),
    memory: { before, after, perMessage: peer.memoryPerMessage(before, after, n) },
    diskBytesPerMessage: Math.round((disk / n) * 10) / 10,
    stats: await peer.stats(),
  };
  send({ type: 'filled', result });
  // Load during the crash: keep scheduling until killed.
  await scheduleAll(peer, {
    n: Number.MAX_SAFE_INTEGER,
    batch,
    lanes,
    dueOf,
    offset: n,
    onAcked,
  });
  clearInterval(streaming);
}
