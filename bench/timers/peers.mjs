/**
 * The peers: every timer the workloads measure, each behind the same small adapter so that one
 * workload loop drives them all. Each cell of the benchmark runs one peer in its own process,
 * so every call site in a workload loop sees a single adapter and stays monomorphic.
 *
 * An adapter is made by `create({ onExpire })` and has:
 *
 *   schedule(delay, i)        a timer with a shared no-op callback; returns its handle
 *   cancel(handle)
 *   refresh(handle, delay, i) re-arms a pending timer with its own delay (`delay`, for peers
 *                             without a refresh of their own); returns the handle, maybe new
 *   scheduleData(delay, i)    a timer that calls onExpire(i); closure-style APIs get one closure
 *                             per timer, made once and reused, as application code would
 *   rearm(i, delay, handle)   called from onExpire(i): timer i again, `delay` from now
 *   close()
 *
 * `handles` says how a workload stores handles: 'number' in a Float64Array, 'object' in an
 * array. `short` names the peer in table headers. The JVM peer (Netty) is not here: it runs in
 * bench/jvm/NettyBench.java.
 */

import { HashedWheelTimer, SystemTimer, TimerTask, TimerWheel } from 'tickwheel';
import { TimerWheel as NpmTimerWheel } from 'timer-wheel';
import { HeapTimer } from './heap-timer.mjs';

/* global setInterval, clearInterval */

const noop = () => {};

/** Lazily made closures `() => onExpire(i)`, one per timer index, reused when it re-arms. */
function closures(onExpire) {
  const made = [];
  return (i) => made[i] ?? (made[i] = () => onExpire(i));
}

class NoopTask extends TimerTask {
  run() {}
}

class DataTask extends TimerTask {
  constructor(delay, index, onExpire) {
    super(delay);
    this.index = index;
    this.onExpire = onExpire;
  }

  run() {
    this.onExpire(this.index);
  }
}

/** tickwheel's closure API as a peer, on a TimerWheel made with `options`. */
function closurePeer({ id, short, label, describe, options }) {
  return {
    id,
    short,
    label,
    family: 'tickwheel',
    handles: 'number',
    describe,
    create({ onExpire }) {
      const wheel = new TimerWheel(options);
      const callbackOf = closures(onExpire);
      return {
        schedule: (delay) => wheel.setTimeout(noop, delay),
        cancel: (handle) => wheel.clearTimeout(handle),
        refresh(handle) {
          wheel.refresh(handle);
          return handle;
        },
        scheduleData: (delay, i) => wheel.setTimeout(callbackOf(i), delay),
        rearm: (i, delay) => wheel.setTimeout(callbackOf(i), delay),
        close: () => wheel.close(),
      };
    },
  };
}

export const PEERS = [
  {
    id: 'node',
    short: 'node',
    label: 'Node setTimeout',
    family: 'peer',
    handles: 'object',
    describe:
      "Node's own setTimeout/clearTimeout; refresh() where a workload re-arms (churn, steady state).",
    create({ onExpire }) {
      const callbackOf = closures(onExpire);
      /** The delay each timer was made with: refresh() can only re-arm with that one. */
      const armed = [];
      return {
        schedule: (delay) => setTimeout(noop, delay),
        cancel: (timeout) => clearTimeout(timeout),
        refresh: (timeout) => timeout.refresh(),
        scheduleData(delay, i) {
          armed[i] = delay;
          return setTimeout(callbackOf(i), delay);
        },
        rearm(i, delay, timeout) {
          if (armed[i] === delay) return timeout.refresh();
          armed[i] = delay;
          return setTimeout(callbackOf(i), delay);
        },
        close() {},
      };
    },
  },
  {
    id: 'heap',
    short: 'heap',
    label: 'binary heap (heap-js)',
    family: 'peer',
    handles: 'object',
    describe:
      'Scheme 3 / JDK DelayQueue: a heap-js binary heap ordered by deadline, one native timer ' +
      'armed for the top, lazy cancellation with asyncio-style rebuilds.',
    create({ onExpire }) {
      const timer = new HeapTimer({ onExpire });
      return {
        schedule: (delay, i) => timer.schedule(delay, i),
        cancel: (entry) => timer.cancel(entry),
        refresh: (entry) => timer.refresh(entry),
        scheduleData: (delay, i) => timer.schedule(delay, i),
        rearm: (i, delay) => timer.schedule(delay, i),
        close: () => timer.close(),
      };
    },
  },
  {
    id: 'timer-wheel',
    short: 'tw-npm',
    label: 'timer-wheel (npm)',
    family: 'peer',
    handles: 'object',
    describe:
      "The npm package timer-wheel (Caffeine/Transitory's hierarchical wheel; 1,024 ms first " +
      'level), advanced by a 1 ms setInterval while timers must fire. No refresh: remove + schedule.',
    create({ onExpire }) {
      const wheel = new NpmTimerWheel();
      let poller;
      const startPolling = () => {
        poller ??= setInterval(() => {
          const expired = wheel.advance();
          for (let k = 0; k < expired.length; k++) onExpire(expired[k]);
        }, 1);
      };
      return {
        schedule: (delay, i) => wheel.schedule(i, delay),
        cancel: (handle) => handle.remove(),
        refresh(handle, delay, i) {
          handle.remove();
          return wheel.schedule(i, delay);
        },
        scheduleData(delay, i) {
          startPolling();
          return wheel.schedule(i, delay);
        },
        rearm: (i, delay) => wheel.schedule(i, delay),
        close() {
          if (poller !== undefined) clearInterval(poller);
        },
      };
    },
  },
  closurePeer({
    id: 'tickwheel-closure',
    short: 'closure',
    label: 'TimerWheel.setTimeout',
    describe: "tickwheel's TimerWheel, closure API: setTimeout(fn, ms), clearTimeout, refresh.",
    options: {},
  }),
  closurePeer({
    id: 'tickwheel-node-order',
    short: 'nodeOrder',
    label: 'TimerWheel.setTimeout, nodeOrder',
    describe:
      "tickwheel's closure API with nodeOrder: true (nextTick and microtasks run between callbacks, as in Node).",
    options: { nodeOrder: true },
  }),
  {
    id: 'tickwheel-lean',
    short: 'lean',
    label: 'TimerWheel.schedule',
    family: 'tickwheel',
    handles: 'number',
    describe: "tickwheel's TimerWheel, lean path: schedule(ms, data) with one onExpire(data).",
    create({ onExpire }) {
      const wheel = new TimerWheel({ onExpire });
      return {
        schedule: (delay, i) => wheel.schedule(delay, i),
        cancel: (handle) => wheel.clearTimeout(handle),
        refresh(handle) {
          wheel.refresh(handle);
          return handle;
        },
        scheduleData: (delay, i) => wheel.schedule(delay, i),
        rearm: (i, delay) => wheel.schedule(delay, i),
        close: () => wheel.close(),
      };
    },
  },
  {
    id: 'tickwheel-hashed',
    short: 'hashed',
    label: 'HashedWheelTimer',
    family: 'tickwheel',
    handles: 'object',
    describe:
      "tickwheel's Netty face, Netty's defaults (100 ms ticks, 512 slots): newTimeout, " +
      'Timeout.cancel; no refresh: cancel + newTimeout.',
    create({ onExpire }) {
      const timer = new HashedWheelTimer();
      const taskOf = closures(onExpire);
      return {
        schedule: (delay) => timer.newTimeout(noop, delay),
        cancel: (timeout) => timeout.cancel(),
        refresh(timeout, delay) {
          timeout.cancel();
          return timer.newTimeout(timeout.task, delay);
        },
        scheduleData: (delay, i) => timer.newTimeout(taskOf(i), delay),
        rearm: (i, delay) => timer.newTimeout(taskOf(i), delay),
        close: () => timer.stop(),
      };
    },
  },
  {
    id: 'tickwheel-kafka',
    short: 'kafka',
    label: 'SystemTimer',
    family: 'tickwheel',
    handles: 'object',
    describe:
      "tickwheel's Kafka face (1 ms ticks, 20 slots a level): a TimerTask object per timer, " +
      'add(task), task.cancel(); add() of a pending task re-arms it.',
    create({ onExpire }) {
      const timer = new SystemTimer();
      return {
        schedule(delay) {
          const task = new NoopTask(delay);
          timer.add(task);
          return task;
        },
        cancel: (task) => task.cancel(),
        refresh(task) {
          timer.add(task);
          return task;
        },
        scheduleData(delay, i) {
          const task = new DataTask(delay, i, onExpire);
          timer.add(task);
          return task;
        },
        rearm(i, delay, task) {
          // A TimerTask's delay is fixed when it is made: a new delay takes a new task.
          const next = task.delayMs === delay ? task : new DataTask(delay, i, onExpire);
          timer.add(next);
          return next;
        },
        close: () => timer.shutdown(),
      };
    },
  },
];

/** The JVM peer's descriptor; bench/timers/jvm.mjs runs it. */
export const JVM_PEER = {
  id: 'netty',
  short: 'netty',
  label: 'Netty (JVM)',
  family: 'jvm',
  handles: 'object',
  describe:
    "Netty's io.netty.util.HashedWheelTimer (Debian's libnetty-java) on the JVM, defaults " +
    '(100 ms ticks, 512 slots), driven by bench/jvm/NettyBench.java; calling-thread time.',
};

export const ALL_PEERS = [PEERS[0], PEERS[1], PEERS[2], JVM_PEER, ...PEERS.slice(3)];

export function peerById(id) {
  return ALL_PEERS.find((peer) => peer.id === id);
}
