/**
 * `npm run bench:schedules`: what 10,000 recurring schedules cost, on tickwheel's embedded queue
 * and on BullMQ's job schedulers (a local redis-server), measured in the same run. See
 * bench/README.md ("Recurring schedules benchmark").
 *
 * Phases, each on each peer in a process of its own (cell.mjs), peer after peer:
 *   armed   memory and idle CPU of an open queue with none, then with n schedules that are armed
 *           but not due; the time and CPU it took to create them
 *   reopen  a cold open of what `armed` left (BullMQ: redis-server restarted on its AOF)
 *   firing  n schedules firing every minute, consumed and acked: CPU per minute and occurrence
 * At the end: a table with ratios, bench/results/schedules.json and schedules.md.
 */

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, tmpdir, totalmem } from 'node:os';
import { join, relative } from 'node:path';
import { URL, fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { forkCell } from '../cell-process.mjs';
import { findBullmq } from '../queue/bullmq-peer.mjs';
import { redisServerVersion, startRedis, stopAllRedis } from '../queue/redis-server.mjs';
import { formatBytes, formatMs, formatNumber } from '../queue/stats.mjs';
import { redisUsage } from './bullmq-peer.mjs';
import { INTERVALS_MS, TIME_ZONES, mixCounts } from './specs.mjs';
import { runMain } from '../main.mjs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CELL = fileURLToPath(new URL('./cell.mjs', import.meta.url));
const PHASES = ['armed', 'reopen', 'firing'];
const PEERS = ['tickwheel', 'bullmq'];

const HELP = `Usage: npm run bench:schedules -- [options]
       node --expose-gc bench/schedules/run.mjs [options]

  --n <count>              schedules (default 10000)
  --phases <list>          armed,reopen,firing (default all; reopen needs armed)
  --peers <list>           tickwheel,bullmq (default both; BullMQ needs bullmq and redis-server)
  --idle-seconds <s>       each idle CPU window, with none and with n schedules (default 40)
  --periods <count>        firing periods measured after one of warm-up (default 2)
  --in-flight <count>      schedules being created at once (default 64)
  --concurrency <count>    consumer concurrency of both peers (default 1000)
  --start-delay <minutes>  the armed schedules' first occurrence at the earliest (default 30)
  --quick                  a smoke run: 200 schedules, 2 s idle windows, firing every second
                           (a 6-field cron) for 2 s; its numbers mean nothing
  --out <dir>              where schedules.json and schedules.md go (default bench/results)
  --data-dir <dir>         where data directories are made (default: the OS temp dir)
  --from <schedules.json>  measure nothing: print the table of a saved run and write its .md
  --help
`;

// ---- options -------------------------------------------------------------------------------

function parseCount(name, text) {
  const match = /^([\d_.]+(?:e\d+)?)([kK]?)$/.exec(String(text));
  const value = match ? Number(match[1].replaceAll('_', '')) * (match[2] === '' ? 1 : 1000) : NaN;
  if (!Number.isFinite(value) || value <= 0) {
    throw new Error(`--${name} takes a positive number (10000, 10k, 1e4), got ${text}`);
  }
  return value;
}

function parseList(name, text, known) {
  const ids = String(text)
    .split(',')
    .map((id) => id.trim())
    .filter((id) => id !== '');
  const unknown = ids.filter((id) => !known.includes(id));
  if (unknown.length > 0) {
    throw new Error(`--${name}: unknown ${unknown.join(', ')}; known: ${known.join(', ')}`);
  }
  return ids;
}

export function parseOptions(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      n: { type: 'string' },
      phases: { type: 'string' },
      peers: { type: 'string' },
      'idle-seconds': { type: 'string' },
      periods: { type: 'string' },
      'in-flight': { type: 'string' },
      concurrency: { type: 'string' },
      'start-delay': { type: 'string' },
      quick: { type: 'boolean', default: false },
      out: { type: 'string' },
      'data-dir': { type: 'string' },
      from: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  const quick = values.quick;
  const count = (name, quickDefault, fullDefault) =>
    values[name] === undefined
      ? quick
        ? quickDefault
        : fullDefault
      : Math.round(parseCount(name, values[name]));
  const phases = values.phases === undefined ? PHASES : parseList('phases', values.phases, PHASES);
  if (phases.includes('reopen') && !phases.includes('armed')) {
    throw new Error('--phases: reopen opens what armed left, so it needs armed too');
  }
  return {
    help: values.help,
    quick,
    n: count('n', 200, 10_000),
    phases,
    peers: values.peers === undefined ? PEERS : parseList('peers', values.peers, PEERS),
    idleSeconds: count('idle-seconds', 2, 40),
    periods: count('periods', 2, 2),
    inFlight: count('in-flight', 64, 64),
    concurrency: count('concurrency', 1000, 1000),
    startDelayMinutes: count('start-delay', 30, 30),
    // Every minute; a quick run fires every second so that it ends in seconds.
    fireCron: quick ? '* * * * * *' : '* * * * *',
    periodMs: quick ? 1_000 : 60_000,
    settleMs: quick ? 200 : 2_000,
    out: values.out ?? join(ROOT, 'bench', 'results'),
    dataDir: values['data-dir'] ?? tmpdir(),
    from: values.from,
  };
}

// ---- progress ------------------------------------------------------------------------------

const runStarted = performance.now();

function log(line) {
  const seconds = (performance.now() - runStarted) / 1000;
  const clock = `${String(Math.floor(seconds / 60)).padStart(2, '0')}:${String(Math.floor(seconds % 60)).padStart(2, '0')}`;
  process.stdout.write(`[${clock}] ${line}\n`);
}

// ---- cells ---------------------------------------------------------------------------------

const children = new Set();
const dataDirs = new Set();

function makeDataDir(options, label) {
  mkdirSync(options.dataDir, { recursive: true });
  const dir = mkdtempSync(join(options.dataDir, `tickwheel-bench-schedules-${label}-`));
  dataDirs.add(dir);
  return dir;
}

function removeDataDir(dir) {
  dataDirs.delete(dir);
  rmSync(dir, { recursive: true, force: true });
}

/** Forks cell.mjs with `request`; resolves with its result, rejects with its error. */
function runCell(label, request) {
  return forkCell(CELL, request, { onProgress: (text) => log(`${label}: ${text}`), children });
}

/** Runs a cell and logs how it went; a failure is recorded as { error } and the run goes on. */
async function attempt(label, work) {
  log(`${label}: start`);
  const started = performance.now();
  try {
    const result = await work();
    log(`${label}: done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    return result;
  } catch (err) {
    log(`${label}: FAILED: ${err.message.split('\n')[0]}`);
    return { error: err.message };
  }
}

function cellOptions(options) {
  return {
    n: options.n,
    idleSeconds: options.idleSeconds,
    settleMs: options.settleMs,
    startDelayMs: options.startDelayMinutes * 60_000,
    inFlight: options.inFlight,
    concurrency: options.concurrency,
    fireCron: options.fireCron,
    periodMs: options.periodMs,
    periods: options.periods,
  };
}

/** armed, then reopen on what it left: one data directory (tickwheel) or AOF (BullMQ). */
async function armedAndReopen(options, peer, phases) {
  const base = cellOptions(options);
  const out = {};
  if (peer === 'tickwheel') {
    const dir = makeDataDir(options, 'armed');
    try {
      out.armed = await attempt(`armed ${peer}`, () =>
        runCell(`armed ${peer}`, { peer, phase: 'armed', options: { ...base, dir } }),
      );
      if (phases.includes('reopen') && out.armed.error === undefined) {
        out.reopen = await attempt(`reopen ${peer}`, () =>
          runCell(`reopen ${peer}`, { peer, phase: 'reopen', options: { ...base, dir } }),
        );
      }
    } finally {
      removeDataDir(dir);
    }
    return out;
  }
  let redis;
  try {
    redis = await startRedis();
    dataDirs.add(redis.dir);
    const port = redis.port;
    out.armed = await attempt(`armed ${peer}`, () =>
      runCell(`armed ${peer}`, { peer, phase: 'armed', options: { ...base, port } }),
    );
    if (phases.includes('reopen') && out.armed.error === undefined) {
      out.reopen = await attempt(`reopen ${peer}`, async () => {
        // SHUTDOWN NOSAVE: the AOF is flushed as it stops; the restart loads it.
        await redis.stop({ removeDir: false });
        const dir = redis.dir;
        redis = await startRedis({ dir });
        const loaded = await redisUsage(redis.port);
        const cell = await runCell(`reopen ${peer}`, {
          peer,
          phase: 'reopen',
          options: { ...base, port: redis.port },
        });
        return {
          ...cell,
          restart: { ms: Math.round(redis.readyMs * 10) / 10, cpuMs: loaded.cpuMs },
        };
      });
    }
  } catch (err) {
    out.armed ??= { error: err.message };
  } finally {
    if (redis !== undefined) {
      await redis.stop({ removeDir: false });
      removeDataDir(redis.dir);
    }
  }
  return out;
}

async function firingCell(options, peer) {
  const base = cellOptions(options);
  return attempt(`firing ${peer}`, async () => {
    if (peer === 'tickwheel') {
      const dir = makeDataDir(options, 'firing');
      try {
        return await runCell(`firing ${peer}`, {
          peer,
          phase: 'firing',
          options: { ...base, dir },
        });
      } finally {
        removeDataDir(dir);
      }
    }
    const redis = await startRedis();
    try {
      return await runCell(`firing ${peer}`, {
        peer,
        phase: 'firing',
        options: { ...base, port: redis.port },
      });
    } finally {
      await redis.stop();
    }
  });
}

// ---- figures -------------------------------------------------------------------------------

const usable = (result) => result !== undefined && result.error === undefined;

/** RSS and heap + array buffers of a memory snapshot. */
const rssOf = (memory) => memory.rss;
const heapOf = (memory) => memory.heapUsed + memory.arrayBuffers;

/**
 * The headline figures of one peer, all lower-is-better: bytes per schedule, CPU ms per minute,
 * µs per occurrence or schedule, ms. For BullMQ every figure is the Node process plus
 * redis-server (the split is in `parts`).
 */
export function figuresOf(peer, cells) {
  const figures = {};
  const parts = {};
  const { armed, reopen, firing } = cells;
  if (usable(armed)) {
    const n = armed.created.n;
    const server = armed.server;
    const serverRss = server.none === null ? 0 : server.armed.rss - server.none.rss;
    const serverUsed = server.none === null ? 0 : server.armed.usedMemory - server.none.usedMemory;
    const processRss = rssOf(armed.memory.armed) - rssOf(armed.memory.none);
    const processHeap = heapOf(armed.memory.armed) - heapOf(armed.memory.none);
    figures.rssPerSchedule = (processRss + serverRss) / n;
    figures.heapPerSchedule = (processHeap + serverUsed) / n;
    parts.rssPerSchedule = { process: processRss / n, server: serverRss / n };
    parts.heapPerSchedule = { process: processHeap / n, server: serverUsed / n };
    figures.rssTotalNone = rssOf(armed.memory.none) + (server.none?.rss ?? 0);
    figures.rssTotalArmed = rssOf(armed.memory.armed) + (server.armed?.rss ?? 0);
    figures.idleNone = armed.idle.none.cpuMsPerMinute.total;
    figures.idleArmed = armed.idle.armed.cpuMsPerMinute.total;
    figures.idleAttributable = figures.idleArmed - figures.idleNone;
    parts.idleNone = armed.idle.none.cpuMsPerMinute;
    parts.idleArmed = armed.idle.armed.cpuMsPerMinute;
    figures.createMs = armed.created.ms;
    figures.createCpuUsPerSchedule = armed.created.cpuUsPerSchedule;
    parts.createCpuMs = { process: armed.created.processCpuMs, server: armed.created.serverCpuMs };
    figures.diskBytes = armed.disk.bytes;
    if (usable(reopen)) {
      // A fresh process: what opening the queue added, with n schedules and with none.
      const opened = (of, memory, before) => of(memory) - of(before);
      const emptyRss = opened(rssOf, armed.memory.none, armed.memory.beforeOpen);
      const emptyHeap = opened(heapOf, armed.memory.none, armed.memory.beforeOpen);
      const fullRss = opened(rssOf, reopen.memory.open, reopen.memory.beforeOpen);
      const fullHeap = opened(heapOf, reopen.memory.open, reopen.memory.beforeOpen);
      const reServerRss = server.none === null ? 0 : reopen.server.rss - server.none.rss;
      const reServerUsed =
        server.none === null ? 0 : reopen.server.usedMemory - server.none.usedMemory;
      figures.reopenRssPerSchedule = (fullRss - emptyRss + reServerRss) / n;
      figures.reopenHeapPerSchedule = (fullHeap - emptyHeap + reServerUsed) / n;
      parts.reopenRssPerSchedule = { process: (fullRss - emptyRss) / n, server: reServerRss / n };
      parts.reopenHeapPerSchedule = {
        process: (fullHeap - emptyHeap) / n,
        server: reServerUsed / n,
      };
      const restartMs = reopen.restart?.ms ?? 0;
      figures.openMs = reopen.open.ms + restartMs;
      figures.openCpuMs = reopen.open.cpuMs + (reopen.restart?.cpuMs ?? 0);
      parts.openMs = { process: reopen.open.ms, server: restartMs };
      parts.openCpuMs = { process: reopen.open.cpuMs, server: reopen.restart?.cpuMs ?? 0 };
    }
  }
  if (usable(firing)) {
    figures.firingCpuPerMinute = firing.window.cpuMsPerMinute.total;
    figures.firingCpuUsPerOccurrence = firing.window.cpuUsPerOccurrence.total;
    parts.firingCpuPerMinute = firing.window.cpuMsPerMinute;
    parts.firingCpuUsPerOccurrence = firing.window.cpuUsPerOccurrence;
    figures.firingDelivered = firing.window.delivered;
    figures.firingExpected = firing.window.expected;
    figures.firingP50Ms = firing.lateness.p50Ms;
    figures.firingP99Ms = firing.lateness.p99Ms;
    figures.firingMaxMs = firing.lateness.maxMs;
  }
  for (const [key, value] of Object.entries(figures)) figures[key] = roundFigure(value);
  for (const split of Object.values(parts)) {
    for (const [key, value] of Object.entries(split)) split[key] = roundFigure(value);
  }
  return { peer, figures, parts };
}

function roundFigure(value) {
  if (typeof value !== 'number' || !Number.isFinite(value)) return null;
  return Math.abs(value) >= 100 ? Math.round(value) : Math.round(value * 100) / 100;
}

/** How many times less of it tickwheel needs (BullMQ / tickwheel); null without both. */
function ratio(ours, theirs) {
  if (typeof ours !== 'number' || typeof theirs !== 'number' || ours <= 0 || theirs <= 0) {
    return null;
  }
  return Math.round((theirs / ours) * 100) / 100;
}

// ---- the table -----------------------------------------------------------------------------

const ms = (value) => formatMs(value);
const digits = (value) => (Math.abs(value) < 10 ? 2 : 1);
const cpuMin = (value) => (value === null ? '-' : `${formatNumber(value, digits(value))} ms`);
const us = (value) => (value === null ? '-' : `${formatNumber(value, digits(value))} µs`);
const mib = (value) => (value === null ? '-' : `${formatNumber(value / 2 ** 20, 1)} MiB`);

/** " (node X + redis Y)" for BullMQ's split figures. */
function split(parts, key, format) {
  const part = parts?.[key];
  if (part === undefined || part.server === 0 || part.server === undefined) return '';
  return ` (node ${format(part.process)} + redis ${format(part.server)})`;
}

export function tableRows(results) {
  const { options } = results;
  const n = formatNumber(options.n);
  const ours = results.figures.tickwheel;
  const theirs = results.figures.bullmq;
  const rows = [];
  const row = (section, metric, key, format, { compare = true, bullmqParts = true } = {}) => {
    const cell = (entry) => {
      if (entry === undefined) return '-';
      if (entry.skipped !== undefined) return 'not run';
      const value = entry.figures?.[key];
      if (value === undefined || value === null) return '-';
      return `${format(value)}${bullmqParts ? split(entry.parts, key, format) : ''}`;
    };
    const r = compare ? ratio(ours?.figures?.[key], theirs?.figures?.[key]) : null;
    rows.push([section, metric, cell(ours), cell(theirs), r === null ? '-' : `${r}x`]);
  };
  const memory = `memory, ${n} schedules`;
  row(
    memory,
    'RSS per schedule, same process (BullMQ: node + redis)',
    'rssPerSchedule',
    formatBytes,
  );
  row(
    memory,
    'heap + buffers per schedule (BullMQ: node heap + redis used_memory)',
    'heapPerSchedule',
    formatBytes,
  );
  row(memory, 'RSS per schedule, reopened in a fresh process', 'reopenRssPerSchedule', formatBytes);
  row(memory, 'heap + buffers per schedule, reopened', 'reopenHeapPerSchedule', formatBytes);
  row(memory, 'RSS in all with none (BullMQ: node + redis)', 'rssTotalNone', mib, {
    compare: false,
  });
  row(memory, `RSS in all with ${n}`, 'rssTotalArmed', mib);
  row(memory, 'on disk (data directory | AOF)', 'diskBytes', formatBytes);
  const idle = `idle CPU per minute (${options.idleSeconds} s windows)`;
  row(idle, 'with none', 'idleNone', cpuMin, { compare: false });
  row(idle, `with ${n}, none due`, 'idleArmed', cpuMin);
  row(idle, `what the ${n} add`, 'idleAttributable', cpuMin, {
    compare: false,
    bullmqParts: false,
  });
  const every = options.periodMs === 60_000 ? 'minute' : `${options.periodMs / 1000} s`;
  const fire = `firing: ${n} x cron '${options.fireCron}', consumed and acked`;
  const window = `${options.periods} x ${options.periodMs / 1000} s measured`;
  row(
    fire,
    `CPU per minute (${n} occurrences a ${every}; ${window})`,
    'firingCpuPerMinute',
    cpuMin,
  );
  row(fire, 'CPU per occurrence', 'firingCpuUsPerOccurrence', us);
  const delivered = (entry) =>
    typeof entry?.figures?.firingDelivered === 'number'
      ? `${formatNumber(entry.figures.firingDelivered)} / ${formatNumber(entry.figures.firingExpected)}`
      : entry?.skipped === undefined
        ? '-'
        : 'not run';
  rows.push([
    fire,
    'occurrences delivered in the window / expected',
    delivered(ours),
    delivered(theirs),
    '-',
  ]);
  row(fire, 'delivery lateness p50', 'firingP50Ms', ms, { compare: false });
  row(fire, 'delivery lateness p99', 'firingP99Ms', ms, { compare: false });
  row(fire, 'delivery lateness max', 'firingMaxMs', ms, { compare: false });
  const create = `create ${n} (${options.inFlight} at a time), reopen`;
  row(create, 'create: wall time', 'createMs', ms);
  row(create, 'create: CPU per schedule', 'createCpuUsPerSchedule', us);
  row(create, 'cold open (BullMQ: redis-server restart on its AOF + client)', 'openMs', ms);
  row(create, 'cold open: CPU', 'openCpuMs', ms);
  return rows;
}

function textTable(header, rows) {
  const widths = header.map((title, i) =>
    Math.max(title.length, ...rows.map((r) => String(r[i]).length)),
  );
  const line = (cells) =>
    cells
      .map((cell, i) => String(cell).padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

function markdownTable(header, rows) {
  const line = (cells) =>
    `| ${cells.map((cell) => String(cell).replaceAll('|', '\\|')).join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

const TABLE_HEADER = ['', 'metric', 'tickwheel', 'BullMQ', 'tickwheel needs x less'];

function machineLine(meta) {
  const load = meta.loadAverage;
  return `${meta.machine.cpus} x ${meta.machine.cpu}, ${meta.machine.memoryGiB} GiB, ${meta.platform}, Node ${meta.node}, tickwheel ${meta.tickwheel}${meta.commit ? ` (${meta.commit})` : ''}, redis-server ${meta.redis ?? '-'}, BullMQ ${meta.bullmq ?? '-'}; load average ${load.start.toFixed(1)} at start, ${load.end?.toFixed(1) ?? '-'} at end.`;
}

/** How the figures were made, for schedules.md (bench/README.md has the whole story). */
function methodText(results) {
  const { options } = results;
  const n = formatNumber(options.n);
  return [
    `- The mix of ${n} (idle and memory): half cron (every minute, every 5 minutes, hourly, daily, weekdays; in ${results.mix.timeZones.length} IANA time zones), half fixed intervals (1 min, 5 min, 15 min, 1 h, 1 day), all with a start ${options.startDelayMinutes} minutes or more ahead, so none fires while measured. Each holds its next occurrence (tickwheel: a durable message; BullMQ: a delayed job).`,
    '- tickwheel: DelayQueue.open({ dir }) with its defaults, putSchedule, a consumer (concurrency ' +
      `${options.concurrency}) in the same process. BullMQ: upsertJobScheduler with { pattern, tz, startDate } or { every, startDate } and { removeOnComplete: true } jobs, a Worker (same concurrency), on a redis-server of its own (AOF, fsync every second).`,
    '- Memory after two full GCs; "same process": before and after creating them; "reopened": what opening the queue added in a fresh process, minus what opening an empty one added. BullMQ adds redis-server (INFO memory used_memory, used_memory_rss) to its Node process.',
    '- CPU: process.cpuUsage() of the process (all its threads), plus redis-server INFO cpu (used_cpu_user + used_cpu_sys) for BullMQ, over the same wall-clock window, scaled to a minute.',
    '- Ratios: the BullMQ figure over the tickwheel figure (above 1: tickwheel needs less).',
  ].join('\n');
}

function report(results, out) {
  const rows = tableRows(results);
  const notes = results.meta.notes.map((note) => `- ${note}`).join('\n');
  process.stdout.write(`\n${machineLine(results.meta)}\n\n${textTable(TABLE_HEADER, rows)}\n\n`);
  if (notes !== '') process.stdout.write(`${notes}\n\n`);
  mkdirSync(out, { recursive: true });
  const written = [];
  const write = (name, text) => {
    writeFileSync(join(out, name), text);
    written.push(relative(process.cwd(), join(out, name)) || name);
  };
  write('schedules.json', `${JSON.stringify(results, null, 2)}\n`);
  write(
    'schedules.md',
    `# Recurring schedules benchmark, ${results.meta.date}\n\n${machineLine(results.meta)}\n\n` +
      `${markdownTable(TABLE_HEADER, rows)}\n\n${methodText(results)}\n${notes === '' ? '' : `\n${notes}\n`}`,
  );
  log(`wrote ${written.join(', ')}`);
  return JSON.stringify(results.cells).includes('"error"') ? 1 : 0;
}

// ---- main ----------------------------------------------------------------------------------

async function cleanup() {
  for (const child of children) child.kill('SIGKILL');
  await stopAllRedis();
  for (const dir of [...dataDirs]) removeDataDir(dir);
}

function availablePeers(options) {
  const notes = [];
  let peers = options.peers;
  const bullmq = findBullmq();
  const redis = redisServerVersion();
  if (peers.includes('bullmq') && (bullmq === undefined || redis === undefined)) {
    const missing = [
      bullmq === undefined ? 'bullmq (npm install -D bullmq, or TICKWHEEL_BENCH_DEPS)' : undefined,
      redis === undefined ? 'redis-server (apt-get install redis-server)' : undefined,
    ].filter(Boolean);
    notes.push(`BullMQ not run: ${missing.join(' and ')} not found; no BullMQ figures`);
    peers = peers.filter((peer) => peer !== 'bullmq');
  }
  return { peers, notes, bullmqVersion: bullmq?.version, redisVersion: redis };
}

function gitCommit() {
  try {
    const head = readFileSync(join(ROOT, '.git', 'HEAD'), 'utf8').trim();
    if (!head.startsWith('ref: ')) return head.slice(0, 7);
    return readFileSync(join(ROOT, '.git', head.slice(5)), 'utf8')
      .trim()
      .slice(0, 7);
  } catch {
    return null;
  }
}

export async function main(argv) {
  const parsed = parseOptions(argv);
  if (parsed.help) {
    process.stdout.write(HELP);
    return 0;
  }
  if (parsed.from !== undefined) {
    return report(JSON.parse(readFileSync(parsed.from, 'utf8')), parsed.out);
  }
  const { peers, notes, bullmqVersion, redisVersion } = availablePeers(parsed);
  const options = { ...parsed, peers };
  for (const note of notes) log(note);
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const results = {
    meta: {
      date: new Date().toISOString(),
      tickwheel: pkg.version,
      commit: gitCommit(),
      dist: process.env.TICKWHEEL_BENCH_DIST ?? null,
      node: process.versions.node,
      platform: `${process.platform} ${release()}`,
      machine: {
        cpus: cpus().length,
        cpu: cpus()[0]?.model ?? 'unknown',
        memoryGiB: Math.round(totalmem() / 2 ** 30),
      },
      loadAverage: { start: loadavg()[0] },
      redis: redisVersion ?? null,
      bullmq: bullmqVersion ?? null,
      notes,
    },
    options: {
      quick: options.quick,
      n: options.n,
      phases: options.phases,
      peers: options.peers,
      idleSeconds: options.idleSeconds,
      periods: options.periods,
      periodMs: options.periodMs,
      fireCron: options.fireCron,
      inFlight: options.inFlight,
      concurrency: options.concurrency,
      startDelayMinutes: options.startDelayMinutes,
    },
    mix: { counts: mixCounts(options.n), timeZones: TIME_ZONES, intervalsMs: INTERVALS_MS },
    cells: Object.fromEntries(PEERS.map((peer) => [peer, {}])),
    figures: {},
  };
  if (!options.peers.includes('bullmq'))
    results.cells.bullmq = { skipped: notes[0] ?? 'not asked' };
  if (!options.peers.includes('tickwheel')) results.cells.tickwheel = { skipped: 'not asked' };
  log(
    `schedules benchmark: ${options.phases.join(', ')} of ${formatNumber(options.n)} schedules on ${options.peers.join(', ')}${options.quick ? ' (quick)' : ''}`,
  );
  if (options.phases.includes('armed')) {
    const byPeer = {};
    for (const peer of options.peers)
      byPeer[peer] = await armedAndReopen(options, peer, options.phases);
    for (const peer of options.peers) Object.assign(results.cells[peer], byPeer[peer]);
  }
  if (options.phases.includes('firing')) {
    for (const peer of options.peers) results.cells[peer].firing = await firingCell(options, peer);
  }
  for (const peer of PEERS) {
    const cells = results.cells[peer];
    results.figures[peer] =
      cells.skipped === undefined ? figuresOf(peer, cells) : { skipped: cells.skipped };
  }
  for (const peer of options.peers) {
    const idle = results.cells[peer].armed?.idle;
    const fired = (idle?.none.delivered ?? 0) + (idle?.armed.delivered ?? 0);
    if (fired > 0) notes.push(`${peer}: ${fired} deliveries during the idle windows (want 0)`);
  }
  results.meta.loadAverage.end = loadavg()[0];
  return report(results, options.out);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) runMain(main, cleanup, log);
