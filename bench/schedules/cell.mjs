/**
 * One cell of the schedules benchmark: one phase on one peer, in a process of its own (forked by
 * run.mjs with --expose-gc), so that its memory and CPU belong to that phase alone.
 *
 *   armed   opens an empty queue with a consumer: memory, then idle CPU; creates n schedules of
 *           the mix (specs.mjs), none due while the cell runs: creation time and CPU, memory,
 *           idle CPU again. The same process before and after.
 *   reopen  a fresh process opens what `armed` left (cold open), with a consumer: time, CPU,
 *           memory.
 *   firing  n schedules that all fire every period (every minute: n occurrences a minute),
 *           consumed and acked; after one period of warm-up, CPU over whole periods, deliveries
 *           and their lateness (delivery minus occurrence time).
 *
 * Protocol: the runner sends { peer, phase, options }; the cell answers with any number of
 * { type: 'progress', text }, then one { type: 'result', result } or { type: 'error', message }.
 */

import { send, serveCell } from '../cell-process.mjs';
import { LatenessRecorder, memorySnapshot } from '../queue/stats.mjs';
import { firingSpec, mixedSpec, scheduleName } from './specs.mjs';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

function peerModule(peer) {
  if (peer === 'tickwheel') return import('./tickwheel-peer.mjs');
  if (peer === 'bullmq') return import('./bullmq-peer.mjs');
  throw new Error(`unknown peer ${peer}`);
}

function cpuMsSince(before) {
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000;
}

const round = (value, digits = 1) =>
  value === null || value === undefined ? null : Number(value.toFixed(digits));

/** The process's memory after a full GC, and the server's (BullMQ: redis-server), if any. */
async function state(peer) {
  const memory = await peer.memory();
  const server = await peer.server();
  return {
    memory,
    server: server === null ? null : { usedMemory: server.usedMemory, rss: server.usedMemoryRss },
  };
}

/**
 * CPU of this process and of the server over `seconds` of doing nothing but holding what is
 * there; `delivered()` counts deliveries, which should not move.
 */
async function idle(peer, seconds, delivered) {
  const serverBefore = await peer.server();
  const deliveredBefore = delivered();
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  await sleep(seconds * 1000);
  const processCpuMs = cpuMsSince(cpuBefore);
  const wallSeconds = (performance.now() - started) / 1000;
  const serverAfter = await peer.server();
  const serverCpuMs = serverBefore === null ? 0 : serverAfter.cpuMs - serverBefore.cpuMs;
  const perMinute = (ms) => round((ms / wallSeconds) * 60, 2);
  return {
    seconds: round(wallSeconds, 2),
    processCpuMs: round(processCpuMs, 2),
    serverCpuMs: round(serverCpuMs, 2),
    cpuMsPerMinute: {
      process: perMinute(processCpuMs),
      server: perMinute(serverCpuMs),
      total: perMinute(processCpuMs + serverCpuMs),
    },
    delivered: delivered() - deliveredBefore,
  };
}

/** Creates schedules 0..n-1 (specOf(i)), `inFlight` at a time; wall time and CPU. */
async function createAll(peer, n, specOf, inFlight, progress) {
  const serverBefore = await peer.server();
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  let next = 0;
  let lastReport = started;
  const lane = async () => {
    while (next < n) {
      const i = next++;
      await peer.put(scheduleName(i), specOf(i));
      if (performance.now() - lastReport > 2000) {
        lastReport = performance.now();
        progress(`created ${next.toLocaleString('en-US')}/${n.toLocaleString('en-US')}`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, n) }, lane));
  const ms = performance.now() - started;
  const processCpuMs = cpuMsSince(cpuBefore);
  const serverAfter = await peer.server();
  const serverCpuMs = serverBefore === null ? 0 : serverAfter.cpuMs - serverBefore.cpuMs;
  const count = await peer.scheduleCount();
  if (count !== n) throw new Error(`created ${n} schedules, the queue holds ${count}`);
  return {
    n,
    inFlight,
    ms: round(ms),
    perSecond: Math.round((n / ms) * 1000),
    processCpuMs: round(processCpuMs),
    serverCpuMs: round(serverCpuMs),
    cpuUsPerSchedule: round(((processCpuMs + serverCpuMs) / n) * 1000),
  };
}

async function armed(module, options, progress) {
  const { n, idleSeconds, settleMs, startDelayMs, inFlight, concurrency } = options;
  await module.prepare();
  const beforeOpen = await memorySnapshot();
  const peer = await module.openPeer(options);
  try {
    let delivered = 0;
    await peer.consume(() => void delivered++, concurrency);
    await sleep(settleMs);
    const none = await state(peer);
    progress(`empty queue open; idle for ${idleSeconds} s`);
    const idleNone = await idle(peer, idleSeconds, () => delivered);
    // On a whole minute, far enough ahead that nothing comes due in this cell or the reopen.
    const startAt = Math.ceil((peer.now() + startDelayMs) / 60_000) * 60_000;
    progress(`creating ${n.toLocaleString('en-US')} schedules, ${inFlight} at a time`);
    const created = await createAll(peer, n, (i) => mixedSpec(i, startAt), inFlight, progress);
    progress(`created in ${(created.ms / 1000).toFixed(1)} s; idle with them for ${idleSeconds} s`);
    await sleep(settleMs);
    const withSchedules = await state(peer);
    const idleArmed = await idle(peer, idleSeconds, () => delivered);
    return {
      open: peer.open,
      startAt,
      memory: { beforeOpen, none: none.memory, armed: withSchedules.memory },
      server: { none: none.server, armed: withSchedules.server },
      idle: { none: idleNone, armed: idleArmed },
      created,
      disk: await peer.disk(),
      delivered,
    };
  } finally {
    await peer.close();
  }
}

async function reopen(module, options, progress) {
  const { n, settleMs, concurrency } = options;
  await module.prepare();
  const beforeOpen = await memorySnapshot();
  const peer = await module.openPeer(options);
  try {
    progress(`opened in ${peer.open.ms.toFixed(1)} ms`);
    let delivered = 0;
    await peer.consume(() => void delivered++, concurrency);
    await sleep(settleMs);
    const after = await state(peer);
    const count = await peer.scheduleCount();
    if (count !== n) throw new Error(`reopened ${count} schedules, expected ${n}`);
    return {
      open: peer.open,
      count,
      memory: { beforeOpen, open: after.memory },
      server: after.server,
      delivered,
    };
  } finally {
    await peer.close();
  }
}

async function firing(module, options, progress) {
  const { n, fireCron, periodMs, periods, inFlight, concurrency } = options;
  const peer = await module.openPeer(options);
  try {
    const lateness = new LatenessRecorder(n * periods + 1024);
    let delivered = 0;
    let measuring = false;
    let measured = 0;
    await peer.consume((at) => {
      delivered++;
      if (measuring) {
        measured++;
        lateness.add(peer.now() - at);
      }
    }, concurrency);
    progress(`creating ${n.toLocaleString('en-US')} schedules (${fireCron})`);
    const created = await createAll(peer, n, (i) => firingSpec(i, fireCron), inFlight, progress);
    // Warm-up: the first occurrence of every schedule goes through, then the window starts half
    // a period after it, so it holds whole periods, each with one occurrence of every schedule.
    const first = Math.ceil(peer.now() / periodMs) * periodMs;
    const from = first + periodMs / 2;
    progress(`warm-up until ${new Date(from).toISOString().slice(11, 19)} UTC`);
    await sleep(from - peer.now());
    const serverBefore = await peer.server();
    const rssBefore = process.memoryUsage().rss;
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    measuring = true;
    progress(`measuring ${periods} x ${periodMs / 1000} s`);
    await sleep(periods * periodMs);
    measuring = false;
    const processCpuMs = cpuMsSince(cpuBefore);
    const seconds = (performance.now() - started) / 1000;
    const serverAfter = await peer.server();
    const serverCpuMs = serverBefore === null ? 0 : serverAfter.cpuMs - serverBefore.cpuMs;
    const perMinute = (ms) => round((ms / seconds) * 60, 1);
    const perOccurrence = (ms) => (measured === 0 ? null : round((ms / measured) * 1000, 2));
    return {
      created,
      window: {
        seconds: round(seconds, 2),
        periods,
        expected: n * periods,
        delivered: measured,
        processCpuMs: round(processCpuMs),
        serverCpuMs: round(serverCpuMs),
        cpuMsPerMinute: {
          process: perMinute(processCpuMs),
          server: perMinute(serverCpuMs),
          total: perMinute(processCpuMs + serverCpuMs),
        },
        cpuUsPerOccurrence: {
          process: perOccurrence(processCpuMs),
          server: perOccurrence(serverCpuMs),
          total: perOccurrence(processCpuMs + serverCpuMs),
        },
        rssGrowthBytes: process.memoryUsage().rss - rssBefore,
      },
      lateness: lateness.summary(),
      deliveredTotal: delivered,
      disk: await peer.disk(),
    };
  } finally {
    await peer.close();
  }
}

const PHASES = { armed, reopen, firing };

serveCell(async ({ peer, phase, options }) => {
  const run = PHASES[phase];
  if (run === undefined) throw new Error(`unknown phase ${phase}`);
  const progress = (text) => void send({ type: 'progress', text });
  return run(await peerModule(peer), options, progress);
});
