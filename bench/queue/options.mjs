/**
 * bench:queue's command line: the options, their defaults (full and --quick), and the name of
 * the files a run writes.
 */

import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { URL, fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { PAYLOAD_DEFAULTS, parseBytes, parsePayloadKind } from './payload-memory.mjs';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const WORKLOADS = ['throughput', 'burst', 'memory', 'recovery', 'steady', 'payload-memory'];
export const PEERS = ['tickwheel', 'bullmq'];

export const HELP = `Usage: npm run bench:queue -- [options]
       node --expose-gc bench/queue/run.mjs [options]

  --only <list>          workloads, comma-separated (default: all):
                           throughput  durable schedule throughput
                           burst       100k messages due in the same second (spread over it,
                                       and all in the same millisecond; tickwheel also from disk),
                                       and (tickwheel only) 1M due within one second
                           memory      RAM per far-future pending message  } one fill per size:
                           recovery    recovery after SIGKILL              } both run together
                           steady      20k messages/s scheduled and delivered for 60 s
                           payload-memory  RSS against a backlog of 1 MiB payloads due now,
                                       no consumer: filled, SIGKILLed, recovered, drained
                                       (tickwheel only; writes 2 GiB, under a minute)
  --peers <list>         tickwheel,bullmq (default both; BullMQ needs bullmq and redis-server)
  --n <count>            messages for throughput and burst, and the pending size (1e6, 100k, 3M)
  --burst-large <count>  messages of the large burst, due within 1 s, tickwheel only
                         (default 1M; 0: leave that cell out)
  --rounds <n>           throughput rounds per peer, alternating peers; median counts (default 3)
  --sizes <list>         pending sizes for memory/recovery (default 1M)
  --large                pending sizes 1M and 10M (tickwheel ~10 min more; BullMQ much more)
  --bullmq-max-pending <count>  skip BullMQ memory/recovery above this size (default: no limit)
  --fill-spread <minutes>  memory/recovery: pending messages due one a minute over this many
                         minutes, 30 days ahead (default 1: all due at the same time)
  --rate <per s>         steady-state rate (default 20000)
  --seconds <s>          steady-state duration (default 60)
  --concurrency <n>      consumer concurrency, both peers (default 1000)
  --batch <n>            messages per producer batch / addBulk (default 1000)
  --lanes <n>            producer batches in flight (default 4)
  --payload-backlogs <list>  payload-memory: the backlog sizes sampled, in MiB or with a unit
                         (default 128,512,1GiB,2GiB; --quick 8,16)
  --payload-size <size>  payload-memory: bytes of each payload (default 1MiB)
  --payload-kind <kind>  payload-memory: bytes (a Uint8Array, default) or json (an object
                         holding a string of that size, as the HTTP API carries)
  --payload-memory <MiB> payload-memory: the queue's payloadMemoryBytes (default: the build's)
  --warmup <count>       messages put through schedule, delivery and ack before the burst
                         and steady measurements, both peers (default 30000; 0: cold start)
  --quick                a tiny smoke run (seconds, not minutes); numbers mean nothing
  --out <dir>            where queue.json, queue.md and the SVGs go (default bench/results,
                         where only a full run with both peers and the default settings, or
                         --large, writes queue.*: any other run writes queue-<workloads>.* there,
                         queue-custom.* for all workloads with other settings, -quick added for
                         --quick, so that it never replaces the committed full run)
  --data-dir <dir>       where data directories are made (default: the OS temp dir)
  --profile              write .cpuprofile files of the tickwheel cells to <out>/profiles
  --from <queue.json>    measure nothing: print the table and redraw the charts of a saved run
  --help
`;

// ---- options -------------------------------------------------------------------------------

export function parseCount(name, text) {
  const match = /^([\d_.]+(?:e\d+)?)([kKmM]?)$/.exec(String(text));
  const value = match
    ? Number(match[1].replaceAll('_', '')) * ({ k: 1e3, m: 1e6 }[match[2].toLowerCase()] ?? 1)
    : NaN;
  if (!Number.isFinite(value) || value <= 0) {
    throw new Error(`--${name} takes a positive number (1e6, 100k, 3M), got ${text}`);
  }
  return Math.round(value);
}

export function parseList(name, text, known) {
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
      only: { type: 'string' },
      peers: { type: 'string' },
      n: { type: 'string' },
      'burst-large': { type: 'string' },
      rounds: { type: 'string' },
      sizes: { type: 'string' },
      large: { type: 'boolean', default: false },
      'bullmq-max-pending': { type: 'string' },
      'fill-spread': { type: 'string' },
      'payload-backlogs': { type: 'string' },
      'payload-size': { type: 'string' },
      'payload-memory': { type: 'string' },
      'payload-kind': { type: 'string' },
      rate: { type: 'string' },
      seconds: { type: 'string' },
      concurrency: { type: 'string' },
      batch: { type: 'string' },
      lanes: { type: 'string' },
      quick: { type: 'boolean', default: false },
      out: { type: 'string' },
      'data-dir': { type: 'string' },
      profile: { type: 'boolean', default: false },
      from: { type: 'string' },
      warmup: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  const quick = values.quick;
  const n = values.n === undefined ? undefined : parseCount('n', values.n);
  let sizes = quick ? [20_000] : [1_000_000];
  if (values.large) sizes = [1_000_000, 10_000_000];
  if (values.sizes !== undefined) {
    sizes = String(values.sizes)
      .split(',')
      .map((size) => parseCount('sizes', size));
  } else if (n !== undefined) sizes = [n];
  return {
    help: values.help,
    quick,
    workloads: values.only === undefined ? WORKLOADS : parseList('only', values.only, WORKLOADS),
    peers: values.peers === undefined ? PEERS : parseList('peers', values.peers, PEERS),
    throughputN: n ?? (quick ? 2_000 : 200_000),
    rounds: values.rounds === undefined ? (quick ? 1 : 3) : parseCount('rounds', values.rounds),
    burstN: n ?? (quick ? 2_000 : 100_000),
    burstLargeN:
      values['burst-large'] === undefined
        ? quick
          ? 20_000
          : 1_000_000
        : values['burst-large'] === '0'
          ? 0
          : parseCount('burst-large', values['burst-large']),
    sizes,
    backlogs:
      values['payload-backlogs'] === undefined
        ? quick
          ? PAYLOAD_DEFAULTS.quickBacklogs
          : PAYLOAD_DEFAULTS.backlogs
        : String(values['payload-backlogs'])
            .split(',')
            .map((size) => parseBytes('payload-backlogs', size))
            .sort((a, b) => a - b),
    payloadBytes:
      values['payload-size'] === undefined
        ? PAYLOAD_DEFAULTS.payloadBytes
        : parseBytes('payload-size', values['payload-size']),
    payloadKind: parsePayloadKind(values['payload-kind'] ?? 'bytes'),
    payloadMemory:
      values['payload-memory'] === undefined
        ? undefined
        : parseBytes('payload-memory', values['payload-memory']),
    fillSpread:
      values['fill-spread'] === undefined ? 1 : parseCount('fill-spread', values['fill-spread']),
    bullmqMaxPending:
      values['bullmq-max-pending'] === undefined
        ? Infinity
        : parseCount('bullmq-max-pending', values['bullmq-max-pending']),
    rate: values.rate === undefined ? (quick ? 1_000 : 20_000) : parseCount('rate', values.rate),
    seconds:
      values.seconds === undefined ? (quick ? 2 : 60) : parseCount('seconds', values.seconds),
    concurrency:
      values.concurrency === undefined ? 1000 : parseCount('concurrency', values.concurrency),
    batch: values.batch === undefined ? 1000 : parseCount('batch', values.batch),
    lanes: values.lanes === undefined ? 4 : parseCount('lanes', values.lanes),
    warmup:
      values.warmup === undefined
        ? quick
          ? 500
          : 30_000
        : values.warmup === '0'
          ? 0
          : parseCount('warmup', values.warmup),
    out: values.out ?? join(ROOT, 'bench', 'results'),
    outGiven: values.out !== undefined,
    // Settings that leave the cells as a full run has them.
    // (A flag left off is in `values` as false.)
    defaultSettings: Object.entries(values).every(
      ([key, value]) =>
        value === false ||
        ['help', 'out', 'data-dir', 'profile', 'from', 'large', 'peers'].includes(key),
    ),
    dataDir: values['data-dir'] ?? tmpdir(),
    profile: values.profile,
    from: values.from,
  };
}

/**
 * The name of the files a run writes (`<base>.json`, `<base>.md`, the charts with `<base>` for
 * "queue"): queue for a full run with both peers and the default settings, or wherever --out
 * says; otherwise a name of its own, so that a partial run never replaces the full one.
 */
export function resultsBase(options) {
  const allWorkloads =
    options.workloads.length === WORKLOADS.length &&
    WORKLOADS.every((workload) => options.workloads.includes(workload));
  const full =
    options.defaultSettings && allWorkloads && PEERS.every((peer) => options.peers.includes(peer));
  if (options.outGiven || full) return 'queue';
  const what = allWorkloads ? 'custom' : options.workloads.join('+');
  return `queue-${what}${options.quick ? '-quick' : ''}`;
}
