/**
 * `npm run bench:sustained`: schedule → deliver → ack at a fixed rate, raised step by step until
 * lateness breaks, for tickwheel embedded, tickwheel over HTTP and BullMQ, in the same run. See
 * bench/README.md ("Sustained delivery") and sustained-workload.mjs for what a step is.
 *
 * Each peer runs all its steps in one cell process of its own (cells.mjs), one peer after the
 * other; `tickwheel serve` and redis-server are started here for their peer's cell and stopped
 * after it. Writes <out>/sustained.json and sustained.md.
 */

import { readFileSync } from 'node:fs';
import { cpus, loadavg, release, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { findBullmq } from './bullmq-peer.mjs';
import { cleanup, log, runPeerCell } from './cells.mjs';
import { ROOT, parseCount, parseList } from './options.mjs';
import { redisServerVersion } from './redis-server.mjs';
import { PEER_NAMES, renderMarkdown, summarise, writeResults } from './sustained-report.mjs';
import { runMain } from '../main.mjs';

export const SUSTAINED_PEERS = ['tickwheel', 'tickwheel-http', 'bullmq'];

const DEFAULT_RATES = '1k,2k,5k,10k,20k,40k,60k,80k,100k,120k,150k,200k';

export const HELP = `Usage: npm run bench:sustained -- [options]
       node bench/queue/sustained.mjs [options]

Schedule, deliver and ack at a fixed rate for a few seconds, then at the next rate, until the
p99 lateness passes the bound or the consumer falls behind; every peer in the same run.

  --rates <list>      deliveries a second of each step, rising (default ${DEFAULT_RATES})
  --seconds <s>       length of each step (default 5)
  --bound <ms>        a step holds with p99 lateness at most this (default 10)
  --lead <ms>         how long after its schedule each message is due (default 1000)
  --drain <ms>        how long past a step's last due time its deliveries are waited for
                      (default 10000; what is not delivered by then breaks the step)
  --peers <list>      ${SUSTAINED_PEERS.join(',')} (default all; BullMQ needs bullmq and
                      redis-server, see bench/README.md)
  --concurrency <n>   consumer concurrency, every peer (default 1000)
  --batch <n>         messages per producer batch: scheduleMany / addBulk (default 1000)
  --warmup <count>    messages through schedule, delivery and ack before the first step
                      (default 30000; 0: none)
  --keep-going        run every rate, also after a step broke
  --out <dir>         where sustained.json and sustained.md go (default bench/results)
  --data-dir <dir>    where the data directories are made (default: the OS temp dir)
  --profile           write .cpuprofile files of the tickwheel cells to <out>/profiles
  --from <json>       measure nothing: print the tables of a saved run again
  --help
`;

function positive(name, text) {
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) {
    throw new Error(`--${name} takes a positive number, got ${text}`);
  }
  return value;
}

/** Flags that leave the measurement as a full run makes it. */
const NEUTRAL_FLAGS = ['out', 'data-dir', 'from', 'help', 'keep-going', 'profile'];

const DEFAULTS = {
  rates: DEFAULT_RATES,
  seconds: '5',
  bound: '10',
  lead: '1000',
  drain: '10000',
  concurrency: '1000',
  batch: '1000',
  warmup: '30000',
};

export function parseOptions(argv) {
  const { values: given } = parseArgs({
    args: argv,
    options: {
      rates: { type: 'string' },
      seconds: { type: 'string' },
      bound: { type: 'string' },
      lead: { type: 'string' },
      drain: { type: 'string' },
      peers: { type: 'string' },
      concurrency: { type: 'string' },
      batch: { type: 'string' },
      warmup: { type: 'string' },
      'keep-going': { type: 'boolean' },
      profile: { type: 'boolean' },
      out: { type: 'string' },
      'data-dir': { type: 'string' },
      from: { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  const values = { ...DEFAULTS, ...given };
  const rates = String(values.rates)
    .split(',')
    .map((rate) => parseCount('rates', rate.trim()));
  if (rates.some((rate, i) => i > 0 && rate <= rates[i - 1])) {
    throw new Error(`--rates must rise from step to step, got ${values.rates}`);
  }
  const seconds = positive('seconds', values.seconds);
  if (rates[rates.length - 1] * seconds > 1e8) {
    throw new Error('--rates x --seconds: at most 100 million messages a step');
  }
  return {
    help: values.help === true,
    from: values.from,
    rates,
    seconds,
    boundMs: positive('bound', values.bound),
    leadMs: positive('lead', values.lead),
    drainMs: positive('drain', values.drain),
    peers:
      values.peers === undefined
        ? SUSTAINED_PEERS
        : parseList('peers', values.peers, SUSTAINED_PEERS),
    concurrency: parseCount('concurrency', values.concurrency),
    batch: parseCount('batch', values.batch),
    warmup: values.warmup === '0' ? 0 : parseCount('warmup', values.warmup),
    keepGoing: values['keep-going'] === true,
    profile: values.profile === true,
    out: values.out ?? join(ROOT, 'bench', 'results'),
    dataDir: values['data-dir'] ?? tmpdir(),
    // A run with other settings, written to the default place, must not replace the full run's
    // files: it writes sustained-custom.* there.
    resultsBase:
      values.out !== undefined || Object.keys(given).every((flag) => NEUTRAL_FLAGS.includes(flag))
        ? 'sustained'
        : 'sustained-custom',
  };
}

/** The peers this machine can run, and why any other was left out. */
function availablePeers(options) {
  const skipped = {};
  const bullmq = findBullmq();
  const redis = redisServerVersion();
  if (options.peers.includes('bullmq') && (bullmq === undefined || redis === undefined)) {
    const missing = [
      bullmq === undefined ? 'bullmq (see bench/README.md, TICKWHEEL_BENCH_DEPS)' : undefined,
      redis === undefined ? 'redis-server (apt-get install redis-server)' : undefined,
    ].filter(Boolean);
    skipped.bullmq = `skipped: ${missing.join(' and ')} not found`;
  }
  return { skipped, bullmqVersion: bullmq?.version, redisVersion: redis };
}

export async function main(argv) {
  const options = parseOptions(argv);
  if (options.help) {
    process.stdout.write(HELP);
    return 0;
  }
  if (options.from !== undefined) {
    process.stdout.write(renderMarkdown(JSON.parse(readFileSync(options.from, 'utf8'))));
    return 0;
  }
  const { skipped, bullmqVersion, redisVersion } = availablePeers(options);
  const load = loadavg()[0];
  const notes = Object.entries(skipped).map(([id, why]) => `${PEER_NAMES[id]} ${why}`);
  if (load > cpus().length / 2) {
    notes.push(`the machine was busy at the start (load average ${load.toFixed(1)})`);
  }
  for (const note of notes) log(note);
  const cellOptions = {
    rates: options.rates,
    seconds: options.seconds,
    boundMs: options.boundMs,
    leadMs: options.leadMs,
    drainMs: options.drainMs,
    concurrency: options.concurrency,
    batch: options.batch,
    warmup: options.warmup,
    keepGoing: options.keepGoing,
  };
  const results = {
    schema: 'tickwheel-bench-sustained/1',
    meta: {
      date: new Date().toISOString(),
      tickwheel: JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version,
      node: process.versions.node,
      platform: `${process.platform} ${release()}`,
      machine: {
        cpus: cpus().length,
        cpu: cpus()[0]?.model ?? 'unknown',
        memoryGiB: Math.round(totalmem() / 2 ** 30),
      },
      loadAverage: { start: load },
      redis: redisVersion ?? null,
      bullmq: bullmqVersion ?? null,
      dist: process.env.TICKWHEEL_BENCH_DIST ?? null,
      notes,
    },
    options: { peers: options.peers, ...cellOptions },
    peers: {},
  };
  for (const peer of options.peers) {
    if (skipped[peer] !== undefined) {
      results.peers[peer] = { skipped: skipped[peer] };
      continue;
    }
    const cell = await runPeerCell(options, 'sustained', peer, cellOptions, `sustained ${peer}`);
    results.peers[peer] = cell.error === undefined ? cell : { error: cell.error };
  }
  results.meta.loadAverage.end = loadavg()[0];
  summarise(results);
  const markdown = renderMarkdown(results);
  process.stdout.write(`\n${markdown}`);
  for (const file of writeResults(results, options.out, options.resultsBase)) log(`wrote ${file}`);
  return Object.values(results.peers).some((cell) => cell.error !== undefined) ? 1 : 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) runMain(main, cleanup, log);
