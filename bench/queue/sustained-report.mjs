/**
 * bench:sustained's results: the highest rate each peer held, the targets of issue 39, and
 * every step, printed and written as <out>/sustained.json and sustained.md.
 */

import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { markdownTable } from './report.mjs';
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

/** Adds each peer's summary and the ratios to BullMQ; returns the results. */
export function summarise(results) {
  const { peers } = results;
  for (const cell of Object.values(peers)) {
    if (cell.steps === undefined) continue;
    cell.highestHeldPerSecond = highestHeld(cell.steps);
    const broke = cell.steps.find((step) => !step.held);
    cell.brokeAt = broke === undefined ? null : { rate: broke.rate, reasons: broke.reasons };
  }
  const bullmq = peers.bullmq?.highestHeldPerSecond;
  results.ratios = {};
  for (const id of ['tickwheel', 'tickwheel-http']) {
    if (peers[id]?.steps === undefined || peers.bullmq?.steps === undefined) continue;
    results.ratios[`${id}/bullmq`] = ratio(peers[id].highestHeldPerSecond ?? 0, bullmq ?? 0);
  }
  results.targets = targets(results);
  return results;
}

function targets(results) {
  const embedded = results.peers.tickwheel;
  if (embedded?.steps === undefined) return [];
  const bound = results.options.boundMs;
  const held = embedded.highestHeldPerSecond ?? 0;
  const list = [
    {
      name: `embedded deliveries/s with p99 <= ${bound} ms`,
      wanted: `>= ${formatNumber(TARGET_RATE)}/s`,
      measured: `${formatNumber(held)}/s`,
      met: held >= TARGET_RATE,
      // A ramp that never broke measured a floor: the rate held may be higher.
      ...(embedded.brokeAt === null ? { note: 'did not break: the highest rate asked' } : {}),
    },
  ];
  const bullmqCell = results.peers.bullmq;
  if (bullmqCell?.steps !== undefined) {
    const bullmq = bullmqCell.highestHeldPerSecond;
    const vsBullmq = results.ratios['tickwheel/bullmq'];
    // BullMQ held no step: its rate is below the first, so the ratio is above held / first.
    const floor = bullmq === null ? held / bullmqCell.steps[0].rate : null;
    list.push({
      name: `embedded rate held against BullMQ's, same bound`,
      wanted: `>= ${TARGET_RATIO}x`,
      measured: floor === null ? `${vsBullmq ?? '-'}x` : `> ${Math.round(floor * 100) / 100}x`,
      met: floor === null ? vsBullmq !== null && vsBullmq >= TARGET_RATIO : floor >= TARGET_RATIO,
      ...(floor === null ? {} : { note: 'BullMQ held none of the rates stepped through' }),
    });
  }
  return list;
}

const us = (value) => (value === null || value === undefined ? '-' : `${formatNumber(value, 1)}`);

/** "12.5x", or "> 20x" when BullMQ held none of its steps (its rate is below the first). */
function versusBullmq(results, held) {
  const bullmq = results.peers.bullmq;
  if (bullmq?.steps === undefined || held === null) return null;
  if (bullmq.highestHeldPerSecond === null) {
    return `> ${Math.round((held / bullmq.steps[0].rate) * 100) / 100}x`;
  }
  return `${ratio(held, bullmq.highestHeldPerSecond)}x`;
}

function summaryRows(results) {
  const bullmqHeld = results.peers.bullmq?.highestHeldPerSecond;
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
    const vs = id === 'bullmq' || bullmqHeld === undefined ? null : versusBullmq(results, held);
    return [
      PEER_NAMES[id],
      held === null
        ? `none (from ${formatNumber(cell.steps[0].rate)}/s)`
        : `${formatNumber(held)}/s`,
      cell.brokeAt === null ? 'did not break' : `${formatNumber(cell.brokeAt.rate)}/s`,
      cell.brokeAt === null ? '-' : cell.brokeAt.reasons.join('; '),
      atHeld === undefined ? '-' : us(atHeld.cpu.totalUsPerMessage),
      vs ?? '-',
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
  mkdirSync(out, { recursive: true });
  const written = [];
  const write = (name, text) => {
    writeFileSync(join(out, name), text);
    written.push(relative(process.cwd(), join(out, name)) || name);
  };
  write(`${base}.json`, `${JSON.stringify(results, null, 2)}\n`);
  write(`${base}.md`, renderMarkdown(results));
  return written;
}
