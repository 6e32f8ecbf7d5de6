// One million live items for two of the patterns, against the same thing done with Node's own
// timers, on the real clock:
//
//   idle:      1M connections, each with a 30 s idle timeout re-armed on activity.
//              tickwheel: IdleTracker({ allIdleMs }) with track / read / untrack.
//              Node:      setTimeout(onIdle, ms, conn) per connection, timeout.refresh() on
//                         activity, clearTimeout to stop.
//   deadlines: 1M requests in flight, each with a 30 s deadline, then all answered.
//              tickwheel: DeadlineRegistry register / resolve.
//              Node:      the usual Map of { resolve, reject, timer } with setTimeout per request.
//
// Each (case, implementation) runs in a fresh process with --expose-gc; memory is what the
// heap and array buffers grow by, measured after full GCs, per item, with the million live.
// Each process fills, uses and empties the million ROUNDS times; an operation's ops/s is the
// median over its rounds (the first includes warm-up), and the report shows the median of RUNS
// processes, with tickwheel's ratio.
//
// Run: npm run build && node bench/patterns-1m.mjs   (RUNS=5 node bench/patterns-1m.mjs)

import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';

const N = 1_000_000;
const IDLE_MS = 30_000;
/** Rounds of fill / use / empty per process; each measure is the median over them. */
const ROUNDS = 3;

function report() {
  const runs = Number(process.env.RUNS ?? 3);
  const self = fileURLToPath(import.meta.url);
  const results = {};
  for (const caseName of ['idle', 'deadlines']) {
    for (const impl of ['node', 'tickwheel']) {
      const samples = [];
      for (let run = 0; run < runs; run++) {
        const out = execFileSync(
          process.execPath,
          ['--expose-gc', self, '--child', caseName, impl],
          { encoding: 'utf8', maxBuffer: 1 << 20 },
        );
        samples.push(JSON.parse(out));
      }
      const keys = Object.keys(samples[0]);
      results[`${caseName}/${impl}`] = Object.fromEntries(
        keys.map((key) => [key, median(samples.map((sample) => sample[key]))]),
      );
    }
  }
  console.log(
    `1M live items, Node ${process.version}, ${cpus().length} × ${cpus()[0].model.trim()}, ` +
      `median of ${runs} runs\n`,
  );
  table('Idle detection: 1M connections, 30 s idle timeout', 'idle', [
    ['memory, bytes per connection', 'bytesPerItem', 'lower'],
    ['track, ops/s', 'trackOps', 'higher'],
    ['activity (read / refresh), ops/s', 'activityOps', 'higher'],
    ['untrack (clearTimeout), ops/s', 'untrackOps', 'higher'],
  ]);
  table('Request deadlines: 1M requests in flight, 30 s deadline', 'deadlines', [
    ['memory, bytes per request', 'bytesPerItem', 'lower'],
    ['register, ops/s', 'registerOps', 'higher'],
    ['resolve, ops/s', 'resolveOps', 'higher'],
  ]);

  function table(title, caseName, rows) {
    const node = results[`${caseName}/node`];
    const wheel = results[`${caseName}/tickwheel`];
    console.log(`${title}\n`);
    console.log('| measure | Node setTimeout | tickwheel | tickwheel vs Node |');
    console.log('| --- | ---: | ---: | ---: |');
    for (const [label, key, better] of rows) {
      const ratio = better === 'lower' ? node[key] / wheel[key] : wheel[key] / node[key];
      const words = better === 'lower' ? ['smaller', 'larger'] : ['faster', 'slower'];
      const verdict =
        ratio >= 1 ? `${ratio.toFixed(1)}× ${words[0]}` : `${(1 / ratio).toFixed(1)}× ${words[1]}`;
      console.log(`| ${label} | ${format(node[key])} | ${format(wheel[key])} | ${verdict} |`);
    }
    console.log('');
  }
}

function format(value) {
  if (value >= 1e6) return `${(value / 1e6).toFixed(1)} M`;
  if (value >= 1e4) return `${(value / 1e3).toFixed(0)} k`;
  return value.toFixed(0);
}

function retained() {
  globalThis.gc();
  globalThis.gc();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

/** Ops/s of `loop` over the million. */
function timed(loop) {
  const start = performance.now();
  loop();
  return N / ((performance.now() - start) / 1000);
}

/**
 * Runs `round` ROUNDS times and returns, per measure, the median over the rounds. Each round
 * fills the million and empties it again; memory is measured in the first, from `before`.
 */
function rounds(round) {
  const samples = [];
  for (let i = 0; i < ROUNDS; i++) samples.push(round(i === 0));
  return Object.fromEntries(
    Object.keys(samples[0]).map((key) => [
      key,
      median(samples.map((sample) => sample[key]).filter((value) => !Number.isNaN(value))),
    ]),
  );
}

function median(values) {
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
}

async function measure(caseName, impl) {
  const { IdleTracker, DeadlineRegistry } = await import('tickwheel');
  if (caseName === 'idle') return impl === 'node' ? idleNode() : idleWheel(IdleTracker);
  return impl === 'node' ? deadlinesNode() : deadlinesWheel(DeadlineRegistry);
}

// Idle detection. The connections and the array that keeps each one's handle exist on both
// sides before the baseline, so only the timers are measured.

function connections() {
  return Array.from({ length: N }, (_, id) => ({ id }));
}

function idleNode() {
  const conns = connections();
  const timers = new Array(N).fill(null);
  const onIdle = (conn) => conn.id;
  const before = retained();
  return rounds((first) => {
    const trackOps = timed(() => {
      for (let i = 0; i < N; i++) timers[i] = setTimeout(onIdle, IDLE_MS, conns[i]);
    });
    const bytesPerItem = first ? (retained() - before) / N : NaN;
    const activityOps = timed(() => {
      for (let i = 0; i < N; i++) timers[i].refresh();
    });
    const untrackOps = timed(() => {
      for (let i = 0; i < N; i++) clearTimeout(timers[i]);
    });
    timers.fill(null);
    return { bytesPerItem, trackOps, activityOps, untrackOps };
  });
}

function idleWheel(IdleTracker) {
  const conns = connections();
  const handles = new Float64Array(N);
  const onIdle = (conn) => conn.id;
  const before = retained();
  const idle = new IdleTracker({ allIdleMs: IDLE_MS, onIdle });
  const result = rounds((first) => {
    const trackOps = timed(() => {
      for (let i = 0; i < N; i++) handles[i] = idle.track(conns[i]);
    });
    const bytesPerItem = first ? (retained() - before) / N : NaN;
    const activityOps = timed(() => {
      for (let i = 0; i < N; i++) idle.read(handles[i]);
    });
    const untrackOps = timed(() => {
      for (let i = 0; i < N; i++) idle.untrack(handles[i]);
    });
    return { bytesPerItem, trackOps, activityOps, untrackOps };
  });
  idle.close();
  return result;
}

// Request deadlines. The callers' promises are kept in an array on both sides, allocated
// before the baseline; the promises themselves count, as they are part of each request.

class NodeDeadlines {
  pending = new Map();

  register(id, timeoutMs) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`request ${id} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
    });
  }

  resolve(id, value) {
    const entry = this.pending.get(id);
    if (entry === undefined) return false;
    clearTimeout(entry.timer);
    this.pending.delete(id);
    entry.resolve(value);
    return true;
  }
}

function deadlinesNode() {
  return deadlines(new NodeDeadlines());
}

function deadlinesWheel(DeadlineRegistry) {
  const registry = new DeadlineRegistry();
  const result = deadlines(registry);
  registry.close();
  return result;
}

function deadlines(registry) {
  const replies = new Array(N).fill(null);
  const before = retained();
  let nextId = 0;
  return rounds((first) => {
    const base = nextId;
    nextId += N;
    const registerOps = timed(() => {
      for (let i = 0; i < N; i++) replies[i] = registry.register(base + i, IDLE_MS);
    });
    const bytesPerItem = first ? (retained() - before) / N : NaN;
    const resolveOps = timed(() => {
      for (let i = 0; i < N; i++) registry.resolve(base + i, i);
    });
    replies.fill(null);
    return { bytesPerItem, registerOps, resolveOps };
  });
}

// Last, so that every class above is initialised before a child process measures.
const [, , mode, caseName, impl] = process.argv;
if (mode === '--child') {
  const result = await measure(caseName, impl);
  process.stdout.write(JSON.stringify(result));
} else {
  report();
}
