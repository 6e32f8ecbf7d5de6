/**
 * `npm run bench:timers`: tickwheel's timers against every peer, in one run.
 *
 * Runs each workload on each peer in a process of its own (JavaScript peers: a forked
 * bench/timers/cell.mjs; Netty: a JVM running bench/jvm/NettyBench.java), workload by workload
 * so that peers are measured side by side, then prints the tables, writes the JSON and draws
 * the SVG charts. See bench/README.md.
 */

import { fork } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chartsOf } from './timers/charts.mjs';
import { compileHarness, findJvm, runJvmCell } from './timers/jvm.mjs';
import { ALL_PEERS } from './timers/peers.mjs';
import { collectMetrics, evaluateTargets, formatReport, ratiosOf } from './timers/report.mjs';
import { WORKLOADS } from './timers/workloads.mjs';

/* global URL */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CELL = fileURLToPath(new URL('./timers/cell.mjs', import.meta.url));

const DEFAULTS = {
  n: 1_000_000,
  ops: undefined, // = n
  rounds: 3,
  warmup: 2,
  seed: 42,
  fixedDelay: 30_000,
  stormWindow: 1_000,
  steadyRate: 100_000,
  steadySeconds: 10,
  steadyWarmup: 2,
  workloads: WORKLOADS.map((workload) => workload.id),
  peers: ALL_PEERS.map((peer) => peer.id),
  skip: [],
  out: join(ROOT, 'bench', 'results'),
};

const HELP = `Usage: npm run bench:timers -- [options]
       node --expose-gc bench/timers.mjs [options]

  --n <count>             timers per workload (default 1M); 1e5, 100k and 1_000_000 all work
  --ops <count>           churn operations per round (default: N)
  --rounds <count>        measured rounds of the operation workloads, median reported (default 3)
  --warmup <count>        unmeasured rounds before them (default 2)
  --workloads <ids>       comma-separated (default: all):
                            ${WORKLOADS.map((w) => w.id).join(', ')}
  --peers <ids>           comma-separated (default: all):
                            ${ALL_PEERS.map((p) => p.id).join(', ')}
  --skip <ids>            peers to leave out, e.g. --skip netty
  --fixed-delay <ms>      delay of the fixed-delay workload (default 30000)
  --storm-window <ms>     the storm's timers fall due within this window (default 1000)
  --steady-rate <per s>   expirations per second in the steady state (default 100000)
  --steady-seconds <s>    steady-state measurement (default 10), after --steady-warmup (2)
  --seed <int>            seed of every input sequence (default 42)
  --out <dir>             where timers.json and the SVGs go (default bench/results)
  --help
`;

function parseCount(name, text) {
  const match = /^([\d_.]+(?:e\d+)?)([kKmM]?)$/.exec(text ?? '');
  const value = match
    ? Number(match[1].replace(/_/g, '')) * ({ k: 1e3, m: 1e6 }[match[2].toLowerCase()] ?? 1)
    : NaN;
  if (!Number.isFinite(value) || value < 0)
    throw new Error(`--${name} takes a number, got ${text}`);
  return value;
}

function parseList(name, text, known) {
  const ids = (text ?? '').split(',').filter((id) => id !== '');
  const unknown = ids.filter((id) => !known.includes(id));
  if (unknown.length > 0) {
    throw new Error(`--${name}: unknown ${unknown.join(', ')}; known: ${known.join(', ')}`);
  }
  return ids;
}

function parseArgs(argv) {
  const options = { ...DEFAULTS };
  const counts = {
    '--n': 'n',
    '--ops': 'ops',
    '--rounds': 'rounds',
    '--warmup': 'warmup',
    '--seed': 'seed',
    '--fixed-delay': 'fixedDelay',
    '--storm-window': 'stormWindow',
    '--steady-rate': 'steadyRate',
    '--steady-seconds': 'steadySeconds',
    '--steady-warmup': 'steadyWarmup',
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s);
    const value = () => inline ?? argv[++i];
    if (flag === '--help' || flag === '-h') {
      process.stdout.write(HELP);
      process.exit(0);
    } else if (counts[flag] !== undefined) {
      options[counts[flag]] = parseCount(flag.slice(2), value());
    } else if (flag === '--workloads') {
      options.workloads = parseList('workloads', value(), DEFAULTS.workloads);
    } else if (flag === '--peers') {
      options.peers = parseList('peers', value(), DEFAULTS.peers);
    } else if (flag === '--skip') {
      options.skip = parseList('skip', value(), DEFAULTS.peers);
    } else if (flag === '--out') {
      options.out = value();
    } else {
      throw new Error(`unknown option ${argv[i]} (see --help)`);
    }
  }
  options.n = Math.max(1, Math.round(options.n));
  options.ops = Math.max(1, Math.round(options.ops ?? options.n));
  options.rounds = Math.max(1, Math.round(options.rounds));
  options.warmup = Math.max(0, Math.round(options.warmup));
  options.seed = Math.round(options.seed);
  return options;
}

// --- Progress --------------------------------------------------------------------------------

const tty = process.stderr.isTTY === true;
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

function progressLine(text, final) {
  if (tty) process.stderr.write(`\r\x1b[2K${text}${final ? '\n' : ''}`);
  else if (final) process.stderr.write(`${text}\n`);
}

/** A short summary of a cell's result for the progress line. */
function headline(workload, result) {
  const f = (v, d = 0) => (Number.isFinite(v) ? v.toFixed(d) : '-');
  switch (workload) {
    case 'schedule-cancel-random':
    case 'schedule-cancel-fixed':
      return `schedule ${f(result.scheduleNs)} ns, cancel ${f(result.cancelNs)} ns`;
    case 'churn':
      return `${f(result.opNs)} ns/op`;
    case 'expiry-storm':
      return (
        `drain ${f(result.drain?.nsPerExpiration)} ns/exp, ` +
        `p99 ${f(result.lateness?.p99Ms, 2)} ms, early ${result.lateness?.early ?? '-'}` +
        (result.lateness?.complete === false ? `, only ${result.lateness.fired} fired` : '')
      );
    case 'memory':
      return `${f(result.bytesPerTimer, 1)} B/timer`;
    case 'steady-state':
      return `p99 ${f(result.p99Ms, 2)} ms, CPU ${f(result.cpuPercent, 1)} %, ${f(result.rate)}/s`;
    default:
      return '';
  }
}

// --- Cells -----------------------------------------------------------------------------------

function runJsCell(workload, peerId, options, onProgress) {
  return new Promise((resolve, reject) => {
    const child = fork(CELL, [], {
      execArgv: ['--expose-gc'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let settled = false;
    child.on('message', (message) => {
      if (message.type === 'progress') onProgress(message);
      else if (message.type === 'result') {
        settled = true;
        resolve(message.result);
      } else if (message.type === 'error') {
        settled = true;
        reject(new Error(message.message));
      }
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (!settled) reject(new Error(`cell exited with ${signal ?? code} before reporting`));
    });
    child.send({ workload, peer: peerId, options });
  });
}

function environment(jvm, loadAtStart) {
  const cpu = cpus();
  return {
    node: process.version,
    v8: process.versions.v8,
    platform: `${process.platform} ${process.arch}`,
    cpu: cpu[0]?.model?.trim() ?? 'unknown',
    cores: cpu.length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    loadAverageAtStart: loadAtStart.map((value) => Math.round(value * 100) / 100),
    java: jvm?.javaVersion ?? null,
    netty: jvm?.nettyVersion ?? null,
  };
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  if (!existsSync(join(ROOT, 'dist', 'index.js'))) {
    throw new Error('dist/ is missing: run `npm run build` first (npm run bench:timers does)');
  }
  const started = performance.now();
  const loadAtStart = loadavg();
  const [load] = loadAtStart;
  if (load > cpus().length / 2) {
    process.stderr.write(
      `Warning: the load average is ${load.toFixed(2)} on ${cpus().length} cores; other work ` +
        'on this machine will show in the numbers.\n',
    );
  }
  const wanted = ALL_PEERS.filter(
    (peer) => options.peers.includes(peer.id) && !options.skip.includes(peer.id),
  );
  const peers = wanted.map((peer) => ({
    id: peer.id,
    label: peer.label,
    short: peer.short,
    family: peer.family,
    describe: peer.describe,
    status: 'measured',
  }));
  let jvm;
  const nettyPeer = peers.find((peer) => peer.id === 'netty');
  if (nettyPeer !== undefined) {
    const found = findJvm();
    if (found.missing) {
      nettyPeer.status = 'skipped';
      nettyPeer.reason = found.missing;
      process.stderr.write(`Skipping Netty (JVM): ${found.missing}\n`);
    } else {
      try {
        jvm = { ...found, ...compileHarness(found) };
      } catch (err) {
        nettyPeer.status = 'skipped';
        nettyPeer.reason = err.message;
        process.stderr.write(`Skipping Netty (JVM): ${err.message}\n`);
      }
    }
  }
  const measured = peers.filter((peer) => peer.status === 'measured');
  const workloads = WORKLOADS.filter((workload) => options.workloads.includes(workload.id));
  const cellOptions = {
    n: options.n,
    ops: options.ops,
    rounds: options.rounds,
    warmup: options.warmup,
    seed: options.seed,
    fixedDelay: options.fixedDelay,
    stormWindow: options.stormWindow,
    steadyRate: options.steadyRate,
    steadySeconds: options.steadySeconds,
    steadyWarmup: options.steadyWarmup,
  };
  const total = workloads.length * measured.length;
  const width = String(total).length;
  let done = 0;
  const results = {};
  process.stderr.write(
    `Timer benchmarks: ${workloads.length} workloads x ${measured.length} peers, N = ${options.n.toLocaleString('en-US')}\n`,
  );
  for (const workload of workloads) {
    results[workload.id] = {};
    for (const peer of measured) {
      done++;
      const prefix = `[${String(done).padStart(width)}/${total}] ${workload.id} · ${peer.label}`;
      const t0 = performance.now();
      progressLine(`${prefix} ...`, false);
      const onProgress = ({ step, of }) =>
        progressLine(
          `${prefix} ... ${of ? `step ${step}/${of}` : `step ${step}`}, ${seconds(performance.now() - t0)}`,
          false,
        );
      try {
        const result =
          peer.id === 'netty'
            ? await runJvmCell(jvm, workload.id, cellOptions, onProgress)
            : await runJsCell(workload.id, peer.id, cellOptions, onProgress);
        // The 1-minute load average after the cell: other work on the machine shows here.
        result.loadAverage = Math.round(loadavg()[0] * 100) / 100;
        results[workload.id][peer.id] = result;
        progressLine(
          `${prefix}: ${headline(workload.id, result)} (${seconds(performance.now() - t0)})`,
          true,
        );
      } catch (err) {
        results[workload.id][peer.id] = { error: err.message };
        progressLine(`${prefix}: FAILED ${err.message.split('\n')[0]}`, true);
      }
    }
  }
  const metrics = collectMetrics(results);
  const ratios = ratiosOf(metrics);
  const env = environment(jvm, loadAtStart);
  env.loadAverageAtEnd = loadavg().map((value) => Math.round(value * 100) / 100);
  const report = {
    schema: 'tickwheel-bench-timers/1',
    date: new Date().toISOString(),
    durationSeconds: Math.round((performance.now() - started) / 1000),
    environment: env,
    options: { ...cellOptions, workloads: workloads.map((w) => w.id) },
    ratioMeaning:
      'ratios[metric][row][column] = value(column) / value(row): how many times cheaper the row ' +
      'peer is than the column peer (every metric is lower-is-better)',
    peers,
    workloads: workloads.map(({ id, title, describe, metrics: m }) => ({
      id,
      title,
      describe,
      metrics: m.map(({ id: metricId, label, unit }) => ({ id: metricId, label, unit })),
    })),
    results,
    metrics,
    ratios,
    targets: [],
  };
  report.targets = evaluateTargets(results, metrics, ratios);
  process.stdout.write(`\n${formatReport(report)}\n\n`);
  mkdirSync(options.out, { recursive: true });
  const written = [join(options.out, 'timers.json')];
  writeFileSync(written[0], `${JSON.stringify(report, null, 2)}\n`);
  for (const [name, svg] of Object.entries(chartsOf(report))) {
    const file = join(options.out, name);
    writeFileSync(file, svg);
    written.push(file);
  }
  process.stdout.write(
    `Wrote ${written.map((file) => relative(process.cwd(), file)).join(', ')} ` +
      `in ${seconds(performance.now() - started)}\n`,
  );
}

main().catch((err) => {
  process.stderr.write(`${err.stack ?? err}\n`);
  process.exit(1);
});
