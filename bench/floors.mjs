/**
 * `npm run bench:floors`: what this machine allows, set against the speed targets.
 *
 * Some targets are ratios to Node's setTimeout or budgets per message; some costs cannot be
 * avoided by a design that keeps tickwheel's guarantees. This measures those costs on their own,
 * each cell in a fresh process, and sets each target's budget (in ns per operation, from Node's
 * figures of the same run where the target is a ratio) beside the floor it cannot go under:
 *
 *   - clock: one monotonic clock reading (Date.now() is shown too, but it is a wall clock). A timer
 *     that is never early needs a reading taken at or after its start; tickwheel shares one
 *     reading among up to 256 starts (BIND_BATCH in src/timer/driver.ts, docs/timers.md), so a
 *     schedule's floor is a 256th of a reading.
 *   - fill: writing a wheel's per-row arrays (29 bytes a row) as they grow by doubling from
 *     1,024 rows, in a fresh process: page faults and copies, the memory part of a cold start.
 *   - json: JSON.parse of a queue benchmark payload, which every delivery of it needs.
 *   - handOver: handing 100k payloads, parsed beforehand as a dense burst's are (still in the
 *     young generation), to a handler one by one: a delivery object each with its receipt string,
 *     and a handler that reads the clock as bench:queue's does to measure lateness. The least a
 *     consume() delivering a burst does per message, with no queue around it.
 *   - chain: walking 1M rows linked in random order, reading a JS value per row and writing two
 *     fields, as a wheel's slot list is walked when it fires: each row's place is known only
 *     once the previous row is read. Beside it, the same rows visited through an index vector.
 *
 * Results: bench/results/floors.json and floors.md (or --out). No peer but Node is needed.
 */

import { fork } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BIND_BATCH } from '../dist/timer/driver.js';
import { randomDelays } from './timers/sequences.mjs';
import { median } from './timers/stats.mjs';

/* global URL */

const SELF = fileURLToPath(import.meta.url);
const ROOT = fileURLToPath(new URL('..', import.meta.url));

const HELP = `Usage: npm run bench:floors -- [options]
       node --expose-gc bench/floors.mjs [options]

  --n <count>     rows, timers and payloads per cell (default 1M); 1e5, 100k, 1_000_000 all work
  --rounds <k>    measured rounds per cell, median reported (default 5)
  --out <dir>     where floors.json and floors.md go (default bench/results)
  --help
`;

// ---------------------------------------------------------------------------------------------
// Cells: each runs in a child process of its own and sends back one result object.

/** A sink the optimiser cannot see through, so measured loops are not removed as dead code. */
let _sink = 0;

function nsPer(count, fn) {
  const start = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - start) / count;
}

function clockCell({ n, rounds }) {
  const readers = {
    'performance.now()': () => {
      let acc = 0;
      for (let i = 0; i < n; i++) acc += performance.now();
      _sink += acc;
    },
    'Date.now()': () => {
      let acc = 0;
      for (let i = 0; i < n; i++) acc += Date.now();
      _sink += acc;
    },
    'process.hrtime.bigint()': () => {
      let last = 0n;
      for (let i = 0; i < n; i++) last = process.hrtime.bigint();
      _sink += Number(last & 1n);
    },
    'empty loop': () => {
      let acc = 0;
      for (let i = 0; i < n; i++) acc += i;
      _sink += acc;
    },
  };
  const result = {};
  for (const [name, read] of Object.entries(readers)) {
    read(); // warm-up round
    const samples = [];
    for (let r = 0; r < rounds; r++) samples.push(nsPer(n, read));
    result[name] = { ns: median(samples), samples };
  }
  return result;
}

/** Node's setTimeout then clearTimeout with the timers bench's random delays (1 s to 10 min). */
function nodeTimersCell({ n, rounds }) {
  const delays = randomDelays(42, n);
  const handles = new Array(n).fill(null);
  const noop = () => {};
  const round = () => {
    const schedule = nsPer(n, () => {
      for (let i = 0; i < n; i++) handles[i] = setTimeout(noop, delays[i]);
    });
    const cancel = nsPer(n, () => {
      for (let i = 0; i < n; i++) clearTimeout(handles[i]);
    });
    handles.fill(null);
    return { schedule, cancel };
  };
  const cold = round();
  const warm = [];
  for (let r = 0; r < rounds; r++) warm.push(round());
  return {
    scheduleColdNs: cold.schedule,
    scheduleNs: median(warm.map((w) => w.schedule)),
    cancelNs: median(warm.map((w) => w.cancel)),
    scheduleSamples: warm.map((w) => w.schedule),
  };
}

/**
 * A wheel's per-row arrays, filled row after row (as the first rows of a fresh wheel are): a
 * Float64 tick and delay, Int32 next and prev, a Uint32 generation and a Uint8 flag. `growing`
 * starts them at 1,024 rows and doubles them (copying) when full; otherwise they are made at
 * full size first. The second fill of the same arrays (`again`) finds the memory mapped.
 */
function fillCell({ n, growing }) {
  let capacity = growing ? 1024 : n;
  let tick = new Float64Array(capacity);
  let delay = new Float64Array(capacity);
  let next = new Int32Array(capacity);
  let prev = new Int32Array(capacity);
  let generation = new Uint32Array(capacity);
  let flags = new Uint8Array(capacity);
  const grown = (array) => {
    const copy = new array.constructor(capacity);
    copy.set(array);
    return copy;
  };
  const grow = () => {
    capacity *= 2;
    tick = grown(tick);
    delay = grown(delay);
    next = grown(next);
    prev = grown(prev);
    generation = grown(generation);
    flags = grown(flags);
  };
  const fill = () => {
    for (let i = 0; i < n; i++) {
      if (i === capacity) grow();
      tick[i] = i + 0.5;
      delay[i] = 1000;
      next[i] = i + 1;
      prev[i] = i - 1;
      generation[i] = 1;
      flags[i] = 2;
    }
  };
  const first = nsPer(n, fill);
  const again = nsPer(n, fill);
  _sink += tick[n - 1] + next[n - 1];
  return { firstNs: first, againNs: again, bytesPerRow: 29 };
}

/** JSON.parse of distinct payloads shaped like bench:queue's ({ n, user, due }). */
function jsonCell({ n, rounds }) {
  const due = Date.now();
  const texts = new Array(n);
  for (let i = 0; i < n; i++) {
    texts[i] = JSON.stringify({ n: i, user: `user-${i % 1_000_000}`, due: due + i });
  }
  const parse = () => {
    let acc = 0;
    for (let i = 0; i < n; i++) acc += JSON.parse(texts[i]).n;
    _sink += acc;
  };
  parse();
  const samples = [];
  for (let r = 0; r < rounds; r++) samples.push(nsPer(n, parse));
  return { ns: median(samples), samples, bytes: texts[0].length };
}

/**
 * A burst handed over: BURST (100k, or n if fewer) payloads parsed ahead (young objects, as a dense burst's are when it
 * comes due), each put in a delivery object with a receipt made as tickwheel makes them (a prefix,
 * the slot and a counter in base 36) and passed to a handler that reads the clock and records the
 * lateness. Parsing is outside the measured time; the garbage collection it leads to is inside.
 */
function handOverCell({ n, rounds }) {
  const BURST = Math.min(n, 100_000);
  const prefix = 'rQk3f9Zt2mWx0pLa';
  const lateness = new Float64Array(BURST);
  let counter = 0;
  let handled = 0;
  const handler = (delivery) => {
    lateness[handled++] = performance.now() - delivery.payload.due;
  };
  const round = () => {
    const due = performance.now();
    const payloads = new Array(BURST);
    for (let i = 0; i < BURST; i++) {
      payloads[i] = JSON.parse(`{"n":${i},"user":"user-${i}","due":${due}}`);
    }
    handled = 0;
    const start = process.hrtime.bigint();
    for (let i = 0; i < BURST; i++) {
      const slot = i % 1000;
      handler({
        id: `m${i}`,
        topic: 'bench',
        payload: payloads[i],
        deliverAt: due,
        attempts: 1,
        receipt: `${prefix}${slot.toString(36)}.${(++counter).toString(36)}`,
      });
    }
    const ns = Number(process.hrtime.bigint() - start) / BURST;
    _sink += lateness[BURST - 1];
    return ns;
  };
  round();
  const samples = [];
  for (let r = 0; r < rounds; r++) samples.push(round());
  return { ns: median(samples), samples, burst: BURST };
}

/**
 * Rows linked in one random order (a seeded permutation), visited by following `next` from the
 * first, each visit reading the row's value from 4,096-row chunks and writing two fields (as a
 * wheel's expiry reads the callback and frees the row). `vector` visits the same rows in the
 * same order read from an index array instead: no visit waits for the one before.
 */
function chainCell({ n, rounds }) {
  let state = 7;
  const random = () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state / 4294967296;
  };
  const order = new Int32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  const next = new Int32Array(n);
  const prev = new Int32Array(n);
  for (let k = 0; k < n - 1; k++) next[order[k]] = order[k + 1];
  next[order[n - 1]] = -1;
  const chunks = [];
  for (let c = 0; c * 4096 < n; c++) chunks.push(new Array(4096).fill(0).map((_, i) => c + i));
  /** Reads the row's value and writes both of its links, as freeing a row does. */
  const visit = (row, following) => {
    const value = chunks[row >>> 12][row & 4095];
    prev[row] = -2;
    next[row] = following;
    return value;
  };
  const walkChain = () => {
    let acc = 0;
    for (let row = order[0]; row >= 0;) {
      const following = next[row];
      acc += visit(row, following);
      row = following;
    }
    _sink += acc;
  };
  const walkVector = () => {
    let acc = 0;
    for (let k = 0; k < n; k++) acc += visit(order[k], k + 1 < n ? order[k + 1] : -1);
    _sink += acc;
  };
  walkChain();
  walkVector();
  const chain = [];
  const vector = [];
  for (let r = 0; r < rounds; r++) {
    chain.push(nsPer(n, walkChain));
    vector.push(nsPer(n, walkVector));
  }
  return {
    chainNs: median(chain),
    vectorNs: median(vector),
    chainSamples: chain,
    vectorSamples: vector,
  };
}

const CELLS = {
  clock: clockCell,
  nodeTimers: nodeTimersCell,
  fill: fillCell,
  json: jsonCell,
  handOver: handOverCell,
  chain: chainCell,
};

// ---------------------------------------------------------------------------------------------
// The runner.

function parseCount(name, text) {
  const match = /^([\d_.]+(?:e\d+)?)([kKmM]?)$/.exec(text ?? '');
  const value = match
    ? Number(match[1].replace(/_/g, '')) * ({ k: 1e3, m: 1e6 }[match[2].toLowerCase()] ?? 1)
    : NaN;
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`--${name} takes a whole number of at least 1, got ${text}`);
  }
  return value;
}

function parseArgs(argv) {
  const options = { n: 1_000_000, rounds: 5, out: join(ROOT, 'bench', 'results') };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help') {
      process.stdout.write(HELP);
      process.exit(0);
    } else if (arg === '--n') options.n = parseCount('n', argv[++i]);
    else if (arg === '--rounds') options.rounds = parseCount('rounds', argv[++i]);
    else if (arg === '--out') options.out = argv[++i];
    else throw new Error(`unknown option ${arg}\n\n${HELP}`);
  }
  if (options.out === undefined) throw new Error('--out takes a directory');
  return options;
}

function runCell(name, args) {
  return new Promise((resolve, reject) => {
    const child = fork(SELF, [], {
      env: { ...process.env, TICKWHEEL_FLOORS_CELL: JSON.stringify({ name, args }) },
      execArgv: [],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let result;
    child.on('message', (message) => (result = message));
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 && result !== undefined
        ? resolve(result)
        : reject(new Error(`cell ${name} exited with ${code}`)),
    );
  });
}

/** Each target's budget in ns per operation, and the floor under it. */
function targetsOf(r) {
  // Date.now() is shown but is no floor: a wall clock in whole ms, it can step back (NTP) and
  // is up to 1 ms behind, so a timer placed on it could fire early.
  const clockNs = Math.min(r.clock['performance.now()'].ns, r.clock['process.hrtime.bigint()'].ns);
  const sharedClockNs = clockNs / BIND_BATCH;
  const coldFloor = sharedClockNs + r.fillGrowing.firstNs;
  const row = (id, text, budgetNs, floorNs, floorText) => ({
    id,
    text,
    budgetNs,
    floorNs,
    floor: floorText,
    headroomNs: budgetNs - floorNs,
    belowFloor: budgetNs < floorNs,
  });
  return [
    row(
      'lean-schedule-warm',
      'lean schedule >= 20x Node setTimeout, warm',
      r.node.scheduleNs / 20,
      sharedClockNs,
      `a ${BIND_BATCH}th of a monotonic clock reading`,
    ),
    row(
      'closure-schedule-warm',
      'closure setTimeout >= 15x Node setTimeout, warm',
      r.node.scheduleNs / 15,
      sharedClockNs,
      `a ${BIND_BATCH}th of a monotonic clock reading`,
    ),
    row(
      'schedule-cold',
      'lean and closure schedule >= 10x Node setTimeout, cold (first million)',
      r.node.scheduleColdNs / 10,
      coldFloor,
      `a ${BIND_BATCH}th of a clock reading + a fresh row of growing arrays`,
    ),
    row(
      'storm',
      'expiry storm >= 10M expirations/s',
      100,
      r.chain.chainNs,
      'one visit of a row of a random 1M-row list',
    ),
    // Payloads of a dense burst are parsed before it is due (docs/storage.md), so parsing is no
    // longer the floor of this one; handing the parsed payloads over is.
    row(
      'queue-same-ms',
      'queue: 100k due in the same ms, p99 <= 20 ms from due to receive',
      (20 * 1e6) / 100_000,
      r.handOver.ns,
      'handing a parsed payload to a handler (a delivery object, its receipt, a clock reading)',
    ),
  ];
}

function formatNs(ns) {
  return ns >= 100 ? ns.toFixed(0) : ns.toFixed(1);
}

function markdown(report) {
  const { results: r, targets, environment: env, options } = report;
  const lines = [
    `# What this machine allows, ${report.date}`,
    '',
    `${env.cores} x ${env.cpu}, ${env.memoryGiB} GiB, Node ${env.node}; load average ${env.loadAverageAtStart[0]} at start. N = ${options.n.toLocaleString('en-US')}, median of ${options.rounds} rounds, each cell in a fresh process. Written by \`npm run bench:floors\` (bench/floors.mjs).`,
    '',
    '| cost | ns |',
    '| --- | --- |',
    ...Object.entries(r.clock).map(([name, { ns }]) => `| clock: ${name} | ${formatNs(ns)} |`),
    `| Node setTimeout, warm \\| cold (first N) | ${formatNs(r.node.scheduleNs)} \\| ${formatNs(r.node.scheduleColdNs)} |`,
    `| Node clearTimeout, warm | ${formatNs(r.node.cancelNs)} |`,
    `| fill a row of growing arrays, fresh process \\| again | ${formatNs(r.fillGrowing.firstNs)} \\| ${formatNs(r.fillGrowing.againNs)} |`,
    `| fill a row of arrays made at full size, fresh process \\| again | ${formatNs(r.fillPreallocated.firstNs)} \\| ${formatNs(r.fillPreallocated.againNs)} |`,
    `| JSON.parse of a ${r.json.bytes}-byte payload | ${formatNs(r.json.ns)} |`,
    `| hand ${r.handOver.burst.toLocaleString('en-US')} payloads parsed ahead to a handler, one by one: a delivery object, its receipt, a clock reading (GC included) | ${formatNs(r.handOver.ns)} |`,
    `| visit a row of a random ${options.n.toLocaleString('en-US')}-row list \\| the same rows through an index vector | ${formatNs(r.chain.chainNs)} \\| ${formatNs(r.chain.vectorNs)} |`,
    '',
    '| target | budget, ns per operation | floor | floor, ns | under the floor |',
    '| --- | --- | --- | --- | --- |',
    ...targets.map(
      (t) =>
        `| ${t.text} | ${formatNs(t.budgetNs)} | ${t.floor} | ${formatNs(t.floorNs)} | ${t.belowFloor ? 'yes: out of reach' : `no (${formatNs(t.headroomNs)} ns left)`} |`,
    ),
    '',
  ];
  return lines.join('\n');
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const loadAtStart = loadavg().map((value) => Math.round(value * 100) / 100);
  const args = { n: options.n, rounds: options.rounds };
  const results = {};
  const steps = [
    ['clock', 'clock', args],
    ['node', 'nodeTimers', args],
    ['fillGrowing', 'fill', { ...args, growing: true }],
    ['fillPreallocated', 'fill', { ...args, growing: false }],
    ['json', 'json', args],
    ['handOver', 'handOver', args],
    ['chain', 'chain', args],
  ];
  for (const [key, cell, cellArgs] of steps) {
    const started = performance.now();
    results[key] = await runCell(cell, cellArgs);
    process.stderr.write(`${key}: ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
  }
  const report = {
    schema: 'tickwheel-bench-floors/1',
    date: new Date().toISOString(),
    environment: {
      node: process.version,
      cpu: cpus()[0]?.model ?? 'unknown',
      cores: cpus().length,
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      loadAverageAtStart: loadAtStart,
    },
    options,
    results,
    targets: targetsOf(results),
  };
  mkdirSync(options.out, { recursive: true });
  writeFileSync(join(options.out, 'floors.json'), `${JSON.stringify(report, null, 2)}\n`);
  const md = markdown(report);
  writeFileSync(join(options.out, 'floors.md'), md);
  process.stdout.write(md);
}

const cellSpec = process.env.TICKWHEEL_FLOORS_CELL;
if (cellSpec !== undefined) {
  const { name, args } = JSON.parse(cellSpec);
  process.send(CELLS[name](args), () => process.exit(0));
} else {
  main().catch((err) => {
    process.stderr.write(`${err.stack ?? err}\n`);
    process.exit(1);
  });
}
