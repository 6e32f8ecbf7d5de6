/**
 * One cell of the benchmark: one workload on one JavaScript peer, in a process of its own
 * (forked by bench/timers.mjs with --expose-gc). A fresh process per cell keeps peers from
 * sharing a heap, garbage or JIT feedback: every workload loop below sees a single adapter.
 *
 * Protocol: the parent sends { workload, peer, options }; the cell answers with any number of
 * { type: 'progress', step, of, ms } and then one { type: 'result', result } or
 * { type: 'error', message }, and exits.
 */

import { latenessSummary, median } from './stats.mjs';
import { peerById } from './peers.mjs';
import { churnOps, fixedDelays, randomDelays, steadyTimers, stormOffsets } from './sequences.mjs';

const noop = () => {};
/** Timers scheduled between two turns of the event loop when timing matters (storm, steady). */
const CHUNK = 1_000;

const turn = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

function collect() {
  const gc = globalThis.gc;
  if (gc === undefined) return false;
  gc();
  gc();
  return true;
}

function makeHandles(kind, n) {
  if (kind === 'number') return new Float64Array(n);
  const handles = [];
  for (let i = 0; i < n; i++) handles.push(null);
  return handles;
}

function clearHandles(handles) {
  if (!(handles instanceof Float64Array)) handles.fill(null);
}

// --- The timed loops: plain functions, so each is optimized on its own. ---------------------

function scheduleAll(peer, delays, handles, n) {
  for (let i = 0; i < n; i++) handles[i] = peer.schedule(delays[i], i);
}

function cancelAll(peer, handles, n) {
  for (let i = 0; i < n; i++) peer.cancel(handles[i]);
}

function churnOnce(peer, ops, m, handles, slotDelay) {
  const { slot, refresh, delay } = ops;
  for (let k = 0; k < m; k++) {
    const j = slot[k];
    if (refresh[k] === 1) {
      handles[j] = peer.refresh(handles[j], slotDelay[j], j);
    } else {
      peer.cancel(handles[j]);
      const d = delay[k];
      slotDelay[j] = d;
      handles[j] = peer.schedule(d, j);
    }
  }
}

// --- Workloads --------------------------------------------------------------------------------

async function scheduleCancel(peerDef, options, delays, progress) {
  const n = delays.length;
  const peer = peerDef.create({ onExpire: noop });
  const handles = makeHandles(peerDef.handles, n);
  const schedule = [];
  const cancel = [];
  const total = options.warmup + options.rounds;
  let cold = { schedule: undefined, cancel: undefined };
  for (let round = 0; round < total; round++) {
    collect();
    await turn();
    const t0 = performance.now();
    scheduleAll(peer, delays, handles, n);
    const t1 = performance.now();
    cancelAll(peer, handles, n);
    const t2 = performance.now();
    clearHandles(handles);
    if (round === 0) cold = { schedule: ((t1 - t0) * 1e6) / n, cancel: ((t2 - t1) * 1e6) / n };
    if (round >= options.warmup) {
      schedule.push(((t1 - t0) * 1e6) / n);
      cancel.push(((t2 - t1) * 1e6) / n);
    }
    progress(round + 1, total, t2 - t0);
  }
  peer.close();
  const scheduleNs = median(schedule);
  const cancelNs = median(cancel);
  return {
    n,
    scheduleNs,
    cancelNs,
    scheduleCancelNs: scheduleNs + cancelNs,
    // Round 0: the first fill of a fresh timer in a fresh process, as a user's first N.
    scheduleColdNs: cold.schedule,
    cancelColdNs: cold.cancel,
    scheduleSamples: schedule,
    cancelSamples: cancel,
  };
}

async function churn(peerDef, options, progress) {
  const n = options.n;
  const m = options.ops;
  const delays = randomDelays(options.seed, n);
  const ops = churnOps(options.seed, m, n);
  const slotDelay = delays.slice();
  const peer = peerDef.create({ onExpire: noop });
  const handles = makeHandles(peerDef.handles, n);
  scheduleAll(peer, delays, handles, n);
  const samples = [];
  const total = options.warmup + options.rounds;
  for (let round = 0; round < total; round++) {
    collect();
    await turn();
    const t0 = performance.now();
    churnOnce(peer, ops, m, handles, slotDelay);
    const t1 = performance.now();
    if (round >= options.warmup) samples.push(((t1 - t0) * 1e6) / m);
    progress(round + 1, total, t1 - t0);
  }
  peer.close();
  return { n, ops: m, opNs: median(samples), opSamples: samples };
}

/**
 * First guess at the lead time of a storm: twice what scheduling it should take, from a probe
 * of 20,000 timers with delays like the storm's, plus time to collect garbage. The storm is
 * then due after every timer has been scheduled, as in a service whose timers were set over
 * the minutes before they fall due; stormPass says when the guess was short, and storm() tries
 * again with more.
 */
async function stormLead(peerDef, offsets) {
  const n = offsets.length;
  const probe = Math.min(n, 20_000);
  const peer = peerDef.create({ onExpire: noop });
  const handles = makeHandles(peerDef.handles, probe);
  let perTimer = 0;
  for (let round = 0; round < 2; round++) {
    const t0 = performance.now();
    for (let i = 0; i < probe; i++) {
      handles[i] = peer.scheduleData(600_000 + Math.ceil(offsets[i]), i);
    }
    perTimer = (performance.now() - t0) / probe;
    cancelAll(peer, handles, probe);
    await turn();
  }
  peer.close();
  return Math.max(500, 2 * perTimer * n + 500);
}

/**
 * What one pass of a storm records. Every pass of a cell goes through one peer and one
 * onExpire, `(i) => run.fire(i)`, so the expiry path is the same warm code in every pass.
 */
class StormRun {
  constructor(n, measureLateness) {
    this.n = n;
    this.fired = 0;
    this.first = 0;
    this.last = 0;
    this.deadlines = new Float64Array(n);
    // The drain pass reads no clock per expiration: it would cost as much as some peers' work.
    this.lateness = measureLateness ? new Float64Array(n).fill(NaN) : null;
  }

  fire(i) {
    const fired = ++this.fired;
    if (this.lateness !== null) {
      const now = performance.now();
      this.lateness[i] = now - this.deadlines[i];
      if (fired === 1) this.first = now;
      if (fired === this.n) this.last = now;
    } else if (fired === 1 || fired === this.n) {
      const now = performance.now();
      if (fired === 1) this.first = now;
      if (fired === this.n) this.last = now;
    }
  }
}

function scheduleStorm(peer, offsets, deadlines, windowStart, from, to) {
  let late = 0;
  for (let i = from; i < to; i++) {
    const now = performance.now();
    let delay = Math.ceil(windowStart + offsets[i] - now);
    if (delay < 0) {
      late++;
      delay = 0;
    }
    deadlines[i] = now + delay;
    peer.scheduleData(delay, i);
  }
  return late;
}

/**
 * Resolves true once `fired()` reaches `n`, or false once it has made no progress for
 * `stallMs` after `notBefore` (a peer that lost timers never gets there).
 */
function completion(n, fired, notBefore, stallMs) {
  return new Promise((resolve) => {
    let seen = -1;
    let since = performance.now();
    const check = () => {
      const count = fired();
      const now = performance.now();
      if (count >= n) return resolve(true);
      if (count !== seen) {
        seen = count;
        since = now;
      } else if (now > notBefore && now - since > stallMs) {
        return resolve(false);
      }
      setTimeout(check, 50);
    };
    check();
  });
}

/**
 * One storm of n timers due at `windowStart + offsets[i]`. The lateness pass lets the event
 * loop run freely and records every timer's lateness. The drain pass holds the event loop
 * busy until every timer is due and then lets go: the time from then to the last callback is
 * what it takes the peer to drain n expirations, with nothing to wait for in between.
 */
async function stormPass(storm, offsets, leadMs, windowMs, measureLateness) {
  const n = offsets.length;
  const run = new StormRun(n, measureLateness);
  storm.run = run;
  const { peer } = storm;
  const windowStart = performance.now() + leadMs;
  const windowEnd = windowStart + windowMs;
  let scheduledLate = 0;
  for (let i = 0; i < n; i += CHUNK) {
    const end = Math.min(n, i + CHUNK);
    scheduledLate += scheduleStorm(peer, offsets, run.deadlines, windowStart, i, end);
    await turn();
  }
  collect();
  const readyMs = performance.now() - (windowStart - leadMs);
  await sleep(windowStart - 20 - performance.now());
  const firedBeforeRelease = run.fired;
  let release = performance.now();
  if (!measureLateness) {
    while (performance.now() <= windowEnd + 1) {
      // Held busy: every timer of the storm falls due meanwhile.
    }
    release = performance.now();
  }
  const eluStart = performance.eventLoopUtilization();
  const cpuStart = process.cpuUsage();
  const complete = await completion(n, () => run.fired, windowEnd, 3_000);
  const elu = performance.eventLoopUtilization(eluStart);
  const cpu = process.cpuUsage(cpuStart);
  const result = {
    fired: run.fired,
    complete,
    leadMs,
    readyMs,
    scheduledLate,
    firedBeforeRelease,
    spanMs: complete ? run.last - run.first : NaN,
  };
  if (measureLateness) {
    // How busy the event loop was while the storm fell due, and the CPU it took.
    return {
      ...result,
      ...latenessSummary(run.lateness),
      loopBusyPercent: 100 * elu.utilization,
      cpuMs: (cpu.user + cpu.system) / 1000,
    };
  }
  if (!complete) return result;
  const drainMs = run.last - release;
  return {
    ...result,
    drainMs,
    nsPerExpiration: (drainMs * 1e6) / n,
    perSecond: n / (drainMs / 1e3),
  };
}

/**
 * The storm on one peer: a small warm-up storm (a tenth of N within a tenth of the window),
 * so that the expiry path is warm as in a service that has been firing timers, then the
 * lateness pass and the drain pass. A pass whose scheduling (with its garbage collection) ran
 * into the window is not a storm of timers set beforehand: it is run again with a longer lead.
 */
async function storm(peerDef, options, progress) {
  const offsets = stormOffsets(options.seed, options.n, options.stormWindow);
  let leadMs = await stormLead(peerDef, offsets);
  const storm = { run: undefined, peer: undefined };
  const onExpire = (i) => storm.run.fire(i);
  storm.peer = peerDef.create({ onExpire });
  // A peer that lost timers of a pass might still fire them in the next: start afresh.
  const afterPass = (result) => {
    if (result.complete) return;
    storm.peer.close();
    storm.peer = peerDef.create({ onExpire });
  };
  const warmN = Math.max(1, Math.ceil(options.n / 10));
  const warmWindow = options.stormWindow / 10;
  const warmOffsets = stormOffsets(options.seed + 100, warmN, warmWindow);
  const warmLead = Math.max(500, (leadMs * warmN) / options.n);
  const t0 = performance.now();
  const warm = await stormPass(storm, warmOffsets, warmLead, warmWindow, true);
  afterPass(warm);
  progress(1, 3, performance.now() - t0);
  const pass = async (measureLateness, step) => {
    for (let attempt = 1; ; attempt++) {
      const t1 = performance.now();
      const result = await stormPass(storm, offsets, leadMs, options.stormWindow, measureLateness);
      afterPass(result);
      progress(step, 3, performance.now() - t1);
      const valid =
        result.scheduledLate === 0 &&
        result.firedBeforeRelease === 0 &&
        result.readyMs < leadMs - 20;
      if (valid || attempt === 3) return { ...result, valid, attempts: attempt };
      leadMs = Math.max(2 * leadMs, 1.5 * result.readyMs + 500);
    }
  };
  const lateness = await pass(true, 2);
  const drain = await pass(false, 3);
  storm.peer.close();
  return {
    n: options.n,
    windowMs: options.stormWindow,
    warmUp: { n: warmN, windowMs: warmWindow, fired: warm.fired, p99Ms: warm.p99Ms },
    drainClock: 'wall time from releasing the held event loop to the last callback',
    lateness,
    drain,
  };
}

// Below this many timers the garbage collector's own noise (tens of KB between two gc() calls)
// swamps the figure: a smoke run with 2,000 timers once read -11 B a timer.
const MEMORY_MIN_N = 100_000;

async function memory(peerDef, options, progress) {
  const n = Math.max(options.n, MEMORY_MIN_N);
  const delays = randomDelays(options.seed, n);
  const handles = makeHandles(peerDef.handles, n);
  if (!collect()) throw new Error('the memory workload needs node --expose-gc');
  const before = retained();
  const peer = peerDef.create({ onExpire: noop });
  scheduleAll(peer, delays, handles, n);
  collect();
  const after = retained();
  // Both stay reachable until after the measurement.
  const alive = handles[n - 1] !== null && peer !== undefined;
  peer.close();
  progress(1, 1, 0);
  return {
    n,
    pending: alive ? n : 0,
    bytesPerTimer: (after - before) / n,
    measure: 'process.memoryUsage(): heapUsed + arrayBuffers after gc()',
  };
}

function retained() {
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

async function steady(peerDef, options, progress) {
  const { periods, phases } = steadyTimers(options.seed, options.steadyRate);
  const k = periods.length;
  const capacity = Math.ceil(options.steadyRate * options.steadySeconds * 1.5) + 1_000;
  const deadlines = new Float64Array(k);
  const lateness = new Float64Array(capacity);
  const handles = makeHandles(peerDef.handles, k);
  let measuring = false;
  let count = 0;
  let overflow = 0;
  let peer;
  const onExpire = (i) => {
    const now = performance.now();
    if (measuring) {
      if (count < capacity) lateness[count++] = now - deadlines[i];
      else overflow++;
    }
    deadlines[i] = now + periods[i];
    handles[i] = peer.rearm(i, periods[i], handles[i]);
  };
  peer = peerDef.create({ onExpire });
  for (let i = 0; i < k; i += CHUNK) {
    const end = Math.min(k, i + CHUNK);
    for (let j = i; j < end; j++) {
      deadlines[j] = performance.now() + phases[j];
      handles[j] = peer.scheduleData(phases[j], j);
    }
    await turn();
  }
  await sleep(options.steadyWarmup * 1000);
  const cpu0 = process.cpuUsage();
  const elu0 = performance.eventLoopUtilization();
  const t0 = performance.now();
  measuring = true;
  await sleep(options.steadySeconds * 1000);
  measuring = false;
  const t1 = performance.now();
  const elu = performance.eventLoopUtilization(elu0);
  const cpu = process.cpuUsage(cpu0);
  peer.close();
  progress(1, 1, t1 - t0);
  const seconds = (t1 - t0) / 1000;
  const fired = count + overflow;
  const cpuMs = (cpu.user + cpu.system) / 1000;
  return {
    timers: k,
    targetRate: options.steadyRate,
    seconds,
    fired,
    rate: fired / seconds,
    ...latenessSummary(lateness.subarray(0, count)),
    cpuPercent: (100 * cpuMs) / (t1 - t0),
    eventLoopPercent: 100 * elu.utilization,
    cpuNsPerExpiration: fired > 0 ? (cpuMs * 1e6) / fired : NaN,
    cpuClock: 'process.cpuUsage(), all threads',
  };
}

async function run({ workload, peer: peerId, options }) {
  const peerDef = peerById(peerId);
  if (peerDef === undefined || peerDef.create === undefined) {
    throw new Error(`no JavaScript peer named ${peerId}`);
  }
  const progress = (step, of, ms) => process.send({ type: 'progress', step, of, ms });
  switch (workload) {
    case 'schedule-cancel-random':
      return scheduleCancel(peerDef, options, randomDelays(options.seed, options.n), progress);
    case 'schedule-cancel-fixed':
      return scheduleCancel(peerDef, options, fixedDelays(options.n, options.fixedDelay), progress);
    case 'churn':
      return churn(peerDef, options, progress);
    case 'expiry-storm':
      return storm(peerDef, options, progress);
    case 'memory':
      return memory(peerDef, options, progress);
    case 'steady-state':
      return steady(peerDef, options, progress);
    default:
      throw new Error(`unknown workload ${workload}`);
  }
}

process.once('message', (message) => {
  run(message).then(
    (result) => process.send({ type: 'result', result }, () => process.exit(0)),
    (err) =>
      process.send({ type: 'error', message: err?.stack ?? String(err) }, () => process.exit(1)),
  );
});
