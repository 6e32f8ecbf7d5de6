/**
 * The payload-memory workload of bench:queue (tickwheel only, `--only payload-memory`): RSS
 * against a backlog of large payloads due now with no consumer, while it is scheduled, after a
 * SIGKILL and a recovery of the same directory, and while it is drained. It shows what the
 * payload budget (payloadMemoryBytes) bounds; run on a build without one through
 * TICKWHEEL_BENCH_DIST to see the difference.
 */

import { log, makeDataDir, removeDataDir, runCell, startCell } from './cells.mjs';
import { formatMs, formatNumber } from './stats.mjs';

const MIB = 1024 * 1024;

/** The largest scheduleMany of the fill: about 16 MiB of payloads a call. */
const BATCH_BYTES = 16 * MIB;

export const PAYLOAD_DEFAULTS = {
  backlogs: [128 * MIB, 512 * MIB, 1024 * MIB, 2048 * MIB],
  quickBacklogs: [8 * MIB, 16 * MIB],
  payloadBytes: MIB,
};

/** "128" (MiB), "512MiB", "1GiB", "256KiB" to bytes. */
export function parseBytes(name, text) {
  const match = /^(\d+(?:\.\d+)?)\s*(KiB|MiB|GiB|K|M|G)?$/i.exec(String(text).trim());
  const unit = match?.[2]?.[0].toUpperCase() ?? 'M';
  const bytes = match ? Number(match[1]) * { K: 1024, M: MIB, G: 1024 * MIB }[unit] : NaN;
  if (!Number.isFinite(bytes) || bytes < 1) {
    throw new Error(`--${name} takes sizes such as 128 (MiB), 512MiB, 1GiB or 256KiB, got ${text}`);
  }
  return Math.round(bytes);
}

export function parsePayloadKind(text) {
  if (text !== 'bytes' && text !== 'json') {
    throw new Error(`--payload-kind takes bytes or json, got ${text}`);
  }
  return text;
}

function queueOptionsOf(options) {
  return {
    // Payloads of 1 MiB are at the default limit (JSON a few bytes over); larger ones need it raised.
    maxPayloadBytes: Math.max(MIB, options.payloadBytes) + 1024,
    ...(options.payloadMemory === undefined ? {} : { payloadMemoryBytes: options.payloadMemory }),
  };
}

export async function payloadMemoryWorkload(options) {
  const label = 'payload-memory tickwheel';
  const { payloadBytes, payloadKind, backlogs } = options;
  const queueOptions = queueOptionsOf(options);
  const dir = makeDataDir(options, 'payload');
  log(`${label}: start`);
  try {
    const fill = [];
    let messages;
    const cell = startCell(
      options,
      `${label} fill`,
      {
        peer: 'tickwheel',
        workload: 'payloadFill',
        options: {
          dir,
          backlogs,
          payloadBytes,
          payloadKind,
          batch: Math.max(1, Math.floor(BATCH_BYTES / payloadBytes)),
          queueOptions,
        },
      },
      (message) => {
        if (message.type === 'sample') fill.push(message.sample);
        else if (message.type === 'filled') {
          messages = message.messages;
          cell.child.kill('SIGKILL');
        }
      },
    );
    await cell.closed;
    // No 'filled': the cell failed, and its result says why.
    if (messages === undefined) await cell.result;
    log(`${label}: SIGKILLed with ${formatNumber(messages)} messages; recovering`);
    const { openMs, recovered, drained } = await runCell(options, `${label} recovery`, {
      peer: 'tickwheel',
      workload: 'payloadRecover',
      options: { dir, payloadBytes, payloadKind, messages, queueOptions },
    });
    log(
      `${label}: recovered in ${formatMs(openMs)}, RSS ${mib(recovered.rss)}; drained ${formatNumber(drained.received)} (${formatNumber(drained.intact)} intact), peak RSS ${mib(drained.peakRss)}`,
    );
    return { payloadBytes, payloadKind, queueOptions, messages, fill, recovered, drained };
  } catch (err) {
    log(`${label}: FAILED: ${err.message.split('\n')[0]}`);
    return { error: err.message };
  } finally {
    removeDataDir(dir);
  }
}

function mib(bytes) {
  return bytes === null || bytes === undefined ? '-' : `${formatNumber(bytes / MIB)} MiB`;
}

/** RSS (peak of the phase) | heap used + array buffers | payloads held by the queue. */
function memoryText(sample) {
  const held =
    sample.heldPayloadBytes === null
      ? 'no budget'
      : `${mib(sample.heldPayloadBytes)} of ${mib(sample.payloadLimitBytes)}`;
  return `${mib(sample.rss)} (${mib(sample.peakRss)}) | ${mib(sample.heapUsed + sample.arrayBuffers)} | ${held}`;
}

/** Rows of bench:queue's table: [workload, metric, tickwheel, BullMQ, ratio]. */
export function payloadMemoryRows(result) {
  if (result === undefined) return [];
  const workload = 'payload-memory';
  if (result.error !== undefined) return [[workload, 'run', 'error', '-', '-']];
  if (result.skipped !== undefined) return [[workload, 'run', 'skipped', '-', '-']];
  const metric = 'RSS (phase peak) | heap+buf | payloads held';
  const rows = result.fill.map((sample) => [
    workload,
    sample.messages === 0
      ? `empty queue: ${metric}`
      : `backlog ${mib(sample.backlogBytes)} (${formatNumber(sample.messages)} due): ${metric}`,
    memoryText(sample),
    '-',
    '-',
  ]);
  const { recovered, drained } = result;
  rows.push(
    [
      workload,
      'after SIGKILL: recovery (open | replay)',
      `${formatMs(recovered.openMs)} | ${formatMs(recovered.recoveryDurationMs)}`,
      '-',
      '-',
    ],
    [
      workload,
      `recovered ${formatNumber(recovered.live)}: ${metric}`,
      memoryText(recovered),
      '-',
      '-',
    ],
    [
      workload,
      `drained: received / intact, in`,
      `${formatNumber(drained.received)} / ${formatNumber(drained.intact)}, ${formatMs(drained.drainMs)}`,
      '-',
      '-',
    ],
    [workload, `drained: ${metric}`, memoryText(drained), '-', '-'],
  );
  return rows;
}
