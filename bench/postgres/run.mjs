/**
 * `npm run bench:postgres`: tickwheel's queue on PostgreSQL and the PostgreSQL delay queues
 * users would pick instead of it, pg-boss and Graphile Worker, on the same throwaway PostgreSQL
 * in the same run. See bench/README.md ("PostgreSQL peers") for what each cell measures.
 *
 * Each cell runs on each peer in a forked cell.mjs, on a database made for it and dropped after
 * it; the peers take turns cell by cell. Writes <out>/postgres-peers.json and .md
 * (postgres-peers-partial.* in bench/results when a peer was skipped or a cell failed).
 */

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { URL, fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { postgresInstalled, startPostgres } from '../../scripts/postgres.mjs';
import { forkCell } from '../cell-process.mjs';
import { runMain } from '../main.mjs';
import { ROOT, parseCount, parseList } from '../queue/options.mjs';
import { findPackage, loadPackage } from './deps.mjs';
import { measureFloors } from './floors.mjs';
import * as graphile from './graphile-peer.mjs';
import * as pgBoss from './pg-boss-peer.mjs';
import { renderMarkdown } from './report.mjs';
import * as tickwheel from './tickwheel-peer.mjs';

const CELL = fileURLToPath(new URL('./cell.mjs', import.meta.url));
const PEER_MODULES = { tickwheel, 'pg-boss': pgBoss, graphile };
export const PEERS = Object.keys(PEER_MODULES);
/** The cells in the order they run; soak only with --soak-minutes. */
export const CELLS = [
  'floors',
  'schedule-single',
  'schedule-concurrent',
  'schedule-batched',
  'lateness',
  'burst',
  'pending',
  'soak',
];
const LATENESS_MODES = ['low-latency', 'default'];

export const HELP = `Usage: npm run bench:postgres -- [options]
       node bench/postgres/run.mjs [options]

tickwheel's queue on PostgreSQL, pg-boss and Graphile Worker on the same PostgreSQL, in the
same run. tickwheel is this checkout's dist/ (npm run build first); the other peers are found in
the project's node_modules or in TICKWHEEL_BENCH_DEPS (bench/README.md, "PostgreSQL peers").

  --peers <list>            ${PEERS.join(',')} (default all)
  --only <list>             cells (default all but soak):
                              floors            what this PostgreSQL does at best: bare
                                                statements, one a call and 1,000 rows a
                                                statement (once, no peer)
                              schedule-single   N delayed messages, one awaited schedule each
                              schedule-concurrent  N delayed messages from C callers at once,
                                                each awaiting one schedule at a time
                              schedule-batched  N delayed messages in batches
                              lateness          a steady rate due, low-latency and default polling
                              burst             N due within the same second
                              pending           N far-future messages: disk bytes, node RSS
                              soak              schedule/deliver/ack for --soak-minutes
  --single <count>          schedule-single messages (default 2000)
  --concurrent <count>      schedule-concurrent messages (default 20000)
  --callers <count>         schedule-concurrent callers (default 64)
  --batched <count>         schedule-batched messages (default 100k)
  --batch <count>           messages a batch, every batched schedule (default 1000)
  --warmup <count>          schedule cells: messages scheduled by the path measured before
                            measuring, due later (default 2000; 0: none)
  --rate <per s>            lateness: messages due a second (default 1000)
  --lateness-seconds <s>    lateness: how long (default 30)
  --lead <ms>               lateness: how far ahead each is scheduled (default 2000)
  --drain-seconds <s>       lateness, soak: wait this long past the last due time (default 30)
  --burst <count>           burst messages (default 100k)
  --burst-timeout <s>       burst: give up this long after the first due time (default 300)
  --burst-lead <ms>         burst: first due time after the start of scheduling
                            (default 5000 + 0.25 ms a message)
  --pending <count>         pending messages (default 1M)
  --soak-minutes <min>      run the soak cell this long (default 0: off; 30 for the half-hour soak)
  --soak-rate <per s>       soak: messages a second (default 200)
  --soak-sample <s>         soak: seconds between two samples of the tables (default 60)
  --tickwheel-concurrency <n>  tickwheel consume() concurrency (default 10)
  --tickwheel-prefetch <n>  tickwheel consume() prefetch: received ahead of a free handler
                            (default 500, as Graphile Worker's local queue; off: none)
  --pgboss-batch <count>    pg-boss work() batchSize (default 5000)
  --graphile-concurrency <n>  Graphile Worker concurrency (default 10)
  --graphile-poll-ms <ms>   Graphile Worker low-latency pollInterval (default 100)
  --graphile-local-queue <size>  Graphile Worker localQueue.size (default 500; off: none, its
                            own default)
  --graphile-complete-batch <ms>  Graphile Worker completeJobBatchDelay (default 250; off: none,
                            its own default)
  --note <text>             a note on the run for the report (the machine, what else ran)
  --out <dir>               where postgres-peers.json and .md go (default bench/results)
  --from <json>             measure nothing: print the report of a saved run again
  --help
`;

const DEFAULTS = {
  single: '2000',
  concurrent: '20000',
  callers: '64',
  batched: '100k',
  batch: '1000',
  warmup: '2000',
  rate: '1000',
  'lateness-seconds': '30',
  lead: '2000',
  'drain-seconds': '30',
  burst: '100k',
  'burst-timeout': '300',
  pending: '1M',
  'soak-minutes': '0',
  'soak-rate': '200',
  'soak-sample': '60',
  'tickwheel-concurrency': '10',
  'tickwheel-prefetch': '500',
  'pgboss-batch': '5000',
  'graphile-concurrency': '10',
  'graphile-poll-ms': '100',
  'graphile-local-queue': '500',
  'graphile-complete-batch': '250',
};

export function parseOptions(argv) {
  const stringOption = { type: 'string' };
  const { values: given } = parseArgs({
    args: argv,
    options: {
      ...Object.fromEntries(Object.keys(DEFAULTS).map((name) => [name, stringOption])),
      peers: stringOption,
      only: stringOption,
      'burst-lead': stringOption,
      note: { type: 'string', multiple: true },
      out: stringOption,
      from: stringOption,
      help: { type: 'boolean' },
    },
  });
  const values = { ...DEFAULTS, ...given };
  const count = (name) => parseCount(name, values[name]);
  // A fraction of a minute is allowed, for the smoke test.
  const soakMinutes = Number(values['soak-minutes']);
  if (!Number.isFinite(soakMinutes) || soakMinutes < 0) {
    throw new Error(`--soak-minutes takes a number of minutes, got ${values['soak-minutes']}`);
  }
  let cells =
    given.only === undefined
      ? CELLS.filter((cell) => cell !== 'soak' || soakMinutes > 0)
      : parseList('only', given.only, CELLS);
  if (cells.includes('soak') && soakMinutes === 0) {
    throw new Error('--only soak needs --soak-minutes');
  }
  cells = CELLS.filter((cell) => cells.includes(cell));
  return {
    help: given.help === true,
    from: given.from,
    peers: given.peers === undefined ? PEERS : parseList('peers', given.peers, PEERS),
    cells,
    out: given.out ?? join(ROOT, 'bench', 'results'),
    outGiven: given.out !== undefined,
    notes: given.note ?? [],
    cellOptions: {
      single: count('single'),
      concurrent: count('concurrent'),
      callers: count('callers'),
      batched: count('batched'),
      batch: count('batch'),
      warmup: values.warmup === '0' ? 0 : count('warmup'),
      rate: count('rate'),
      latenessSeconds: count('lateness-seconds'),
      leadMs: count('lead'),
      drainSeconds: count('drain-seconds'),
      burst: count('burst'),
      burstTimeoutSeconds: count('burst-timeout'),
      burstLeadMs: given['burst-lead'] === undefined ? undefined : count('burst-lead'),
      pending: count('pending'),
      soakMinutes,
      soakRate: count('soak-rate'),
      soakSampleSeconds: count('soak-sample'),
      tickwheelConcurrency: count('tickwheel-concurrency'),
      tickwheelPrefetch: values['tickwheel-prefetch'] === 'off' ? 0 : count('tickwheel-prefetch'),
      pgbossBatch: count('pgboss-batch'),
      graphileConcurrency: count('graphile-concurrency'),
      graphilePollMs: count('graphile-poll-ms'),
      graphileLocalQueue:
        values['graphile-local-queue'] === 'off' ? 0 : count('graphile-local-queue'),
      graphileCompleteBatchMs:
        values['graphile-complete-batch'] === 'off' ? -1 : count('graphile-complete-batch'),
    },
  };
}

// ---- progress and processes ----------------------------------------------------------------

const runStarted = performance.now();

export function log(line) {
  const seconds = Math.floor((performance.now() - runStarted) / 1000);
  const clock = `${String(Math.floor(seconds / 60)).padStart(2, '0')}:${String(seconds % 60).padStart(2, '0')}`;
  process.stdout.write(`[${clock}] ${line}\n`);
}

const children = new Set();
let server;

async function cleanup() {
  for (const child of children) child.kill('SIGKILL');
  await server?.stop();
  server = undefined;
}

/** Forks cell.mjs with `request`; resolves with its result, rejects with its error. */
function runCell(label, request) {
  return forkCell(CELL, request, { onProgress: (text) => log(`${label}: ${text}`), children });
}

/** Runs fn(url) on a database made for it, dropped afterwards whatever happens. */
async function withDatabase(admin, name, fn) {
  await admin.query(`drop database if exists ${name} with (force)`);
  await admin.query(`create database ${name}`);
  try {
    return await fn(server.url.replace(/\/postgres$/, `/${name}`));
  } finally {
    await admin.query(`drop database if exists ${name} with (force)`);
  }
}

async function runPeerCell(admin, options, cell, peer, mode) {
  const label = `${cell}${mode === undefined ? '' : ` (${mode})`} ${peer}`;
  log(`${label}: start`);
  const started = performance.now();
  try {
    const result = await withDatabase(admin, `bench_${cell.replaceAll('-', '_')}`, (url) =>
      runCell(label, {
        peer,
        cell,
        url,
        postgresPid: server.pid,
        options: { ...options.cellOptions, mode },
      }),
    );
    log(`${label}: done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    return result;
  } catch (err) {
    log(`${label}: FAILED: ${err.message.split('\n')[0]}`);
    return { error: err.message };
  }
}

/** The floors cell, in this process (it holds no peer); an error is kept as its result. */
async function runFloors(admin) {
  log('floors: start');
  try {
    const floors = await withDatabase(admin, 'bench_floors', (url) =>
      measureFloors(url, server.pid),
    );
    log('floors: done');
    return floors;
  } catch (err) {
    log(`floors: FAILED: ${err.message.split('\n')[0]}`);
    return { error: err.message };
  }
}

// ---- the run -------------------------------------------------------------------------------

function machine() {
  return {
    cpus: cpus().length,
    cpu: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
  };
}

async function postgresSettings(admin) {
  const { rows } = await admin.query(
    `select name, current_setting(name) as setting from pg_settings
      where name in ('shared_buffers', 'synchronous_commit', 'fsync', 'wal_level',
                     'max_wal_size', 'checkpoint_timeout', 'autovacuum', 'work_mem')`,
  );
  const settings = Object.fromEntries(rows.map((row) => [row.name, row.setting]));
  const version = (await admin.query('show server_version')).rows[0].server_version;
  return { version, settings };
}

export async function main(argv) {
  const options = parseOptions(argv);
  if (options.help) {
    process.stdout.write(HELP);
    return 0;
  }
  if (options.from !== undefined) {
    const saved = JSON.parse(readFileSync(options.from, 'utf8'));
    saved.meta.notes.push(...options.notes);
    process.stdout.write(renderMarkdown(saved));
    return 0;
  }
  if (!postgresInstalled()) {
    throw new Error('PostgreSQL is not installed (scripts/postgres.mjs found no initdb)');
  }
  const pg = findPackage('pg');
  if (pg.missing !== undefined) throw new Error(pg.missing);
  const skipped = {};
  for (const peer of options.peers) {
    const why = PEER_MODULES[peer].unavailable();
    if (why !== undefined) {
      skipped[peer] = `skipped: ${why}`;
      log(`${peer} ${skipped[peer]}`);
    }
  }
  const load = loadavg()[0];
  const notes = [...options.notes];
  if (load > cpus().length / 2) {
    notes.push(`the machine was busy at the start (load average ${load.toFixed(1)})`);
  }
  server = await startPostgres();
  const { Client } = loadPackage('pg');
  const admin = new Client({ connectionString: server.url });
  await admin.connect();
  try {
    const results = {
      schema: 'tickwheel-bench-postgres-peers/1',
      meta: {
        date: new Date().toISOString(),
        argv,
        node: process.versions.node,
        platform: `${process.platform} ${release()}`,
        machine: machine(),
        loadAverage: { start: load },
        postgres: await postgresSettings(admin),
        peers: Object.fromEntries(
          options.peers.map((peer) => [
            peer,
            skipped[peer] ?? { version: PEER_MODULES[peer].version() },
          ]),
        ),
        notes,
      },
      options: { peers: options.peers, cells: options.cells, ...options.cellOptions },
      cells: {},
    };
    for (const cell of options.cells) {
      if (cell === 'floors') {
        results.floors = await runFloors(admin);
        continue;
      }
      const modes = cell === 'lateness' ? LATENESS_MODES : [undefined];
      for (const mode of modes) {
        const key = mode === undefined ? cell : `${cell} (${mode})`;
        results.cells[key] = {};
        for (const peer of options.peers) {
          results.cells[key][peer] =
            skipped[peer] !== undefined
              ? { skipped: skipped[peer] }
              : await runPeerCell(admin, options, cell, peer, mode);
        }
      }
    }
    results.meta.loadAverage.end = loadavg()[0];
    const markdown = renderMarkdown(results);
    process.stdout.write(`\n${markdown}`);
    const failed =
      results.floors?.error !== undefined ||
      Object.values(results.cells).some((byPeer) =>
        Object.values(byPeer).some((result) => result.error !== undefined),
      );
    // A run that left a peer out, or lost a cell, never replaces the committed run's files.
    const whole = !failed && Object.keys(skipped).length === 0;
    const base = options.outGiven || whole ? 'postgres-peers' : 'postgres-peers-partial';
    mkdirSync(options.out, { recursive: true });
    for (const [file, text] of [
      [`${base}.json`, `${JSON.stringify(results, null, 2)}\n`],
      [`${base}.md`, markdown],
    ]) {
      writeFileSync(join(options.out, file), text);
      log(`wrote ${join(options.out, file)}`);
    }
    return failed ? 1 : 0;
  } finally {
    await admin.end();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) runMain(main, cleanup, log);
