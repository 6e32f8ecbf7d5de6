/**
 * tickwheel against the targets for its PostgreSQL backend, and its ratios against each
 * peer, from a bench:postgres run's JSON. A target is judged only from a cell tickwheel ran; a
 * target missed is printed as missed.
 */

import { formatBytes, formatMs, formatNumber, ratio } from '../queue/stats.mjs';

/** How many times a peer's throughput tickwheel's should be, per peer. */
const THROUGHPUT_TIMES = { 'pg-boss': 10, graphile: 3 };
const LATENESS_P99_MS = 20;
const BURST_P99_MS = 500;
const PENDING_BYTES = 150;
/**
 * The soak is flat when its last sample is at most this much above the largest of its first
 * half: the tables may grow to their working size at first, not after.
 */
const SOAK_GROWTH = 1.2;

const PEER_NAMES = { 'pg-boss': 'pg-boss', graphile: 'Graphile Worker' };

const usable = (result) =>
  result !== undefined && result.skipped === undefined && result.error === undefined;

const times = (value) => (value === null ? '-' : `${formatNumber(value, 2)}×`);
const verdict = (met) => (met ? 'met' : '**missed**');

/** The floors cell's bare statement a schedule cell is set beside (floors.mjs). */
const FLOOR_OF = {
  'schedule-single': ['insertOne', 'an INSERT of one row a call'],
  'schedule-concurrent': ['insertBatch', 'an INSERT of 1,000 rows a statement'],
  'schedule-batched': ['insertBatch', 'an INSERT of 1,000 rows a statement'],
};

/** A throughput target's verdict: missed targets above the run's floor are out of reach. */
function throughputVerdict(key, needed, met, floors) {
  if (met) return verdict(true);
  const [name, what] = FLOOR_OF[key];
  const floor = floors?.[name]?.perSecond;
  if (floor === undefined || needed <= floor) return verdict(false);
  return `**missed**, out of reach: needs ${formatNumber(needed)}/s, ${what} alone does ${formatNumber(floor)}/s`;
}

function table(header, rows) {
  const line = (cells) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/**
 * The measures compared: [label, cell key, value of a result, format, lower is better].
 * Lateness and the burst compare p99s; a run that did not drain has none.
 */
const MEASURES = [
  ['schedule-single msgs/s', 'schedule-single', (r) => r.perSecond, formatNumber, false],
  ['schedule-concurrent msgs/s', 'schedule-concurrent', (r) => r.perSecond, formatNumber, false],
  ['schedule-batched msgs/s', 'schedule-batched', (r) => r.perSecond, formatNumber, false],
  [
    'lateness p99 (low-latency)',
    'lateness (low-latency)',
    (r) => (r.drained ? r.lateness.p99Ms : null),
    formatMs,
    true,
  ],
  [
    'lateness p99 (default)',
    'lateness (default)',
    (r) => (r.drained ? r.lateness.p99Ms : null),
    formatMs,
    true,
  ],
  ['burst drain', 'burst', (r) => (r.drained ? r.drainMs : null), formatMs, true],
  ['burst p99', 'burst', (r) => (r.drained ? r.lateness.p99Ms : null), formatMs, true],
  ['pending disk B/msg', 'pending', (r) => r.bytesPerMessage.total, formatBytes, true],
  [
    'PG CPU ms/msg, lateness',
    'lateness (low-latency)',
    (r) => r.cpu?.postgresMsPerMessage,
    (v) => formatNumber(v, 3),
    true,
  ],
];

function ratiosTable(results, peers) {
  const rows = [];
  for (const [label, key, read, format, lowerIsBetter] of MEASURES) {
    const byPeer = results.cells[key];
    if (!usable(byPeer?.tickwheel)) continue;
    const ours = read(byPeer.tickwheel) ?? null;
    const row = [label, ours === null ? 'did not drain' : format(ours)];
    for (const peer of peers) {
      const theirs = usable(byPeer[peer]) ? (read(byPeer[peer]) ?? null) : null;
      row.push(theirs === null ? '-' : format(theirs));
      row.push(times(ratio(ours, theirs, lowerIsBetter)));
    }
    rows.push(row);
  }
  if (rows.length === 0) return undefined;
  const header = ['measure', 'tickwheel'];
  for (const peer of peers) header.push(PEER_NAMES[peer], `tickwheel vs ${PEER_NAMES[peer]}`);
  return table(header, rows);
}

/** The soak's verdict: flat when the tables stop growing after the first half. */
function soakFlat(result) {
  const totals = result.samples.map((sample) => sample.totalBytes);
  const firstHalf = totals.slice(0, Math.max(1, Math.ceil(totals.length / 2)));
  const limit = Math.max(...firstHalf) * SOAK_GROWTH;
  const last = totals[totals.length - 1];
  return {
    met: last <= limit,
    text: `${formatNumber(totals[0] / 2 ** 20, 1)} → ${formatNumber(last / 2 ** 20, 1)} MiB (max ${formatNumber(Math.max(...totals) / 2 ** 20, 1)} MiB)`,
  };
}

function targetRows(results, peers, options) {
  const cell = (key) => {
    const result = results.cells[key]?.tickwheel;
    return usable(result) ? result : undefined;
  };
  const rows = [];
  for (const key of ['schedule-single', 'schedule-concurrent', 'schedule-batched']) {
    const ours = cell(key);
    if (ours === undefined) continue;
    for (const peer of peers) {
      const theirs = results.cells[key][peer];
      if (!usable(theirs)) continue;
      const want = THROUGHPUT_TIMES[peer];
      const got = ratio(ours.perSecond, theirs.perSecond);
      const met = got !== null && got >= want;
      rows.push([
        `${key}: ≥ ${want}× ${PEER_NAMES[peer]}'s msgs/s`,
        `${formatNumber(ours.perSecond)}/s, ${times(got)}`,
        throughputVerdict(key, want * theirs.perSecond, met, results.floors),
      ]);
    }
  }
  for (const mode of ['low-latency', 'default']) {
    const ours = cell(`lateness (${mode})`);
    if (ours === undefined) continue;
    rows.push([
      `lateness p99 ≤ ${LATENESS_P99_MS} ms at ${formatNumber(options.rate)} due/s (${mode}; the target is at 1,000/s)`,
      ours.drained ? formatMs(ours.lateness.p99Ms) : 'did not drain',
      verdict(ours.drained && ours.lateness.p99Ms <= LATENESS_P99_MS),
    ]);
  }
  const burst = cell('burst');
  if (burst !== undefined) {
    rows.push([
      `burst of ${formatNumber(options.burst)}: p99 ≤ ${BURST_P99_MS} ms (the target is for 100k)`,
      burst.drained
        ? `${formatMs(burst.lateness.p99Ms)}, drained in ${formatMs(burst.drainMs)}`
        : 'did not drain',
      verdict(burst.drained && burst.lateness.p99Ms <= BURST_P99_MS),
    ]);
  }
  const pending = cell('pending');
  if (pending !== undefined) {
    rows.push([
      `pending: ≤ ${PENDING_BYTES} B on disk a message`,
      formatBytes(pending.bytesPerMessage.total),
      verdict(pending.bytesPerMessage.total <= PENDING_BYTES),
    ]);
  }
  const soak = cell('soak');
  if (soak !== undefined) {
    const flat = soakFlat(soak);
    rows.push([
      `soak: flat (last sample ≤ ${SOAK_GROWTH}× the largest of the first half)`,
      flat.text,
      verdict(soak.drained && flat.met),
    ]);
  }
  return rows;
}

/** The report's section on tickwheel, or undefined when tickwheel ran no cell. */
export function targetsSection(results) {
  const peers = Object.keys(PEER_NAMES).filter((peer) => results.options.peers.includes(peer));
  const rows = targetRows(results, peers, results.options);
  const ratios = ratiosTable(results, peers);
  if (rows.length === 0 && ratios === undefined) return undefined;
  return [
    "## tickwheel against the issue's targets",
    'Judged from this run alone; a ratio is how many times better tickwheel did (its msgs/s over ' +
      "the peer's, the peer's milliseconds or bytes over its own). Disk is as the files stand, " +
      'no VACUUM (docs/postgres.md gives the size after one).',
    rows.length > 0 ? table(['target', 'tickwheel', 'verdict'], rows) : undefined,
    ratios,
  ]
    .filter((block) => block !== undefined)
    .join('\n\n');
}
