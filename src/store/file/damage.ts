/**
 * Damage: telling a damaged log from the torn tail a crash leaves, and saying so. What the last
 * checkpoint and snapshot made durable (`Durable`) must be there and readable; damage there
 * that no repair accepted (repair.json) refuses the open. A record found unreadable later
 * (behind a snapshot) gets an error saying how to repair (`unreadable`).
 */

import { TickwheelCorruptError, type StoreDamage } from '../../errors.js';
import type { RecoveryReport } from '../../queue/store.js';
import { LogError, type LogFailure, type MessageLog, type ReplayReport } from '../log/index.js';
import { offsetOf, positionOf, segmentOf, where } from '../log/index.js';
import type { Checkpoint } from './checkpoint.js';
import type { StoreSnapshot } from './snapshot.js';

/** What the log is held to at recovery: what the last checkpoint (or the snapshot) made durable. */
export interface Durable {
  /** Bytes at the start of each segment that were durable. */
  bytes: Map<number, number>;
  /** Live payloads per segment then (from the checkpoint only). */
  live: Map<number, number>;
  /** The first segment the log needs (every one before held nothing live); absent: unknown. */
  first?: number;
  /** The log position before which everything was durable. */
  end: number;
}

type SegmentFiles = Pick<MessageLog, 'segments' | 'segmentSize' | 'createdFirst'>;

export function durableExtent(
  checkpoint: Checkpoint,
  snapshot: StoreSnapshot | undefined,
): Durable | undefined {
  let durable: Durable | undefined;
  if (checkpoint.log !== undefined) {
    durable = {
      bytes: new Map(checkpoint.log.map(([segment, bytes]) => [segment, bytes])),
      live: new Map(checkpoint.log.map(([segment, , live]) => [segment, live])),
      first: checkpoint.log[0][0],
      end: checkpoint.indexedUntil,
    };
  }
  // A snapshot is written only once the log up to its position is durable.
  if (snapshot !== undefined) {
    const segment = segmentOf(snapshot.position);
    const offset = offsetOf(snapshot.position);
    if (durable === undefined) {
      durable = { bytes: new Map([[segment, offset]]), live: new Map(), end: snapshot.position };
    } else if (segment >= (durable.first ?? 0)) {
      durable.bytes.set(segment, Math.max(durable.bytes.get(segment) ?? 0, offset));
      durable.end = Math.max(durable.end, snapshot.position);
    }
  }
  return durable;
}

/**
 * What the durable extent says must be there and is not: segments missing or short, and gaps
 * (retention deletes only the oldest), less what a repair accepted.
 */
export function missingOrShort(
  log: SegmentFiles,
  durable: Durable | undefined,
  accepted: StoreDamage[],
): StoreDamage[] {
  const damage: StoreDamage[] = [];
  const listed = new Set<number>();
  for (const [segment, bytes] of durable?.bytes ?? []) {
    listed.add(segment);
    const size = log.segmentSize(segment);
    // A segment this open made (the directory had none) was missing, not cut short.
    if (size === undefined || (log.createdFirst && size === 0 && bytes > 0)) {
      if (isAccepted(accepted, segment, 0)) continue;
      const live = durable?.live.get(segment);
      damage.push({
        segment,
        from: 0,
        to: bytes,
        reason: 'missing',
        ...(live === undefined ? {} : { messages: live }),
      });
    } else if (size < bytes && !isAccepted(accepted, segment, size)) {
      damage.push({
        segment,
        from: size,
        to: bytes,
        reason: `cut short: the file ends at byte ${size}, and ${bytes} bytes of it had been made durable`,
      });
    }
  }
  const present = log.segments();
  const first = durable?.first ?? present[0];
  const kept = present.filter((segment) => segment >= first);
  for (let i = 1; i < kept.length; i++) {
    for (let segment = kept[i - 1] + 1; segment < kept[i]; segment++) {
      if (listed.has(segment) || isAccepted(accepted, segment, 0)) continue;
      damage.push({ segment, from: 0, reason: 'missing' });
    }
  }
  return damage.sort((a, b) => a.segment - b.segment || a.from - b.from);
}

/** Segments gone that held live payloads (`live` per segment, less `finished` since). */
export function payloadsGone(
  log: SegmentFiles,
  live: Iterable<[number, number]>,
  finished?: ReadonlyMap<number, number>,
): StoreDamage[] {
  const gone: StoreDamage[] = [];
  for (const [segment, count] of live) {
    const left = count - (finished?.get(segment) ?? 0);
    if (left > 0 && log.segmentSize(segment) === undefined) {
      gone.push({ segment, from: 0, reason: 'missing', messages: left });
    }
  }
  return gone.sort((a, b) => a.segment - b.segment);
}

/** The damage that refuses an open: `more`, and the replay's in durable bytes not accepted. */
export function refusedDamage(
  report: ReplayReport,
  accepted: StoreDamage[],
  more: StoreDamage[],
): StoreDamage[] {
  const damage = [...more];
  for (const c of report.corrupt) {
    if (c.durable && !isAccepted(accepted, c.segment, offsetOf(c.position))) {
      damage.push(damageOf(c));
    }
  }
  return damage;
}

/** Whether a repair accepted the damage at this byte of a segment as lost. */
function isAccepted(accepted: readonly StoreDamage[], segment: number, offset: number): boolean {
  return accepted.some(
    (d) =>
      d.segment === segment &&
      (d.reason === 'missing' || (d.from <= offset && (d.to === undefined || offset < d.to))),
  );
}

export function isAcceptedAt(accepted: readonly StoreDamage[], position: number): boolean {
  return isAccepted(accepted, segmentOf(position), offsetOf(position));
}

export function damageOf(c: ReplayReport['corrupt'][number]): StoreDamage {
  const from = offsetOf(c.position);
  return { segment: c.segment, from, to: from + c.bytes, reason: `damaged: ${c.reason}` };
}

/** Position after the damage (for a missing segment of unknown size: the end of its span). */
export function endOf(d: StoreDamage): number {
  return d.to === undefined ? positionOf(d.segment + 1, 0) : positionOf(d.segment, d.to);
}

/** In order; a damaged end of a segment and its cut-short rest, back to back, are one. */
export function mergeDamage(damage: StoreDamage[]): StoreDamage[] {
  const sorted = [...damage].sort((a, b) => a.segment - b.segment || a.from - b.from);
  const merged: StoreDamage[] = [];
  for (const d of sorted) {
    const last = merged[merged.length - 1];
    if (last !== undefined && last.segment === d.segment && last.to === d.from) {
      const cut = [last, d].find((x) => x.reason.startsWith('cut short'));
      merged[merged.length - 1] = { ...last, to: d.to, reason: (cut ?? last).reason };
    } else merged.push({ ...d });
  }
  return merged;
}

/** The replay's skipped records that are news: neither durable (refused) nor accepted. */
export function skipped(report: ReplayReport, accepted: StoreDamage[]): RecoveryReport['corrupt'] {
  return report.corrupt
    .filter((c) => !isAcceptedAt(accepted, c.position))
    .map((c) => ({ where: where(c.position), reason: c.reason }));
}

/** One line for a damaged stretch: which segment, which bytes, what is wrong, what it held. */
export function describeDamage(d: StoreDamage): string {
  const bytes = d.to === undefined ? '' : ` (bytes ${d.from} to ${d.to})`;
  const messages =
    d.messages === undefined
      ? ''
      : `; ${d.messages} live messages had their payload there at the last checkpoint`;
  return `log segment ${d.segment}${bytes} is ${d.reason}${messages}`;
}

export function corruptionError(dir: string, damage: StoreDamage[]): TickwheelCorruptError {
  return new TickwheelCorruptError(
    `${dir} will not be opened: its message log is damaged where it had been made durable ` +
      `(not the torn tail a crash leaves):\n${damage.map((d) => `  - ${describeDamage(d)}`).join('\n')}\n` +
      `Nothing was changed. \`tickwheel repair --dir ${dir}\` lists the messages that cannot be ` +
      `recovered; \`tickwheel repair --dir ${dir} --yes\` (or DelayQueue.open({ dir, repair: ` +
      'true })) drops them, keeps every other message, and reports what it dropped.',
    damage,
  );
}

/** A record that cannot be read back: damaged on disk, or in a part of the log that is gone. */
export function isDamage(err: unknown): err is LogFailure {
  return (
    err instanceof TickwheelCorruptError ||
    (err instanceof LogError && err.code === 'ERR_TICKWHEEL_INVALID_POSITION')
  );
}

/** A damaged record's read failure as a TickwheelCorruptError saying how to repair; else as is. */
export function unreadable(dir: string, err: unknown, what: string): unknown {
  if (!isDamage(err)) return err;
  return new TickwheelCorruptError(
    `${what} cannot be read: ${err.message}. The data directory ${dir} is damaged: ` +
      `close the queue and run \`tickwheel repair --dir ${dir}\` (see docs/storage.md, ` +
      'Recovery)',
    [],
    { cause: err },
  );
}
