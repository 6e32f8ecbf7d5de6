/**
 * bench:sustained's results: the highest rate each peer held, the targets of issue 39, and
 * every step, printed and written as <out>/sustained.json and sustained.md.
 */

import { markdownTable, resultWriter } from './report.mjs';
import { formatMs, formatNumber, ratio } from './stats.mjs';

export const PEER_NAMES = {
  tickwheel: 'tickwheel embedded',
  'tickwheel-http': 'tickwheel over HTTP',
  bullmq: 'BullMQ',
};

/** Issue 39: an embedded node holds 100k deliveries/s within the bound, 10x BullMQ's rate. */
const TARGET_RATE = 100_000;
const TARGET_RATIO = 10;

/**
 * The highest rate of the steps that held before the first that did not (a later step that
 * held again, with --keep-going, does not count: the rate was not held on the way up), or null
 * when the first step broke already.
 */
export function highestHeld(steps) {
  let highest = null;
  for (const step of steps) {
    if (!step.held) break;
    highest = step.rate;
  }
  return highest;
}

/** Adds each peer's summary and its rate held against BullMQ's; returns the results. */
export function summarise(results) {
  const { peers } = results;
  for (const cell of Object.values(peers)) {
    if (cell.steps === undefined) continue;
    cell.highestHeldPerSecond = highestHeld(cell.steps);
    const broke = cell.steps.find((step) => !step.held);
    cell.brokeAt = broke === undefined ? null : { rate: broke.rate, reasons: broke.reasons };
  }
  results.versusBullmq = {};
  for (const id of ['tickwheel', 'tickwheel-http']) {
    const versus = versusBullmq(peers[id], peers.bullmq);
    if (versus !== null) results.versusBullmq[id] = versus;
  }
  results.targets = targets(results);
  return results;
}

/**
 * A peer's highest rate held over BullMQ's, as `{ ratio, exact }`: exact when both broke within
 * the rates stepped through, a floor otherwise. Where BullMQ held none, its rate is below the
 * first step, so the ratio is above held / first; where the peer never broke, its rate held is
 * a floor, and so is the ratio. Null where either did not run or the peer held nothing.
 */
function versusBullmq(cell, bullmq) {
  if (cell?.steps === undefined || bullmq?.steps === undefined) return null;
  const held = cell.highestHeldPerSecond;
  if (held === null) return null;
  const bullmqHeld = bullmq.highestHeldPerSecond;
  return {
    ratio: ratio(held, bullmqHeld ?? bullmq.steps[0].rate),
    exact: bullmqHeld !== null && cell.brokeAt !== null,
  };
}

function formatVersus(versus) {
  if (versus === undefined) return '-';
  return `${versus.exact ? '' : '>= '}${versus.ratio}x`;
}

function targets(results) {
  const embedded = results.peers.tickwheel;
  if (embedded?.steps === undefined) return [];
  const bound = results.options.boundMs;
  const held = embedded.highestHeldPerSecond ?? 0;
  // A ramp that never broke measured a floor: the rate held may be higher.
  const floorNote =
    embedded.brokeAt === null ? { note: 'did not break: a floor, run higher --rates' } : {};
  const list = [
    {
      name: `embedded deliveries/s with p99 <= ${bound} ms`,
      wanted: `>= ${formatNumber(TARGET_RATE)}/s`,
      measured: `${formatNumber(held)}/s`,
      met: held >= TARGET_RATE,
      ...floorNote,
    },
  ];
  if (results.peers.bullmq?.steps !== undefined) {
    const versus = results.versusBullmq.tickwheel;
    list.push({
      name: `embedded rate held against BullMQ's, same bound`,
      wanted: `>= ${TARGET_RATIO}x`,
      measured: formatVersus(versus),
      // A floor at or above the target meets it; one below says nothing either way.
      met: versus !== undefined && versus.ratio >= TARGET_RATIO,
      ...(results.peers.bullmq.highestHeldPerSecond === null
        ? { note: 'BullMQ held none of the rates stepped through' }
        : floorNote),
    });
  }
  return list;
}

const us = (value) => (value === null || value === undefined ? '-' : `${formatNumber(value, 1)}`);

function summaryRows(results) {
  const bullmqRan = results.peers.bullmq?.steps !== undefined;
  return Object.entries(results.peers).map(([id, cell]) => {
    if (cell.steps === undefined) {
      return [
        PEER_NAMES[id],
        '-',
        '-',
        cell.skipped ?? cell.error?.split('\n')[0] ?? '-',
        '-',
        '-',
      ];
    }
    const held = cell.highestHeldPerSecond;
    const atHeld = cell.steps.find((step) => step.rate === held);
    return [
      PEER_NAMES[id],
      held === null
        ? `none (from ${formatNumber(cell.steps[0].rate)}/s)`
        : `${formatNumber(held)}/s`,
      cell.brokeAt === null ? 'did not break' : `${formatNumber(cell.brokeAt.rate)}/s`,
      cell.brokeAt === null ? '-' : cell.brokeAt.reasons.join('; '),
      atHeld === undefined ? '-' : us(atHeld.cpu.totalUsPerMessage),
      id === 'bullmq' || !bullmqRan ? '-' : formatVersus(results.versusBullmq[id]),
    ];
  });
}

const SUMMARY_HEADER = [
  'peer',
  'highest rate held',
  'broke at',
  'why',
  'CPU µs/msg there (all processes)',
  'rate held vs BullMQ',
];

const STEP_HEADER = [
  'peer',
  'target/s',
  'delivered/s',
  'p50',
  'p99',
  'max',
  'process CPU µs/msg',
  'server CPU µs/msg',
  'msgs per server CPU-s',
  'held',
];

function stepRows(results) {
  const rows = [];
  for (const [id, cell] of Object.entries(results.peers)) {
    for (const step of cell.steps ?? []) {
      rows.push([
        PEER_NAMES[id],
        formatNumber(step.rate),
        formatNumber(step.deliveredPerSecond),
        formatMs(step.lateness.p50Ms),
        formatMs(step.lateness.p99Ms),
        formatMs(step.lateness.maxMs),
        us(step.cpu.processUsPerMessage),
        us(step.cpu.serverUsPerMessage),
        formatNumber(step.cpu.messagesPerServerCpuSecond),
        step.held ? 'yes' : `no: ${step.reasons.join('; ')}`,
      ]);
    }
  }
  return rows;
}

function machineLine({ meta, options }) {
  const load = meta.loadAverage;
  return (
    `${meta.machine.cpus} x ${meta.machine.cpu}, ${meta.machine.memoryGiB} GiB, ${meta.platform}, ` +
    `Node ${meta.node}, redis-server ${meta.redis ?? '-'}, BullMQ ${meta.bullmq ?? '-'}; ` +
    `load average ${load.start.toFixed(1)} at start, ${(load.end ?? NaN).toFixed(1)} at end. ` +
    `Steps of ${options.seconds} s at ${options.rates.map((rate) => formatNumber(rate)).join(', ')}/s; ` +
    `messages due ${options.leadMs} ms after they are scheduled; a step holds with p99 lateness ` +
    `<= ${options.boundMs} ms and every message delivered; consumer concurrency ` +
    `${options.concurrency}, batches of ${options.batch}, warm-up ${formatNumber(options.warmup)} messages.` +
    (meta.dist ? ` tickwheel from ${meta.dist}.` : '')
  );
}

export function renderMarkdown(results) {
  const targetRows = results.targets.map((t) => [
    t.name,
    t.wanted,
    t.measured,
    `${t.met ? 'yes' : 'NO'}${t.note ? ` (${t.note})` : ''}`,
  ]);
  return [
    `# Sustained delivery, ${results.meta.date}`,
    '',
    machineLine(results),
    '',
    `## Highest rate held with p99 <= ${results.options.boundMs} ms`,
    '',
    markdownTable(SUMMARY_HEADER, summaryRows(results)),
    '',
    ...(targetRows.length > 0
      ? [markdownTable(['target', 'wanted', 'measured', 'met'], targetRows), '']
      : []),
    '## Every step',
    '',
    markdownTable(STEP_HEADER, stepRows(results)),
    '',
    ...results.meta.notes.map((note) => `- ${note}`),
    '',
  ].join('\n');
}

/** Writes <out>/<base>.json and <base>.md; returns the paths written. */
export function writeResults(results, out, base = 'sustained') {
  const { write, written } = resultWriter(out);
  write(`${base}.json`, `${JSON.stringify(results, null, 2)}\n`);
  write(`${base}.md`, renderMarkdown(results));
  return written;
}
