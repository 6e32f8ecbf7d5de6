/**
 * Repair (`repair: true`), or a plan of it that changes nothing, not even a torn tail
 * (docs/storage.md, Repair): replay every readable record, name or count the messages the
 * damage took, write FINISH records for those whose state cannot be trusted, drop the snapshot
 * (which still holds them), and record the damage as accepted in repair.json. Without a
 * snapshot taken after the damage, changes lost with it cannot be known: `exact` and `notes`.
 */

import type { StoreDamage } from '../../errors.js';
import { checkId, checkTopic, type MessageState } from '../../queue/message.js';
import type { PayloadBudget } from '../../queue/payload-budget.js';
import type { RecoveryReport, RepairReport } from '../../queue/store.js';
import { RECORD_HEADER_BYTES, RECORD_MAGIC, type ReplayReport } from '../log/index.js';
import { offsetOf, positionOf, segmentOf, where } from '../log/index.js';
import type { Checkpoint, Checkpoints } from './checkpoint.js';
import { damageOf, endOf, isAcceptedAt, mergeDamage, skipped, type Durable } from './damage.js';
import { IdHash, IdTable, hashId } from './id-table.js';
import { REPAIR_FILE, writeRepairs, type Repairs } from './layout.js';
import {
  FINISH,
  RELOCATE,
  SCHEDULE,
  decodeMove,
  holdsPayload,
  idStart,
  payloadPositionOf,
  recordId,
  topicLength,
  topicStart,
} from './records.js';
import { LateFinishes, bytesFrom, replayAll, type ReplayParts } from './replay.js';
import { removeSnapshot, type StoreSnapshot } from './snapshot.js';
import { statesAt } from './states.js';
import { ReplayWatcher, type Tables } from './table.js';
import type { WindowIndex } from './window-index.js';

/** recovery.repair, when read back at a later open, names at most this many messages. */
const REPAIR_NAMES_SHOWN = 100;
/** A repair reads at most this much of a damaged record to name the message it held. */
const DAMAGED_READ_BYTES = 64 * 1024;

/** What recovery found before reading the log, for the repair to go on from. */
export interface RecoveryContext {
  started: number;
  checkpoint: Checkpoint;
  durable: Durable | undefined;
  /** Damage earlier repairs accepted as lost. */
  accepted: StoreDamage[];
  /** Segments missing or cut short, by the durable extent. */
  missing: StoreDamage[];
  repairs: Repairs;
}

export interface RecoveryParts extends ReplayParts {
  readonly dir: string;
  readonly checkpoints: Checkpoints;
  /** Records the end of a message (as FileStore.finish does, cancelled). */
  finish(message: MessageState): Promise<void>;
  /** The payload bytes the queue holds at most: payloads read beyond it are not kept. */
  budget?: PayloadBudget;
  /** Records that a message ran out of attempts (as FileStore.bury does). */
  bury(message: MessageState): Promise<void>;
}

/** Recovery for `repair: true` up to the hand-over, or a plan (close() writes nothing). */
export async function recoverWithRepair(
  parts: RecoveryParts,
  plan: boolean,
  frontier: number,
  context: RecoveryContext,
  snapshot: StoreSnapshot | undefined,
): Promise<RecoveryReport> {
  const { dir, log, tables, checkpoints } = parts;
  const { checkpoint, durable, accepted, repairs } = context;
  const untraced = new Untraced(durable?.end ?? Infinity, tables.segmentLive);
  const from = positionOf(durable?.first ?? 0, 0);
  const report = await replayAll(parts, frontier, checkpoint, {
    from,
    replay: { durable: durable?.bytes, readOnly: plan, cutDurable: !plan },
    index: !plan,
    watcher: untraced,
    onRecord: (position) => untraced.read(position),
  });
  checkpoints.replayed = true;
  untraced.capture();
  const found = report.corrupt.filter((c) => !isAcceptedAt(accepted, c.position));
  const damage = mergeDamage([...context.missing, ...found.map(damageOf)]);
  const { finish, ...losses } =
    damage.length === 0
      ? { dropped: [], unnamed: 0, exact: true, notes: [], finish: [] }
      : await lostMessages(parts, damage, accepted, found, untraced, snapshot, durable);
  const repair: RepairReport = {
    at: new Date().toISOString(),
    applied: false,
    damage,
    lost: losses.dropped.length + losses.unnamed,
    ...losses,
  };
  const recovery: RecoveryReport = {
    live: tables.live - finish.length,
    corrupt: skipped(report, accepted),
    truncatedBytes: report.truncatedBytes,
    snapshot: snapshot === undefined ? 'none' : 'rejected: a repair replays the whole log',
    replayedBytes: bytesFrom(log, from),
    durationMs: performance.now() - context.started,
    repair,
  };
  if (plan) {
    checkpoints.replayed = false; // close() must write nothing
    return recovery;
  }
  // The FINISH records first: the snapshot still holds the dropped messages.
  await Promise.all(finish.map((message) => parts.finish(message)));
  await removeSnapshot(dir);
  if (damage.length > 0) {
    repair.applied = true;
    await writeRepairs(dir, {
      accepted: [...accepted, ...damage],
      reports: [...repairs.reports, repair],
    });
  }
  return recovery;
}

/** A repair report as later opens show it: the first names, and the count of all. */
export function shortened(report: RepairReport): RepairReport {
  if (report.dropped.length <= REPAIR_NAMES_SHOWN) return report;
  return {
    ...report,
    dropped: report.dropped.slice(0, REPAIR_NAMES_SHOWN),
    notes: [
      ...report.notes,
      `${report.dropped.length - REPAIR_NAMES_SHOWN} more dropped messages are named in ${REPAIR_FILE}`,
    ],
  };
}

/** What is left of a damaged record that names its message. */
interface DamagedRecord {
  type: number;
  id: string;
  topic: string;
  position: number;
  reason: string;
  low: number;
  high: number;
  /** The damaged stretch is exactly this one record. */
  whole: boolean;
  /** A RELOCATE's payload position before it, as read from the damaged bytes. */
  from: number | undefined;
}

const KINDS = ['', 'schedule', 'reschedule', 'finish', 'dead-letter', 'hand-out', 'relocation'];

function damagedReason(r: DamagedRecord): string {
  return `its ${KINDS[r.type]} record is damaged (${where(r.position)}: ${r.reason})`;
}

/** The messages a repair drops, as it finds them, and those it must finish. */
class Losses {
  readonly dropped = new Map<string, RepairReport['dropped'][number]>();
  readonly finish: MessageState[] = [];
  readonly notes: string[] = [];
  /** Damaged records whose message was named. */
  readonly named = new Set<DamagedRecord>();
  private readonly finishing = new Set<number>();

  constructor(private readonly parts: RecoveryParts) {}

  drop(id: string, topic: string, reason: string): void {
    if (!this.dropped.has(id)) this.dropped.set(id, { id, topic, reason });
  }

  /** Drops, and will finish, the messages whose latest records are at `positions`. */
  async finishAt(positions: number[], why: (i: number) => string): Promise<void> {
    const states = await statesAt(this.parts.log, positions, () => {});
    for (let i = 0; i < states.length; i++) {
      const state = states[i];
      if (state === undefined || this.finishing.has(positions[i])) continue;
      this.finishing.add(positions[i]);
      this.drop(state.id, state.topic, why(i));
      this.finish.push(state);
    }
  }
}

/**
 * The messages the new `damage` took: named where their id can be read, counted where not, and
 * those whose state cannot be trusted (to be finished):
 *   - moved or buried by a readable record whose schedule was not read: named from it;
 *   - with a snapshot (the truth up to its position): latest record unreadable, latest change
 *     lost (stale), or finished by it yet back in the readable log (lostSinceSnapshot);
 *   - without: the checkpoint's live counts per segment against the log's (lostByCounts);
 *   - what is left of a damaged record, where the snapshot or an index entry confirms it.
 */
async function lostMessages(
  parts: RecoveryParts,
  damage: StoreDamage[],
  accepted: StoreDamage[],
  found: ReplayReport['corrupt'],
  untraced: Untraced,
  snapshot: StoreSnapshot | undefined,
  durable: Durable | undefined,
) {
  const unreadable = (position: number) =>
    isAcceptedAt(damage, position) || isAcceptedAt(accepted, position);
  const losses = new Losses(parts);
  const hash = new IdHash();
  const orphanHashes = new IdTable();
  for (const [id, orphan] of untraced.orphans) {
    losses.drop(
      id,
      orphan.topic,
      `its schedule record, which holds the payload, cannot be read (${where(orphan.payloadPosition)})`,
    );
    hashId(id, hash);
    orphanHashes.set(hash.low, hash.high, orphan.position);
  }
  const remains = await damagedRecords(parts, found);
  const facts: Findings = { damage, remains, unreadable, untraced, orphanHashes };
  const { unnamed, exact } =
    snapshot !== undefined
      ? await lostSinceSnapshot(parts.tables, losses, snapshot, facts)
      : await lostByCounts(parts.tables, losses, durable, {
          ...facts,
          indexed: await indexEntriesIn(parts.index, unreadable),
        });
  for (const r of remains) {
    if (r.type === RELOCATE && !losses.dropped.has(r.id)) await lostRelocation(parts, losses, r);
  }
  const { dropped, named, notes } = losses;
  for (const r of remains) {
    if (named.has(r) || dropped.has(r.id)) continue;
    notes.push(
      `the damaged record at ${where(r.position)} may have been the ${KINDS[r.type]} record ` +
        `of message ${r.id} (topic ${r.topic}), read from the damaged bytes and not confirmed`,
    );
  }
  if (!exact) {
    notes.push(
      'the damaged bytes may also have held changes (a cancel, an ack, a reschedule, a retry) ' +
        'of messages whose earlier records are intact: those keep their last readable state',
    );
  }
  return { dropped: [...dropped.values()], unnamed, exact, notes, finish: losses.finish };
}

/** What lostMessages learned before it tells the lost apart. */
interface Findings {
  damage: StoreDamage[];
  remains: DamagedRecord[];
  unreadable: (position: number) => boolean;
  untraced: Untraced;
  orphanHashes: IdTable;
}

/** lostMessages with a snapshot: its tables are the truth up to its position. */
async function lostSinceSnapshot(
  tables: Tables,
  losses: Losses,
  snapshot: StoreSnapshot,
  found: Findings,
): Promise<{ unnamed: number; exact: boolean }> {
  const { damage, remains, unreadable, untraced, orphanHashes } = found;
  const end = snapshot.position;
  const before = new IdTable();
  before.adoptArrays(snapshot.ids);
  const stale: number[] = [];
  const staleFrom: number[] = [];
  const gone: Array<{ low: number; high: number; position: number }> = [];
  before.forEach((low, high, was) => {
    if (was >= end) return;
    const now = tables.ids.get(low, high);
    if (now === was || now >= end || now > was) return;
    if (now >= 0) {
      stale.push(now);
      staleFrom.push(was);
    } else if (
      unreadable(was) &&
      untraced.finishes.get(low, high) < 0 &&
      orphanHashes.get(low, high) < 0
    ) {
      gone.push({ low, high, position: was });
    }
  });
  const back: number[] = [];
  tables.ids.forEach((low, high, now) => {
    if (now < end && before.get(low, high) < 0) back.push(now);
  });
  const collided = new Map(snapshot.collisions.map(([id, position]) => [id, position]));
  const hash = new IdHash();
  for (const [id, { position }] of tables.collisions) {
    if (position >= end || collided.has(id)) continue;
    hashId(id, hash);
    if (before.get(hash.low, hash.high) !== position) back.push(position);
  }
  await losses.finishAt(stale, (i) => `its latest change cannot be read (${where(staleFrom[i])})`);
  await losses.finishAt(
    back,
    () =>
      `it had been finished before ${where(end)} (by the snapshot), but the record that finished it cannot be read`,
  );
  for (const r of remains) {
    const at = gone.findIndex(
      (g) => g.position === r.position && g.low === r.low && g.high === r.high,
    );
    if (at < 0) continue;
    gone.splice(at, 1);
    losses.drop(r.id, r.topic, damagedReason(r));
    losses.named.add(r);
  }
  return { unnamed: gone.length, exact: damage.every((d) => endOf(d) <= end) };
}

/** lostMessages without a snapshot: the last checkpoint's live counts per segment. */
async function lostByCounts(
  tables: Tables,
  losses: Losses,
  durable: Durable | undefined,
  found: Findings & { indexed: Map<number, [number, number]> },
): Promise<{ unnamed: number; exact: boolean }> {
  const { damage, remains, indexed, untraced } = found;
  const { named, notes } = losses;
  const namedIn = new Map<number, number>();
  const stale: number[] = [];
  const staleFrom: DamagedRecord[] = [];
  for (const r of remains) {
    const entry = indexed.get(r.position);
    if (entry === undefined || entry[0] !== r.low || entry[1] !== r.high) continue;
    const now = tables.latest(r.id);
    if (holdsPayload(r.type) && now < 0) {
      losses.drop(r.id, r.topic, damagedReason(r));
      named.add(r);
      const segment = segmentOf(r.position);
      namedIn.set(segment, (namedIn.get(segment) ?? 0) + 1);
    } else if (r.type !== SCHEDULE && now >= 0 && now < r.position) {
      stale.push(now);
      staleFrom.push(r);
      named.add(r);
    }
  }
  await losses.finishAt(stale, (i) => damagedReason(staleFrom[i]));
  // A damaged segment short of its checkpointed live count lost that many; one over it holds
  // messages whose finish was lost (they came back).
  const damaged = new Set(damage.map((d) => d.segment));
  const counted = [...damaged].every((segment) => durable?.live.has(segment) === true);
  let unnamed = 0;
  let back = false;
  for (const [segment, live] of durable?.live ?? []) {
    const traced =
      (untraced.atDurable?.get(segment) ?? 0) + (untraced.late.bySegment.get(segment) ?? 0);
    const lost = live - traced;
    if (lost < 0) {
      back = true;
      notes.push(
        `${-lost} messages with their payload in log segment ${segment} are live again ` +
          'although they had been finished: the record that finished them cannot be read, ' +
          'and without a snapshot taken after it, which ones cannot be told',
      );
    } else if (damaged.has(segment)) {
      unnamed += Math.max(0, lost - (namedIn.get(segment) ?? 0));
    }
  }
  if (!counted) {
    notes.push(
      'how many messages had every record in the damaged bytes is not known: no checkpoint ' +
        'counted the live messages of those segments',
    );
  }
  // Damage before every readable record, or exactly one named record, hid no other change.
  const accounted = (d: StoreDamage) =>
    positionOf(d.segment, d.from) < untraced.firstRead ||
    [...named].some(
      (r) => r.whole && segmentOf(r.position) === d.segment && offsetOf(r.position) === d.from,
    );
  return { unnamed, exact: counted && !back && damage.every(accounted) };
}

/**
 * A damaged RELOCATE whose earlier records were replayed: the message keeps its state (the same)
 * unless later records point at the lost payload; then it is dropped, and finished at the
 * payload the tables count for it, the one the RELOCATE replaced (if that still reads as its).
 */
async function lostRelocation(
  { log, tables }: RecoveryParts,
  losses: Losses,
  r: DamagedRecord,
): Promise<void> {
  const now = tables.latest(r.id);
  if (now < r.position) return; // unknown (dropped elsewhere), or its latest record is older
  const latest = await log.read(now).catch(() => undefined);
  if (latest === undefined || latest.type === SCHEDULE || latest.type === RELOCATE) return;
  const move = decodeMove(latest.body);
  if (move.payloadPosition !== r.position || move.id !== r.id) return;
  let ref = r.position;
  if (r.from !== undefined) {
    const before = await log.read(r.from).catch(() => undefined);
    if (
      before !== undefined &&
      holdsPayload(before.type) &&
      recordId(before.type, before.body) === r.id
    ) {
      ref = r.from;
    }
  }
  losses.drop(r.id, r.topic, damagedReason(r));
  losses.named.add(r);
  losses.finish.push({
    id: r.id,
    topic: move.topic,
    deliverAt: move.deliverAt,
    attempts: move.attempts,
    maxAttempts: 0,
    backoff: undefined,
    payloadKind: 0,
    payload: undefined,
    ref,
  });
}

/** What is left of each damaged record, where it still names a message and topic. */
async function damagedRecords(
  { log }: RecoveryParts,
  found: ReplayReport['corrupt'],
): Promise<DamagedRecord[]> {
  const remains: DamagedRecord[] = [];
  const hash = new IdHash();
  for (const c of found) {
    const raw = await log.readRaw(
      c.segment,
      offsetOf(c.position),
      Math.min(c.bytes, DAMAGED_READ_BYTES),
    );
    const record = readDamaged(raw);
    if (record === undefined) continue;
    hashId(record.id, hash);
    remains.push({
      ...record,
      position: c.position,
      reason: c.reason,
      low: hash.low,
      high: hash.high,
      whole: RECORD_HEADER_BYTES + raw.readUInt32LE(2) === c.bytes,
      from:
        record.type === RELOCATE && raw.length >= RECORD_HEADER_BYTES + 8
          ? raw.readDoubleLE(RECORD_HEADER_BYTES)
          : undefined,
    });
  }
  return remains;
}

/** The id and topic left in a damaged record, if its header and those fields are intact. */
function readDamaged(raw: Buffer): { type: number; id: string; topic: string } | undefined {
  if (raw.length < RECORD_HEADER_BYTES || raw[0] !== RECORD_MAGIC) return undefined;
  const type = raw[1];
  if (type < SCHEDULE || type > RELOCATE) return undefined;
  const body = raw.subarray(RECORD_HEADER_BYTES);
  if (body.length < idStart(type)) return undefined;
  const topicAt = topicStart(type, body);
  const end = topicAt + topicLength(type, body);
  if (end > body.length) return undefined;
  const id = recordId(type, body);
  const topic = body.toString('latin1', topicAt, end);
  try {
    checkId(id);
    checkTopic(topic);
  } catch {
    return undefined;
  }
  return { type, id, topic };
}

/** Index entries that point into unreadable bytes: position -> [hash low, hash high]. */
async function indexEntriesIn(index: WindowIndex, unreadable: (position: number) => boolean) {
  const entries = new Map<number, [number, number]>();
  for (const { key } of index.files()) {
    const { count, f64, u32 } = await index.read(key);
    for (let i = 0; i < count; i++) {
      if (unreadable(f64[3 * i + 1])) entries.set(f64[3 * i + 1], [u32[6 * i + 4], u32[6 * i + 5]]);
    }
  }
  return entries;
}

/**
 * What a repair's replay learns of messages whose SCHEDULE it did not read (their later records
 * name them), and the live counts at the durable position, for the checkpoint's.
 */
class Untraced extends ReplayWatcher {
  /** Moved or buried, and not finished after: live, but their payload cannot be read. */
  readonly orphans = new Map<
    string,
    { topic: string; payloadPosition: number; position: number }
  >();
  /** Id hashes finished by a record read (of such a message or any other). */
  readonly finishes = new IdTable();
  /** Finishes of such messages at or after the durable position. */
  readonly late: LateFinishes;
  /** Live payloads per segment (orphans included) when the replay reached the durable position. */
  atDurable: Map<number, number> | undefined;
  /** The first position the replay read. */
  firstRead = Infinity;

  /** `segmentLive`: the tables' live payloads per segment, which the replay keeps changing. */
  constructor(
    private readonly durableEnd: number,
    private readonly segmentLive: ReadonlyMap<number, number>,
  ) {
    super();
    this.late = new LateFinishes(durableEnd);
  }

  /** The replay is about to apply the record at `position`. */
  read(position: number): void {
    if (position < this.firstRead) this.firstRead = position;
    if (position >= this.durableEnd) this.capture();
  }

  /** Notes the live payloads per segment now, unless noted already. */
  capture(): void {
    if (this.atDurable !== undefined) return;
    const live = new Map(this.segmentLive);
    for (const { payloadPosition } of this.orphans.values()) {
      const segment = segmentOf(payloadPosition);
      live.set(segment, (live.get(segment) ?? 0) + 1);
    }
    this.atDurable = live;
  }

  override scheduled(body: Buffer, at: number): void {
    if (this.orphans.size > 0) this.orphans.delete(recordId(SCHEDULE, body, at));
  }

  override finished(low: number, high: number, position: number): void {
    this.finishes.set(low, high, position);
  }

  override unknown(
    type: number,
    body: Buffer,
    at: number,
    position: number,
    low: number,
    high: number,
  ): void {
    const id = recordId(type, body, at);
    if (type === FINISH) {
      this.finishes.set(low, high, position);
      if (!this.orphans.delete(id)) this.late.unknown(type, body, at, position);
      return;
    }
    const topicAt = at + topicStart(type, body, at);
    this.orphans.set(id, {
      topic: body.toString('latin1', topicAt, topicAt + topicLength(type, body, at)),
      payloadPosition: payloadPositionOf(type, body, at),
      position,
    });
  }
}
