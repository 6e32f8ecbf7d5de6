/**
 * Push against pull: how fast tickwheel delivers a topic's messages when the queue pushes them
 * over HTTP (a push target, src/queue/push.ts) and when a consumer pulls them, in one run.
 *
 *   embedded  DelayQueue.open({ dir }) in a process of its own (queue-cell.mjs), either
 *             pushing to a receiver process (receiver.mjs: a bare node:http server answering
 *             204, or pushListener checking signatures), or consuming in process with
 *             queue.consume (no HTTP at all: the upper bound)
 *   served    `tickwheel serve` (server.mjs), either pushing to the same receivers, or
 *             with TickwheelClient.consume pulling over HTTP from a process of its own
 *             (consumer.mjs): the fair comparison for a served queue
 *
 * Throughput cells: a fresh queue process per cell (and a fresh receiver or consumer), a
 * warm-up through the same path, then the topic is paused, N messages all due now are
 * scheduled, and the clock runs from resume until the topic has nothing pending (every message
 * acknowledged). CPU seconds of the queue process and of the receiving process over that span.
 * Lateness cells: messages due evenly over a few seconds, scheduled beforehand; lateness is
 * arrival at the receiving end minus deliverAt. Every cell runs in several rounds, the setups
 * in alternating order (load from elsewhere on the machine hits them alike); the tables show
 * the median of the rounds.
 *
 * Results go to bench/results/push.json and push.md. Run with npm run bench:push (builds
 * first); TICKWHEEL_BENCH_DIST=/path/to/dist measures another build.
 */

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, platform, release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { URL, fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { importDist } from './dist.mjs';
import { formatMs, formatNumber, ratio } from '../queue/stats.mjs';
import { startChild } from './ipc.mjs';
import { startServer } from './server.mjs';
import { scheduleRequests, untilDrained } from './workload.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const HERE = fileURLToPath(new URL('.', import.meta.url));
const TOPIC = 'bench.push';
const SECRET = randomBytes(32).toString('hex');
/** A cell that has not drained in this long has failed. */
const DRAIN_TIMEOUT_MS = 300_000;

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', default: process.env.TICKWHEEL_BENCH_PUSH_N ?? '10000' },
    rounds: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '1,10,50' },
    warmup: { type: 'string', default: '2000' },
    'lateness-rates': { type: 'string', default: '100,1000,2000' },
    'spread-ms': { type: 'string', default: '2000' },
    'lead-ms': { type: 'string', default: '500' },
    'lateness-concurrency': { type: 'string', default: '10' },
    only: { type: 'string', default: 'throughput,lateness' },
    out: { type: 'string', default: join(ROOT, 'bench', 'results') },
    'data-dir': { type: 'string', default: tmpdir() },
    profile: { type: 'string' },
    label: { type: 'string' },
    quick: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});

if (args.help) {
  process.stdout.write(`npm run bench:push -- [options]
  --n <count>                   messages per throughput cell (default 10000, or
                                TICKWHEEL_BENCH_PUSH_N)
  --rounds <count>              rounds of every cell, the setups in alternating order; the
                                tables show the median of the rounds (default 3)
  --concurrency <list>          push target / consumer concurrencies (default 1,10,50)
  --warmup <count>              messages through the same path before each cell (default 2000)
  --lateness-rates <list>       messages due per second in the lateness cells, one cell
                                per rate and setup (default 100,1000,2000)
  --spread-ms <ms>              over how long they fall due (default 2000)
  --lead-ms <ms>                the first due this long after scheduling starts (default 500)
  --lateness-concurrency <n>    concurrency of the lateness cells (default 10)
  --only <list>                 throughput,lateness (default both)
  --out <dir>                   where push.json and push.md go (default bench/results)
  --data-dir <dir>              where the queues' data directories are made (default OS temp)
  --profile <dir>               --cpu-prof the embedded queue processes into <dir>
  --label <text>                what was built, recorded with the results (with
                                TICKWHEEL_BENCH_DIST, whose commit the runner cannot know)
  --quick                       tiny run, to check that the benchmark works
`);
  process.exit(0);
}

function count(name) {
  const value = Number(String(args[name]).replaceAll('_', ''));
  if (!Number.isInteger(value) || value < 0) throw new Error(`--${name} must be a whole number`);
  return value;
}

const options = {
  n: args.quick ? 300 : count('n'),
  rounds: args.quick ? 1 : count('rounds'),
  concurrencies: args.concurrency.split(',').map(Number),
  warmup: args.quick ? 100 : count('warmup'),
  latenessRates: args.quick ? [400] : args['lateness-rates'].split(',').map(Number),
  spreadMs: args.quick ? 300 : count('spread-ms'),
  leadMs: args.quick ? 300 : count('lead-ms'),
  latenessConcurrency: count('lateness-concurrency'),
  only: args.only.split(','),
  quick: args.quick,
};
if (options.n < 1 || options.rounds < 1) throw new Error('--n and --rounds must be 1 or more');
for (const rate of options.latenessRates) {
  if (!Number.isInteger(rate) || rate < 1) {
    throw new Error(`--lateness-rates takes whole numbers above 0, got ${args['lateness-rates']}`);
  }
}
for (const c of options.concurrencies) {
  if (!Number.isInteger(c) || c < 1 || c > 1000) {
    throw new Error(`--concurrency takes whole numbers from 1 to 1000, got ${args.concurrency}`);
  }
}

const { TickwheelClient } = await importDist('client/index.js');

// ---- the queue under test: one interface for the embedded queue and the served one --------

/** An embedded queue in a process of its own (queue-cell.mjs). */
async function embeddedQueue(dir) {
  const execArgv = args.profile === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', args.profile];
  const cell = await startChild(join(HERE, 'queue-cell.mjs'), [dir], { execArgv });
  return {
    push: (target) => cell.call('push', { topic: TOPIC, target }),
    /** The queue's own consume(): the receiving end is this process. */
    consumeHere: async (concurrency) => {
      await cell.call('consume', { topic: TOPIC, concurrency });
      return {
        cpu: async () => null,
        reset: () => cell.call('reset'),
        summary: () => cell.call('summary'),
        stop: async () => undefined,
      };
    },
    schedule: (request) => cell.call('schedule', { topic: TOPIC, ...request }),
    pause: () => cell.call('pause', { topic: TOPIC }),
    drain: () => cell.call('drain', { topic: TOPIC, timeoutMs: DRAIN_TIMEOUT_MS }),
    settle: () => cell.call('settle', { topic: TOPIC, timeoutMs: DRAIN_TIMEOUT_MS }),
    pushStats: () => cell.call('pushStats', { topic: TOPIC }),
    stop: async () => {
      await cell.call('close');
      await cell.stop();
    },
  };
}

/** `tickwheel serve` in a process of its own, driven over the client from here. */
async function servedQueue(dir) {
  const server = await startServer({ dir });
  const client = new TickwheelClient({ url: server.url, retries: 0, timeoutMs: 60_000 });
  const pending = async () => (await client.topicInfo(TOPIC)).pending;
  return {
    url: server.url,
    push: (target) => client.configureTopic(TOPIC, { push: target }),
    schedule: async (request) => {
      for (const batch of scheduleRequests({ topic: TOPIC, ...request })) {
        await client.scheduleMany(batch);
      }
    },
    pause: () => client.pause(TOPIC),
    drain: async () => {
      const cpu0 = server.cpuSeconds();
      const t0 = performance.now();
      await client.resume(TOPIC);
      await untilDrained(pending, DRAIN_TIMEOUT_MS, 20);
      const seconds = (performance.now() - t0) / 1000;
      const cpu1 = server.cpuSeconds();
      return { seconds, cpuSeconds: cpu0 === null || cpu1 === null ? null : cpu1 - cpu0 };
    },
    settle: () => untilDrained(pending, DRAIN_TIMEOUT_MS, 20),
    pushStats: async () => (await client.stats()).push?.[TOPIC] ?? null,
    stop: async () => {
      await client.close();
      await server.stop();
    },
  };
}

// ---- the receiving end --------------------------------------------------------------------

/** A receiver process (receiver.mjs) and the queue's push target pointed at it. */
async function pushTo(queue, kind, concurrency) {
  const receiver = await startChild(join(HERE, 'receiver.mjs'), [kind], {
    env: { TICKWHEEL_BENCH_PUSH_SECRET: SECRET },
  });
  await queue.push({
    url: `http://127.0.0.1:${receiver.hello.port}/push`,
    secret: SECRET,
    concurrency,
    timeoutMs: 10_000,
  });
  return endOf(receiver);
}

/** A TickwheelClient consumer process (consumer.mjs) on the served queue. */
async function pullOverHttp(queue, concurrency) {
  const consumer = await startChild(join(HERE, 'consumer.mjs'), [
    queue.url,
    TOPIC,
    String(concurrency),
  ]);
  return endOf(consumer, () => consumer.call('close'));
}

function endOf(child, beforeStop = async () => undefined) {
  return {
    cpu: () => child.call('cpu'),
    reset: () => child.call('reset'),
    summary: () => child.call('summary'),
    stop: async () => {
      await beforeStop();
      await child.stop();
    },
  };
}

function attach(queue, where, delivery, concurrency) {
  if (delivery === 'push-bare') return pushTo(queue, 'bare', concurrency);
  if (delivery === 'push-listener') return pushTo(queue, 'listener', concurrency);
  return where === 'embedded' ? queue.consumeHere(concurrency) : pullOverHttp(queue, concurrency);
}

// ---- cells ----------------------------------------------------------------------------------

const round = (value, digits = 0) =>
  value === null ? null : Math.round(value * 10 ** digits) / 10 ** digits;

/** Opens the queue and its receiving end, warms the path up, runs `measure`, cleans up. */
async function withCell({ where, delivery, concurrency }, measure) {
  const dir = mkdtempSync(join(args['data-dir'], 'tickwheel-bench-push-'));
  let queue;
  let end;
  try {
    queue = where === 'embedded' ? await embeddedQueue(dir) : await servedQueue(dir);
    end = await attach(queue, where, delivery, concurrency);
    await queue.schedule({ count: options.warmup });
    await queue.settle();
    await end.reset();
    return await measure(queue, end);
  } finally {
    await end?.stop();
    await queue?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const perSecond = (cpuSeconds, seconds) =>
  cpuSeconds === null ? null : round(cpuSeconds / seconds, 2);

function pushDelta(before, after) {
  if (before === null || after === null) return null;
  return { succeeded: after.succeeded - before.succeeded, failed: after.failed - before.failed };
}

async function throughputCell(cell) {
  return withCell(cell, async (queue, end) => {
    const n = options.n;
    await queue.pause();
    await queue.schedule({ count: n });
    const push0 = await queue.pushStats();
    const endCpu0 = await end.cpu();
    const { seconds, cpuSeconds } = await queue.drain();
    const endCpu1 = await end.cpu();
    const seen = await end.summary();
    const push = pushDelta(push0, await queue.pushStats());
    const endCpu = endCpu0 === null ? null : endCpu1 - endCpu0;
    const totalCpu = cpuSeconds === null ? null : cpuSeconds + (endCpu ?? 0);
    return {
      ...cell,
      n,
      seconds: round(seconds, 3),
      deliveriesPerSecond: round(n / seconds),
      cpuSeconds: { queue: round(cpuSeconds, 3), end: round(endCpu, 3) },
      cores: { queue: perSecond(cpuSeconds, seconds), end: perSecond(endCpu, seconds) },
      deliveriesPerQueueCpuSecond: cpuSeconds ? round(n / cpuSeconds) : null,
      deliveriesPerCpuSecond: totalCpu ? round(n / totalCpu) : null,
      arrivals: seen.arrivals,
      distinct: seen.distinct,
      ...(seen.refused === undefined ? {} : { refused: seen.refused }),
      ...(push === null ? {} : { push }),
    };
  });
}

async function latenessCell(cell, rate) {
  return withCell(cell, async (queue, end) => {
    const n = Math.max(1, Math.round((rate * options.spreadMs) / 1000));
    const t0 = performance.now();
    await queue.schedule({ count: n, startMs: options.leadMs, spreadMs: options.spreadMs });
    const scheduledInMs = performance.now() - t0;
    await queue.settle();
    const seen = await end.summary();
    return {
      ...cell,
      ratePerSecond: rate,
      n,
      spreadMs: options.spreadMs,
      leadMs: options.leadMs,
      // Scheduling must end before the first message is due, or lateness would include it.
      scheduledInMs: round(scheduledInMs, 1),
      arrivals: seen.arrivals,
      distinct: seen.distinct,
      lateness: seen.lateness,
    };
  });
}

const WHERES = ['embedded', 'served'];
/** Every setup of a throughput round, in the order of even rounds (odd rounds reverse it). */
const SETUPS = WHERES.flatMap((where) =>
  ['pull', 'push-bare', 'push-listener'].map((delivery) => ({ where, delivery })),
);
/** The setups of the lateness cells: the realistic receiver only. */
const LATENESS_SETUPS = WHERES.flatMap((where) =>
  ['pull', 'push-listener'].map((delivery) => ({ where, delivery })),
);

function median(values) {
  const known = values.filter((value) => value !== null).sort((a, b) => a - b);
  if (known.length === 0) return null;
  const middle = known.length >> 1;
  return known.length % 2 === 1 ? known[middle] : (known[middle - 1] + known[middle]) / 2;
}

const medianOf = (samples, read, digits = 0) => round(median(samples.map(read)), digits);
const sum = (samples, read) => samples.reduce((total, sample) => total + (read(sample) ?? 0), 0);

/** A throughput cell: the median of its rounds, each round kept in `samples`. */
function throughputSummary(cell, samples) {
  return {
    ...cell,
    n: options.n,
    rounds: samples.length,
    deliveriesPerSecond: medianOf(samples, (s) => s.deliveriesPerSecond),
    deliveriesPerQueueCpuSecond: medianOf(samples, (s) => s.deliveriesPerQueueCpuSecond),
    deliveriesPerCpuSecond: medianOf(samples, (s) => s.deliveriesPerCpuSecond),
    cpuSeconds: {
      queue: medianOf(samples, (s) => s.cpuSeconds.queue, 3),
      end: medianOf(samples, (s) => s.cpuSeconds.end, 3),
    },
    cores: {
      queue: medianOf(samples, (s) => s.cores.queue, 2),
      end: medianOf(samples, (s) => s.cores.end, 2),
    },
    // Must hold in every round: each message reached the receiving end.
    everyMessageArrived: samples.every((s) => s.distinct === s.n),
    duplicates: sum(samples, (s) => s.arrivals - s.distinct),
    ...(cell.delivery === 'pull'
      ? {}
      : {
          refused: sum(samples, (s) => s.refused),
          pushesFailed: sum(samples, (s) => s.push?.failed),
        }),
    samples,
  };
}

/** A lateness cell: the median of each percentile over its rounds. */
function latenessSummary(cell, samples) {
  const [first] = samples;
  const percentile = (key) => medianOf(samples, (s) => s.lateness[key], 2);
  return {
    ...cell,
    ratePerSecond: first.ratePerSecond,
    n: first.n,
    spreadMs: first.spreadMs,
    leadMs: first.leadMs,
    rounds: samples.length,
    everyMessageArrived: samples.every((s) => s.distinct === s.n),
    lateness: {
      p50Ms: percentile('p50Ms'),
      p90Ms: percentile('p90Ms'),
      p99Ms: percentile('p99Ms'),
      maxMs: percentile('maxMs'),
    },
    samples,
  };
}

/** Runs `run(setup, round)` for every setup, `options.rounds` times, alternating the order. */
async function inRounds(setups, run) {
  const samples = setups.map(() => []);
  for (let r = 0; r < options.rounds; r++) {
    const order = setups.map((_, i) => i);
    if (r % 2 === 1) order.reverse();
    for (const i of order) samples[i].push(await run(setups[i], r));
  }
  return samples;
}

function describeCell({ where, delivery, concurrency }) {
  return `${where} ${delivery} c=${concurrency}`;
}

// ---- report ---------------------------------------------------------------------------------

const LABELS = {
  'embedded pull': 'embedded, queue.consume in process',
  'embedded push-bare': 'embedded, push to bare 204 server',
  'embedded push-listener': 'embedded, push to pushListener',
  'served pull': 'served, TickwheelClient.consume over HTTP',
  'served push-bare': 'served, push to bare 204 server',
  'served push-listener': 'served, push to pushListener',
};

/** push / pull of the same queue at the same concurrency: deliveries/s and per queue-CPU-s. */
function ratios(throughput) {
  const rows = [];
  for (const cell of throughput) {
    if (cell.delivery === 'pull') continue;
    const pull = throughput.find(
      (other) =>
        other.delivery === 'pull' &&
        other.where === cell.where &&
        other.concurrency === cell.concurrency,
    );
    if (pull === undefined) continue;
    rows.push({
      where: cell.where,
      push: cell.delivery,
      concurrency: cell.concurrency,
      deliveriesPerSecond: ratio(cell.deliveriesPerSecond, pull.deliveriesPerSecond),
      deliveriesPerQueueCpuSecond: ratio(
        cell.deliveriesPerQueueCpuSecond,
        pull.deliveriesPerQueueCpuSecond,
      ),
      deliveriesPerCpuSecond: ratio(cell.deliveriesPerCpuSecond, pull.deliveriesPerCpuSecond),
    });
  }
  return rows;
}

function markdown(report) {
  const { meta, options: o, throughput, lateness } = report;
  const lines = [
    '# Push against pull',
    '',
    `${meta.date}, ${meta.machine.cpus} cores (${meta.machine.cpu}), Node ${meta.node}, ` +
      `${meta.commit === null ? '' : `commit ${meta.commit}, `}` +
      `${meta.label === null ? '' : `build: ${meta.label}; `}load average ${meta.loadAverage.start.join(' ')} at the ` +
      `start, ${meta.loadAverage.end.join(' ')} at the end.`,
    '',
  ];
  if (throughput.length > 0) {
    lines.push(
      `## Throughput: ${formatNumber(o.n)} messages due at once, ${o.rounds === 1 ? 'one round' : `median of ${o.rounds} rounds`}`,
      '',
      'From resume until nothing is pending (all acknowledged). Every figure is the median ' +
        'of the rounds (each in the JSON); the setups ran in alternating order. Queue CPU: the embedded ' +
        "queue's process or the `tickwheel serve` process; receiver CPU: the push receiver or " +
        'the HTTP consumer process (none for queue.consume, which runs in the queue process). ' +
        'Per CPU-s: deliveries per CPU second of the queue alone, and of queue + receiver.',
      '',
      '| conc. | setup | deliveries/s | queue CPU s | receiver CPU s | per queue CPU-s | per total CPU-s |',
      '| ---: | --- | ---: | ---: | ---: | ---: | ---: |',
    );
    for (const cell of throughput) {
      lines.push(
        `| ${cell.concurrency} | ${LABELS[`${cell.where} ${cell.delivery}`]} | ` +
          `${formatNumber(cell.deliveriesPerSecond)} | ${formatNumber(cell.cpuSeconds.queue, 2)} | ` +
          `${formatNumber(cell.cpuSeconds.end, 2)} | ` +
          `${formatNumber(cell.deliveriesPerQueueCpuSecond)} | ${formatNumber(cell.deliveriesPerCpuSecond)} |`,
      );
    }
    const missing = throughput.filter((cell) => !cell.everyMessageArrived).length;
    const pushes = throughput.filter((cell) => cell.delivery !== 'pull');
    lines.push(
      '',
      `Every message reached its receiving end in every round: ${missing === 0 ? 'yes' : `no (${missing} cells)`}; ` +
        `deliveries seen twice: ${sum(throughput, (c) => c.duplicates)}; push attempts failed: ` +
        `${sum(pushes, (c) => c.pushesFailed)}; requests refused by pushListener: ${sum(pushes, (c) => c.refused)}.`,
      '',
      '### Push / pull, same queue, same concurrency',
      '',
      'Above 1: push delivered faster (or used less CPU per delivery) than pull.',
      '',
      '| queue | push to | conc. | deliveries/s | per queue CPU-s | per total CPU-s |',
      '| --- | --- | ---: | ---: | ---: | ---: |',
    );
    for (const row of report.ratios) {
      const x = (value) => (value === null ? '-' : `${value}x`);
      lines.push(
        `| ${row.where} | ${row.push === 'push-bare' ? 'bare 204' : 'pushListener'} | ` +
          `${row.concurrency} | ${x(row.deliveriesPerSecond)} | ` +
          `${x(row.deliveriesPerQueueCpuSecond)} | ${x(row.deliveriesPerCpuSecond)} |`,
      );
    }
    lines.push('');
  }
  if (lateness.length > 0) {
    const [first] = lateness;
    lines.push(
      `## Lateness: messages due evenly over ${formatNumber(first.spreadMs)} ms, ` +
        `concurrency ${first.concurrency}, ${o.rounds === 1 ? 'one round' : `median of ${o.rounds} rounds`}`,
      '',
      'Arrival at the receiving end (the push request at the receiver after its signature ' +
        "check, a consumer's handler) minus the message's deliverAt; scheduled beforehand, " +
        `the first due ${formatNumber(first.leadMs)} ms after scheduling began. Each ` +
        "percentile is the median of the rounds' (each round's are in the JSON).",
      '',
      '| due/s | setup | delivered | p50 | p90 | p99 | max |',
      '| ---: | --- | ---: | ---: | ---: | ---: | ---: |',
    );
    for (const cell of lateness) {
      const l = cell.lateness;
      lines.push(
        `| ${formatNumber(cell.ratePerSecond)} | ${LABELS[`${cell.where} ${cell.delivery}`]} | ` +
          `${cell.everyMessageArrived ? formatNumber(cell.n) : 'not all'} | ` +
          `${formatMs(l.p50Ms)} | ${formatMs(l.p90Ms)} | ${formatMs(l.p99Ms)} | ${formatMs(l.maxMs)} |`,
      );
    }
    lines.push('');
  }
  return `${lines.join('\n')}`;
}

// ---- main -----------------------------------------------------------------------------------

/** The checkout's commit, if its dist/ is what runs (read first: HEAD may move meanwhile). */
function checkoutCommit() {
  if (process.env.TICKWHEEL_BENCH_DIST !== undefined) return null;
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: ROOT,
      encoding: 'utf8',
    }).trim();
  } catch {
    return null;
  }
}

async function main() {
  const commit = checkoutCommit();
  if (args.profile !== undefined) mkdirSync(args.profile, { recursive: true });
  const start = loadavg().map((load) => round(load, 2));
  process.stdout.write(
    `tickwheel push benchmark: ${cpus().length} cores, node ${process.version}, ` +
      `N ${options.n}, concurrency ${options.concurrencies.join('/')}, load average ${start.join(' ')}\n`,
  );
  if (start[0] > 1) {
    process.stdout.write(
      'warning: the machine is busy; rates will be low (CPU-s figures less so)\n',
    );
  }

  const roundOf = (r) => `round ${r + 1}/${options.rounds}`;
  const throughput = [];
  if (options.only.includes('throughput')) {
    for (const concurrency of options.concurrencies) {
      const setups = SETUPS.map((setup) => ({ ...setup, concurrency }));
      const samples = await inRounds(setups, async (cell, r) => {
        const result = await throughputCell(cell);
        process.stdout.write(
          `${describeCell(cell).padEnd(28)} ${roundOf(r)} ` +
            `${String(result.deliveriesPerSecond).padStart(7)}/s   queue ${result.cores.queue ?? '?'} cores, ` +
            `receiver ${result.cores.end ?? '-'} cores   ${result.deliveriesPerQueueCpuSecond ?? '?'} per queue CPU-s\n`,
        );
        return result;
      });
      setups.forEach((cell, i) => throughput.push(throughputSummary(cell, samples[i])));
    }
  }

  const lateness = [];
  if (options.only.includes('lateness')) {
    for (const rate of options.latenessRates) {
      const setups = LATENESS_SETUPS.map((setup) => ({
        ...setup,
        concurrency: options.latenessConcurrency,
      }));
      const samples = await inRounds(setups, async (cell, r) => {
        const result = await latenessCell(cell, rate);
        const l = result.lateness;
        process.stdout.write(
          `lateness ${rate}/s ${describeCell(cell).padEnd(28)} ${roundOf(r)} p50 ${formatMs(l.p50Ms)}, ` +
            `p99 ${formatMs(l.p99Ms)}, max ${formatMs(l.maxMs)}\n`,
        );
        return result;
      });
      setups.forEach((cell, i) => lateness.push(latenessSummary(cell, samples[i])));
    }
  }

  const report = {
    schema: 'tickwheel-bench-push/1',
    meta: {
      date: new Date().toISOString(),
      node: process.versions.node,
      platform: `${platform()} ${release()}`,
      machine: { cpus: cpus().length, cpu: cpus()[0]?.model ?? 'unknown' },
      commit,
      // The build measured, when not this checkout's dist/ (TICKWHEEL_BENCH_DIST).
      dist: process.env.TICKWHEEL_BENCH_DIST ?? null,
      label: args.label ?? null,
      loadAverage: { start, end: loadavg().map((load) => round(load, 2)) },
    },
    options,
    throughput,
    ratios: ratios(throughput),
    lateness,
    notes: [
      'Every process of a cell shares the same cores; cores.queue and cores.end show how much of them each used, and the per-CPU-second figures are steadier than deliveriesPerSecond when the machine is busy.',
      'Queue CPU of the served queue is read from /proc/<pid>/stat (10 ms ticks); the others from process.cpuUsage().',
      'A receiving end that sees more arrivals than distinct messages got some twice (at least once delivery).',
    ],
  };
  mkdirSync(args.out, { recursive: true });
  const table = markdown(report);
  writeFileSync(join(args.out, 'push.json'), `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(join(args.out, 'push.md'), table);
  process.stdout.write(`\n${table}\nwrote ${join(args.out, 'push.json')} and push.md\n`);
}

main().catch((err) => {
  process.stderr.write(`${err.stack ?? err}\n`);
  process.exitCode = 1;
});
