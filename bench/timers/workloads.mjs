/**
 * What each workload is and which numbers it reports. The measuring itself is in cell.mjs
 * (JavaScript peers) and bench/jvm/NettyBench.java (Netty); this module is only the catalogue
 * the runner, the report and the charts share.
 *
 * Every metric is "lower is better", so one ratio rule fits all: ratio(a, b) = value(b) /
 * value(a), how many times cheaper peer a is than peer b.
 */

export const WORKLOADS = [
  {
    id: 'schedule-cancel-random',
    title: 'schedule then cancel, random delays',
    describe:
      'Schedule N timers with random whole-millisecond delays from 1 s to 10 min, then cancel ' +
      'them all; median of the measured rounds (warm), and the first round alone (cold: a ' +
      'fresh timer in a fresh process, arrays growing as they fill).',
    metrics: [
      { id: 'random.schedule', label: 'schedule, random delays', unit: 'ns/op', key: 'scheduleNs' },
      { id: 'random.cancel', label: 'cancel, random delays', unit: 'ns/op', key: 'cancelNs' },
      {
        id: 'random.total',
        label: 'schedule + cancel, random delays',
        unit: 'ns/op',
        key: 'scheduleCancelNs',
      },
      {
        id: 'random.scheduleCold',
        label: 'schedule, random delays, cold (first N of a fresh timer and process)',
        unit: 'ns/op',
        key: 'scheduleColdNs',
      },
      {
        id: 'random.cancelCold',
        label: 'cancel, random delays, cold',
        unit: 'ns/op',
        key: 'cancelColdNs',
      },
    ],
  },
  {
    id: 'schedule-cancel-fixed',
    title: 'schedule then cancel, one fixed delay',
    describe: 'The same with every timer at one fixed delay (default 30 s).',
    metrics: [
      { id: 'fixed.schedule', label: 'schedule, fixed delay', unit: 'ns/op', key: 'scheduleNs' },
      { id: 'fixed.cancel', label: 'cancel, fixed delay', unit: 'ns/op', key: 'cancelNs' },
      {
        id: 'fixed.total',
        label: 'schedule + cancel, fixed delay',
        unit: 'ns/op',
        key: 'scheduleCancelNs',
      },
    ],
  },
  {
    id: 'churn',
    title: 'churn at N pending',
    describe:
      'N timers pending (random delays); each operation picks one at random and either ' +
      're-arms it with its own delay (refresh) or cancels it and schedules a replacement, half ' +
      'and half, so N stay pending.',
    metrics: [{ id: 'churn.op', label: 'churn operation', unit: 'ns/op', key: 'opNs' }],
  },
  {
    id: 'expiry-storm',
    title: 'expiry storm',
    describe:
      'N timers due within the same second on the real clock, scheduled beforehand, after a ' +
      "warm-up storm of N/10. One pass records every timer's lateness; a second pass holds the " +
      'event loop (the worker thread for Netty) until every timer is due, then times the drain ' +
      'from release to the last callback.',
    metrics: [
      {
        id: 'storm.drain',
        label: 'expiry storm, drain time per expiration',
        unit: 'ns/op',
        key: 'drain.nsPerExpiration',
        // A drain whose timers were still being scheduled when it began measures that instead.
        validIf: 'drain.valid',
      },
    ],
  },
  {
    id: 'memory',
    title: 'memory at N pending',
    describe:
      'Bytes per pending timer with N pending (random delays): heapUsed + arrayBuffers after ' +
      'gc(), before and after scheduling, in a fresh process.',
    metrics: [
      { id: 'memory.bytes', label: 'bytes per pending timer', unit: 'B', key: 'bytesPerTimer' },
    ],
  },
  {
    id: 'steady-state',
    title: 'steady state on the real clock',
    describe:
      'Timers re-arming themselves on their own period (500 to 1500 ms) so that about 100,000 ' +
      'fire per second, measured for 10 s after a 2 s warm-up: lateness percentiles and the ' +
      "process's CPU time.",
    metrics: [
      {
        id: 'steady.cpu',
        label: 'steady state, CPU time per expiration',
        unit: 'ns/op',
        key: 'cpuNsPerExpiration',
      },
    ],
  },
];

export function workloadById(id) {
  return WORKLOADS.find((workload) => workload.id === id);
}

function valueAt(result, path) {
  let value = result;
  for (const part of path.split('.')) value = value?.[part];
  return value;
}

/** A metric's value in a cell's result (`key` may be a dotted path), if it is a valid one. */
export function metricValue(result, metric) {
  if (metric.validIf !== undefined && valueAt(result, metric.validIf) !== true) return undefined;
  const value = valueAt(result, metric.key);
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}
