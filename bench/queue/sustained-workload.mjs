/**
 * The sustained-delivery cell of `npm run bench:sustained`, run in one cell process per peer
 * (cell.mjs): schedule → deliver → ack at a fixed rate for a few seconds, then the same at the
 * next rate, rising step by step until lateness breaks.
 *
 * Within a step of rate R and S seconds, message i is scheduled at the step's start + i/R
 * seconds and is due `leadMs` (1 s) after that, so deliveries come due at exactly R a second
 * for S seconds. Producers send what is owed every few milliseconds in batches (scheduleMany /
 * addBulk), with at most one lead's worth of messages unacknowledged: a peer that takes
 * schedules too slowly makes its producers fall behind, and messages scheduled after their
 * due time count as late. One consumer, started after the warm-up and kept for every step,
 * acks each delivery once its handler returns; lateness is its clock when the handler starts
 * minus the due time in the payload.
 *
 * A step holds when its p99 lateness is within `boundMs`, every message was delivered within
 * `drainMs` of the last due time, the deliveries kept up with the rate (at least 95 % of it,
 * from the first due time to the last delivery) and no schedule failed. The cell stops at the
 * first step that does not hold, unless told to go on (`keepGoing`).
 *
 * CPU of each step, from its first schedule until its last delivery: this process's (producers,
 * consumer and, embedded, the queue itself) and the server's (`serverPid`: `tickwheel serve`
 * or redis-server, read from /proc).
 */

import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { LatenessRecorder, procCpuSeconds } from './stats.mjs';
import { batchOf, warmUp } from './workloads.mjs';

/**
 * Payload numbers of step k run from (k + 1) * STEP_SPAN, above the warm-up's (from 1e9), so a
 * delivery tells its step and its index within it.
 */
const STEP_SPAN = 1e10;

/** How often the producers send what is owed. */
const PRODUCER_TICK_MS = 5;

/** Share of the target rate the deliveries must reach for a step to hold. */
const KEEP_UP = 0.95;

/** What the consumer saw of one step: each message's first delivery, and repeats. */
class StepTally {
  constructor(total) {
    this.lateness = new LatenessRecorder(total);
    this.seen = new Uint8Array(total);
    this.delivered = 0;
    this.duplicates = 0;
    this.lastDelivery = 0;
  }

  add(index, latenessMs, at) {
    if (this.seen[index] === 1) {
      this.duplicates++;
      return;
    }
    this.seen[index] = 1;
    this.delivered++;
    this.lateness.add(latenessMs);
    if (at > this.lastDelivery) this.lastDelivery = at;
  }
}

export async function sustained(peer, options, progress) {
  const { rates, concurrency, batch, warmup, keepGoing, serverPid } = options;
  await warmUp(peer, { n: warmup, batch, lanes: 4, concurrency }, progress);
  const tallies = [];
  const consumer = peer.consume((payload) => {
    const at = peer.now();
    const tally = tallies[Math.floor(payload.n / STEP_SPAN) - 1];
    // A warm-up message delivered again: no step's.
    if (tally !== undefined) tally.add(payload.n % STEP_SPAN, at - payload.due, at);
  }, concurrency);
  const serverCpu = () => (serverPid === undefined ? null : procCpuSeconds(serverPid));
  const steps = [];
  try {
    for (let k = 0; k < rates.length; k++) {
      const total = Math.max(1, Math.round(rates[k] * options.seconds));
      tallies[k] = new StepTally(total);
      const step = await runStep(peer, { ...options, rate: rates[k], total, k }, tallies[k], {
        serverCpu,
        progress,
      });
      tallies[k] = undefined;
      steps.push(step);
      progress(describeStep(step));
      if (!step.held && !keepGoing) break;
    }
  } finally {
    await consumer.close();
  }
  return { steps };
}

async function runStep(peer, step, tally, { serverCpu, progress }) {
  const { rate, total, k, seconds, leadMs, boundMs, batch, drainMs } = step;
  const base = (k + 1) * STEP_SPAN;
  const loadBefore = loadavg()[0];
  const serverBefore = serverCpu();
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const firstDue = Math.ceil(peer.now()) + leadMs;
  const dueOf = (n) => Math.floor(firstDue + ((n - base) * 1000) / rate);
  const lastDue = dueOf(base + total - 1);
  const inFlightBound = Math.max(batch, Math.round((rate * leadMs) / 1000));
  let sent = 0;
  let acked = 0;
  let outstanding = 0;
  let producerLagMaxMs = 0;
  const failures = [];
  while (sent < total) {
    const elapsed = performance.now() - started;
    const owed = Math.min(total, Math.floor((elapsed * rate) / 1000) + 1);
    while (sent < owed && outstanding < inFlightBound) {
      const count = Math.min(batch, owed - sent, inFlightBound - outstanding);
      const start = sent;
      sent += count;
      outstanding += count;
      // How long after its nominal moment the first message of this batch went out.
      const lag = performance.now() - (started + (start * 1000) / rate);
      if (lag > producerLagMaxMs) producerLagMaxMs = lag;
      peer
        .schedule(batchOf(base + start, count, dueOf))
        .then(
          () => (acked += count),
          (err) => failures.push(String(err?.message ?? err)),
        )
        .finally(() => (outstanding -= count));
    }
    await sleep(PRODUCER_TICK_MS);
  }
  const produceMs = performance.now() - started;
  while (outstanding > 0) await sleep(PRODUCER_TICK_MS);
  const drainUntil = lastDue + drainMs;
  let reported = performance.now();
  while (tally.delivered < acked && peer.now() < drainUntil) {
    await sleep(10);
    if (performance.now() - reported > 5000) {
      reported = performance.now();
      progress(`${rate}/s: delivered ${tally.delivered.toLocaleString('en-US')}/${acked}`);
    }
  }
  const cpu = process.cpuUsage(cpuBefore);
  const serverAfter = serverCpu();
  const wallMs = performance.now() - started;
  const stats = await peer.stats();
  const delivered = tally.delivered;
  const lateness = tally.lateness.summary();
  const processCpuSeconds = (cpu.user + cpu.system) / 1e6;
  const serverCpuSeconds =
    serverBefore === null || serverAfter === null ? null : serverAfter - serverBefore;
  // From the first due time to the last delivery, plus the one interval that the last message
  // owns: exactly the step's length when every message is on time.
  const deliveringMs = tally.lastDelivery - firstDue + 1000 / rate;
  const deliveredPerSecond = delivered === 0 ? 0 : (delivered * 1000) / deliveringMs;
  const reasons = [];
  if (lateness.p99Ms !== null && lateness.p99Ms > boundMs) {
    reasons.push(`p99 ${lateness.p99Ms} ms > ${boundMs} ms`);
  }
  if (delivered < total) {
    reasons.push(`${total - delivered} not delivered ${drainMs} ms after the last due time`);
  }
  if (deliveredPerSecond < KEEP_UP * rate) {
    reasons.push(`deliveries kept ${Math.round((deliveredPerSecond / rate) * 100)} % of the rate`);
  }
  if (failures.length > 0) reasons.push(`${failures.length} schedule batches failed`);
  const perMessage = (cpuSeconds) =>
    cpuSeconds === null || delivered === 0 ? null : round((cpuSeconds * 1e6) / delivered, 2);
  const ofOneCore = (cpuSeconds) =>
    cpuSeconds === null ? null : round((cpuSeconds * 1000 * 100) / wallMs, 1);
  // Embedded, this process is the server: it holds the queue.
  const serverSide = serverCpuSeconds ?? processCpuSeconds;
  return {
    rate,
    seconds,
    scheduled: acked,
    scheduledPerSecond: Math.round((acked * 1000) / produceMs),
    producerLagMaxMs: round(producerLagMaxMs, 1),
    scheduleFailures: failures.length,
    ...(failures.length > 0 ? { firstFailure: failures[0] } : {}),
    delivered,
    notDelivered: total - delivered,
    duplicates: tally.duplicates,
    deliveredPerSecond: Math.round(deliveredPerSecond),
    lateness,
    ...(stats.fireLatenessMs === undefined ? {} : { fireLatenessMs: stats.fireLatenessMs }),
    cpu: {
      processSeconds: round(processCpuSeconds, 3),
      serverSeconds: serverCpuSeconds === null ? null : round(serverCpuSeconds, 2),
      processUsPerMessage: perMessage(processCpuSeconds),
      serverUsPerMessage: perMessage(serverCpuSeconds),
      totalUsPerMessage: perMessage(processCpuSeconds + (serverCpuSeconds ?? 0)),
      messagesPerServerCpuSecond: serverSide > 0 ? Math.round(delivered / serverSide) : null,
      processPercentOfCore: ofOneCore(processCpuSeconds),
      serverPercentOfCore: ofOneCore(serverCpuSeconds),
    },
    wallMs: Math.round(wallMs),
    loadAverage: [round(loadBefore, 2), round(loadavg()[0], 2)],
    held: reasons.length === 0,
    reasons,
  };
}

function round(value, digits) {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}

function describeStep(step) {
  const { lateness, cpu } = step;
  const server = cpu.serverUsPerMessage === null ? '' : ` + ${cpu.serverUsPerMessage} µs server`;
  return (
    `${step.rate.toLocaleString('en-US')}/s: delivered ${step.deliveredPerSecond.toLocaleString('en-US')}/s, ` +
    `lateness p50 ${lateness.p50Ms} / p99 ${lateness.p99Ms} / max ${lateness.maxMs} ms, ` +
    `${cpu.processUsPerMessage} µs CPU a message${server}: ` +
    (step.held ? 'held' : `broke (${step.reasons.join('; ')})`)
  );
}
