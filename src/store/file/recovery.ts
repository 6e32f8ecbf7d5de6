/**
 * Recovery: the tables rebuilt at open, and what is due before the frontier handed over
 * (docs/storage.md, Recovery). What the checkpoint and the snapshot say was durable is checked
 * before the log is read or changed (damage.ts); a repair or a plan goes to repair.ts; else the
 * log is replayed after a usable snapshot, or whole. Unaccepted damage in durable bytes refuses
 * the open, having changed nothing but a torn tail.
 */

import type { MessageState } from '../../queue/message.js';
import type { RecoveryReport } from '../../queue/store.js';
import {
  offsetOf,
  positionOf,
  segmentOf,
  where,
  type LogFailure,
  type ReplayOptions,
  type ReplayReport,
} from '../log/index.js';
import { readCheckpoint, type Checkpoint } from './checkpoint.js';
import {
  corruptionError,
  durableExtent,
  missingOrShort,
  payloadsGone,
  refusedDamage,
  skipped,
} from './damage.js';
import { readRepairs } from './layout.js';
import { recoverWithRepair, shortened, type RecoveryParts } from './repair.js';
import {
  LateFinishes,
  bytesFrom,
  dueAfterReplay,
  dueAfterSnapshot,
  replayAll,
  replayTail,
} from './replay.js';
import {
  SnapshotRejected,
  readSnapshot,
  removeSnapshot,
  removeSnapshotTemp,
  type StoreSnapshot,
} from './snapshot.js';
import { ReplayWatcher } from './table.js';
import { endStoppedDelivery } from './handouts.js';
import { handOver } from './states.js';

/** 'plan': a repair that changes nothing and only reports (FileStore.planRepair). */
export type OpenMode = 'open' | 'repair' | 'plan';

/** Recovers the store, hands what is due before `frontier` to `onDue`, starts checkpoints. */
export async function recover(
  parts: RecoveryParts,
  mode: OpenMode,
  frontier: number,
  onDue: (message: MessageState) => void,
): Promise<RecoveryReport> {
  const { dir, log, tables, checkpoints } = parts;
  const started = performance.now();
  const checkpoint = await readCheckpoint(dir);
  const repairs = await readRepairs(dir);
  let verdict: RecoveryReport['snapshot'] = 'none';
  // The snapshot's tables if its file reads; `usable` if recovery can start from them.
  let found: { snapshot: StoreSnapshot; bytes: number } | undefined;
  let usable = false;
  try {
    if (mode !== 'plan') await removeSnapshotTemp(dir);
    found = await readSnapshot(dir);
    const problem = found && snapshotProblem(parts, found.snapshot, checkpoint, frontier);
    if (problem) throw new SnapshotRejected(problem);
    usable = found !== undefined;
  } catch (err) {
    verdict = `rejected: ${err instanceof SnapshotRejected ? err.reason : String(err)}`;
  }
  const durable = durableExtent(checkpoint, found?.snapshot);
  const accepted = repairs.accepted;
  const missing = missingOrShort(log, durable, accepted);
  const context = { started, checkpoint, durable, accepted, missing, repairs };
  if (mode !== 'open') {
    const plan = mode === 'plan';
    const report = await recoverWithRepair(parts, plan, frontier, context, found?.snapshot);
    if (plan) return report;
    return recovered(parts, frontier, started, report, dueAfterReplay(tables, frontier), onDue);
  }
  if (missing.length > 0) throw corruptionError(dir, missing);

  const replay: ReplayOptions = durable === undefined ? {} : { durable: durable.bytes };
  // Refuses the open (see the invariant in checkpoint.ts: no checkpoint after this).
  const refuse = (report: ReplayReport, more: Parameters<typeof refusedDamage>[2]) => {
    const damage = refusedDamage(report, accepted, more);
    if (damage.length === 0) return;
    checkpoints.replayed = false;
    throw corruptionError(dir, damage);
  };
  // The replay's report, where it started, and what is due before the frontier.
  let replayed: { report: ReplayReport; from: number; due: Map<number, number> };
  if (usable && found !== undefined) {
    verdict = 'used';
    const { snapshot, bytes } = found;
    found = undefined; // its arrays now belong to the tables
    const { report, tail } = await replayTail(parts, frontier, snapshot, checkpoint, replay);
    checkpoints.replayed = true;
    refuse(report, payloadsGone(log, tables.segmentLive));
    const due = await dueAfterSnapshot(parts, frontier, tail);
    replayed = { report, from: snapshot.position, due };
    await checkpoints.usedSnapshot(snapshot.position, bytes);
  } else {
    const rejected = found?.snapshot;
    found = undefined;
    const late = rejected === undefined ? undefined : new LateFinishes(rejected.position);
    const first = durable?.first ?? 0;
    const from = positionOf(first, 0);
    const watcher = late ?? new ReplayWatcher();
    const report = await replayAll(parts, frontier, checkpoint, {
      from,
      replay,
      index: true,
      watcher,
    });
    checkpoints.replayed = true;
    // (Segments before the first one the checkpoint needs were all finished by then.)
    const live = rejected?.segmentLive.filter(([segment]) => segment >= first) ?? [];
    refuse(report, payloadsGone(log, live, late?.bySegment));
    // Only now: a refused open leaves the snapshot for a repair to compare with. (Windows it
    // relies on that replayAll deleted make the checkpoint reject it, should this crash.)
    await removeSnapshot(dir);
    replayed = { report, from, due: dueAfterReplay(tables, frontier) };
  }
  const { report, from, due } = replayed;
  const last = repairs.reports[repairs.reports.length - 1];
  const recovery = {
    live: 0,
    corrupt: skipped(report, accepted),
    truncatedBytes: report.truncatedBytes,
    snapshot: verdict,
    replayedBytes: bytesFrom(log, from),
    durationMs: 0,
    ...(last === undefined ? {} : { repair: shortened(last) }),
  };
  return recovered(parts, frontier, started, recovery, due, onDue);
}

/**
 * The end every recovery but a plan shares: hands over `due` (position -> due time), retires
 * windows, checkpoints, starts the timer.
 */
async function recovered(
  parts: RecoveryParts,
  frontier: number,
  started: number,
  report: RecoveryReport,
  due: Map<number, number>,
  onDue: (message: MessageState) => void,
): Promise<RecoveryReport> {
  const { log, index, tables, checkpoints } = parts;
  // Deliveries the stop cut short end first (handouts.ts); unreadable records go to `corrupt`.
  const damaged = (position: number, err: LogFailure) =>
    report.corrupt.push({ where: where(position), reason: err.message });
  const stopped = (message: MessageState) => endStoppedDelivery(message, parts.bury);
  await handOver(tables, log, due, onDue, damaged, parts.budget, stopped);
  // Added to the records recovery appended (a repair's FINISH, the hand-over's BURY records).
  checkpoints.uncoveredBytes += report.replayedBytes;
  // A file reaching past the frontier still holds later entries: carried on first.
  const current = tables.latestCheck();
  for (const { key, start, end } of index.files()) {
    if (start >= frontier) break;
    if (end > frontier) await index.take(key, frontier, current);
    await checkpoints.retire(key);
  }
  await checkpoints.checkpoint('never', false);
  checkpoints.start();
  report.live = tables.live;
  report.durationMs = performance.now() - started;
  return report;
}

/**
 * Why a snapshot cannot be used, or undefined: the log must hold everything from its position,
 * and the index every entry it relies on (the checkpoint covers its position, each window it
 * lists is whole unless handed over), with a frontier that did not move back.
 */
function snapshotProblem(
  { log, index }: RecoveryParts,
  snapshot: StoreSnapshot,
  checkpoint: Checkpoint,
  frontier: number,
): string | undefined {
  if (snapshot.windowMs !== index.windowMs) {
    return `written with windowMs ${snapshot.windowMs}, opened with ${index.windowMs}`;
  }
  const segment = segmentOf(snapshot.position);
  const size = log.segmentSize(segment);
  if (size === undefined) return `log segment ${segment}, where it continues, is gone`;
  const offset = offsetOf(snapshot.position);
  if (offset > size) {
    return `it continues at byte ${offset} of log segment ${segment}, which has ${size} bytes`;
  }
  const segments = log.segments();
  for (let k = segments.indexOf(segment) + 1; k < segments.length; k++) {
    if (segments[k] !== segments[k - 1] + 1) return `log segment ${segments[k - 1] + 1} is gone`;
  }
  if (checkpoint.indexedUntil < snapshot.position) {
    return 'the checkpoint does not cover it (the schedule index may lack entries)';
  }
  if (checkpoint.frontier > frontier || snapshot.frontier > frontier) {
    return 'the horizon is nearer than when it was written';
  }
  const sizes = index.sizes();
  const handedOver = new Set(snapshot.loaded);
  for (const [key, bytes] of Object.entries(checkpoint.windows)) {
    if (!handedOver.has(key) && (sizes.get(key) ?? 0) < bytes) {
      return `index file ${key} is shorter than the checkpoint says`;
    }
  }
  return undefined;
}
