/**
 * One typed call per function of the tickwheel library (contracts beside each in lua/*.lua),
 * its reply read into named fields of the PartitionDriver's types (src/partitioned/driver.ts):
 * nothing else calls a function or reads a reply by position. `meta` (a partition's meta key)
 * picks the slot. Owner-only calls (load, fire, expire) answer undefined when the caller no
 * longer holds the partition's lease under its epoch. ClusterValkey is the connection that loads
 * the library (here, not in library.ts, which must load without @redis/client).
 */

import { TickwheelStateError } from '../errors.js';
import { describe } from '../validate.js';
import type { MessageStatus } from '../queue/message.js';
import type { RateLimit } from '../queue/topics.js';
import type { MessageInfo } from '../queue/types.js';
import type {
  Delivery,
  Id,
  Owner,
  Placed,
  Retry,
  SchedAnswer,
  SchedChange,
  ScheduleAnswer,
  ScheduleEntry,
  StoredRow,
  ToSchedule,
} from '../partitioned/driver.js';
import { Valkey } from '../valkey/connection.js';
import { LIBRARY, inLibraryFiles } from './library.js';

export class ClusterValkey extends Valkey {
  protected override readonly library = LIBRARY;
}

type Arg = string | number | Buffer;

async function call<T>(valkey: Valkey, fn: string, key: string, args: Arg[], buffers = false) {
  try {
    return (await valkey.fcall(fn, key, args, buffers)) as T;
  } catch (err) {
    if (err instanceof Error) err.message = inLibraryFiles(err.message);
    throw err;
  }
}

const str = (value: unknown): string => String(value ?? '');
const num = (value: unknown): number => Number(String(value));

type LeaseOp = 'acquire' | 'renew' | 'release';

/**
 * tw_lease: acquire (a new epoch, whatever `epoch` says), renew or release. `born`: server time
 * of the partition's first grant ('' before any); a change means its data was lost.
 */
export async function lease(valkey: Valkey, meta: string, op: LeaseOp, by: Owner, leaseMs = 0) {
  const reply = await call<unknown[]>(valkey, 'tw_lease', meta, [op, by.node, by.epoch, leaseMs]);
  const granted = Number(reply[0]) === 1;
  // A refused acquire names the holder and its time left before `born`.
  const born = str(op === 'acquire' && !granted ? reply[4] : reply[2]);
  return { granted, epoch: Number(reply[1]), born };
}

/** tw_config: the queue's fixed settings, as the first node wrote them. */
export async function config(valkey: Valkey, key: string, partitions: number, windowMs: number) {
  const [stored, window] = await call<unknown[]>(valkey, 'tw_config', key, [partitions, windowMs]);
  return { partitions: num(stored), windowMs: num(window) };
}

/** tw_heartbeat: `node` a member for `ttlMs` more (0: it leaves); the members, sorted. */
export async function heartbeat(valkey: Valkey, key: string, node: string, ttlMs: number) {
  return (await call<unknown[]>(valkey, 'tw_heartbeat', key, [node, ttlMs])).map(str).sort();
}

/** tw_tokens: up to `want` tokens of a topic's bucket (`want` < 0 gives them back). */
export async function tokens(valkey: Valkey, key: string, limit: RateLimit, want: number) {
  const args = [String(limit.perSecond), String(limit.burst), String(want)];
  const [granted, retryInMs] = await call<number[]>(valkey, 'tw_tokens', key, args);
  return { granted: Number(granted), retryInMs: Number(retryInMs) };
}

/** tw_schedule's arguments: its count of messages, then each message with an id or run. */
function scheduleArgs(entries: readonly ScheduleEntry[]): Arg[] {
  const args: Arg[] = [0];
  let count = 0;
  for (const entry of entries) {
    if (entry.kind === 'message') {
      const { id, bucket, deliverAt, window, topic, record } = entry;
      args.push(id, bucket, String(deliverAt), window, topic, record);
      count++;
      continue;
    }
    const { window, earliest, latest, topic, records } = entry;
    args.push('', window, String(earliest), String(latest), topic, records.length);
    args.push(packRecords(records));
    count += records.length;
  }
  args[0] = count;
  return args;
}

/** Records in one buffer, each after its length (u32 little-endian), as tw_schedule takes a run. */
export function packRecords(records: readonly Buffer[]): Buffer {
  let size = 0;
  for (const record of records) size += 4 + record.length;
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const record of records) {
    at = out.writeUInt32LE(record.length, at);
    at += record.copy(out, at);
  }
  return out;
}

/** tw_schedule: messages with ids and located runs, in order; a straddling run's place -1: none. */
export async function schedule(
  valkey: Valkey,
  meta: string,
  entries: readonly ScheduleEntry[],
): Promise<ScheduleAnswer> {
  let answer = await call<unknown>(valkey, 'tw_schedule', meta, scheduleArgs(entries));
  let loadedUntil = 0;
  const where: ScheduleAnswer['where'] = [];
  if (entries.some((entry) => entry.kind === 'run')) {
    const [ids, until, places] = Array.isArray(answer) ? answer : [];
    if (!Array.isArray(places)) {
      throw new TickwheelStateError(
        'ERR_TICKWHEEL_INVALID_STATE',
        `tw_schedule answered ${describe(answer)}, not where it put the messages without ids`,
      );
    }
    [answer, loadedUntil] = [ids, num(until)];
    for (let i = 0; i < places.length; i += 2) {
      where.push({ segment: str(places[i]), first: num(places[i + 1]) });
    }
  }
  // One integer when every message with an id was created.
  const existing = Array.isArray(answer)
    ? answer.map((entry: unknown) => (typeof entry === 'number' ? undefined : num(entry)))
    : [];
  return { existing, loadedUntil, where };
}

/** tw_schedule_once: true when made now, false when made before (its mark lives `markMs`). */
export async function scheduleOnce(valkey: Valkey, meta: string, markMs: number, m: ToSchedule) {
  const { id, bucket, deliverAt, window, topic, record } = m;
  const args = [String(markMs), id, bucket, String(deliverAt), window, topic, record];
  return (await call(valkey, 'tw_schedule_once', meta, args)) === 1;
}

/** Each status, by its letter in a state (lua/states.lua): S R I D A C. */
const STATUS: MessageStatus[] = ['scheduled', 'ready', 'inflight', 'dead', 'acked', 'cancelled'];

/** tw_get: a live message's state, or a recently finished one's. */
export async function get(valkey: Valkey, meta: string, m: Id): Promise<MessageInfo | undefined> {
  const state = await call(valkey, 'tw_get', meta, [m.id, m.bucket]);
  if (typeof state !== 'string') return undefined;
  // status | segment | index | deliverAt | attempts | topic (lua/states.lua)
  const [status, , , due, attempts, topic] = state.split('|');
  const info = { id: m.id, topic, status: STATUS['SRIDAC'.indexOf(status)] };
  return { ...info, deliverAt: Number(due), attempts: Number(attempts) };
}

/** tw_record: a live or dead message's record, with the due time its state holds. */
export async function stored(valkey: Valkey, meta: string, m: Id) {
  const found = await call<Buffer[] | null>(valkey, 'tw_record', meta, [m.id, m.bucket], true);
  if (found === null || found === undefined) return undefined;
  // status | segment | index | deliverAt | attempts | topic (lua/states.lua)
  return { deliverAt: num(str(found[0]).split('|')[3]), record: found[1] };
}

/** tw_cancel: what the message was when cancelled (read in the same call). */
export async function cancel(valkey: Valkey, meta: string, m: Id) {
  const reply = await call<unknown>(valkey, 'tw_cancel', meta, [m.id, m.bucket]);
  if (!Array.isArray(reply)) return undefined;
  return { topic: str(reply[1]), deliverAt: num(reply[2]), attempts: Number(reply[3]) };
}

/** tw_reschedule: a scheduled message due at `due` instead; tw_requeue: a dead letter, attempts 0. */
export async function move(
  valkey: Valkey,
  kind: 'reschedule' | 'requeue',
  meta: string,
  m: Id,
  due: number,
  window: number,
) {
  return (await call(valkey, `tw_${kind}`, meta, [m.id, m.bucket, String(due), window])) === 1;
}

/** tw_sched, on partition 0's meta: the recurring schedules' records. */
export async function sched(
  valkey: Valkey,
  meta: string,
  change: SchedChange,
): Promise<SchedAnswer> {
  const args = [change.op, change.name, String(change.version)];
  if (change.op !== 'del') args.push(change.record);
  if (change.op === 'put') args.push(String(change.most));
  if (change.op === 'save') args.push(change.by.node, String(change.by.epoch));
  const [done, version] = (await call<unknown[]>(valkey, 'tw_sched', meta, args)).map(Number);
  if (done === -2) return { done: false, fenced: false, version: 0, full: version };
  return { done: done === 1, fenced: done === -1, version };
}

/** tw_read: up to `max` records of a segment from `from`, those still current as `live`. */
export async function read(
  valkey: Valkey,
  meta: string,
  seg: string,
  from: number,
  max: number,
): Promise<{ scanned: number; live: StoredRow[] }> {
  type Row = [number, Buffer, Buffer, number, Buffer, Buffer];
  const args = [seg, from, max];
  const [scanned, rows] = await call<[number, Row[]]>(valkey, 'tw_read', meta, args, true);
  const live = rows.map(([index, status, due, attempts, record, id]) => ({
    index: Number(index),
    status: str(status),
    deliverAt: num(due),
    attempts: Number(attempts),
    record,
    id: str(id),
  }));
  return { scanned: Number(scanned), live };
}

/** tw_load: loadedUntil raised to at least `to`; with `rotate`, a new near segment. */
export async function load(valkey: Valkey, meta: string, by: Owner, to: number, rotate: boolean) {
  const args = [by.node, by.epoch, to, rotate ? 1 : 0];
  const reply = await call<unknown[]>(valkey, 'tw_load', meta, args);
  if (Number(reply[0]) !== 1) return undefined;
  return { loadedUntil: num(reply[1]), near: `n${str(reply[2])}`, seq: Number(reply[3]) };
}

/** tw_fire: scheduled -> ready where still so; `early`: due after server time + `skewMs`. */
export async function fire(
  valkey: Valkey,
  meta: string,
  by: Owner,
  skewMs: number,
  at: readonly Placed[],
) {
  const args: Arg[] = [by.node, by.epoch, skewMs, at.length];
  for (const d of at) args.push(d.id, d.bucket, d.seg, d.index);
  type Reply = [number, unknown[], number];
  const [fired, early, seq] = await call<Reply>(valkey, 'tw_fire', meta, args);
  if (Number(fired) === -1) return undefined;
  return { fired: Number(fired), early: early.map(str), seq: Number(seq) };
}

/**
 * tw_take: up to `max` ready messages of `topic` in flight, within `maxBytes` of records; a
 * `record` null or false: a message whose record was gone, dropped (driver.ts reports it).
 */
export async function take(
  valkey: Valkey,
  meta: string,
  topic: string,
  max: number,
  visibilityMs: number,
  maxBytes: number,
) {
  type Row = [Buffer, number, Buffer, Buffer | null | false];
  const args = [topic, max, visibilityMs, maxBytes];
  const rows = await call<Row[]>(valkey, 'tw_take', meta, args, true);
  return rows.map(([id, attempts, due, record]) => ({
    id: str(id),
    attempts: Number(attempts),
    deliverAt: num(due),
    record,
  }));
}

/** tw_ack: for each delivery, whether it was still out (and is now done). */
export async function ack(valkey: Valkey, meta: string, deliveries: readonly Delivery[]) {
  const args: Arg[] = [];
  for (const d of deliveries) args.push(d.id, d.bucket, d.attempt);
  return (await call<unknown[]>(valkey, 'tw_ack', meta, args)).map((done) => done === 1);
}

/**
 * tw_nack: a delivery failed: 'retry' (due again at `due`), 'dead', 'lost' (its record gone:
 * dropped), or undefined (not out).
 */
export async function nack(valkey: Valkey, meta: string, d: Retry, reason: string) {
  const args = [d.id, d.bucket, d.attempt, String(d.due), d.window, reason];
  const reply = String(await call(valkey, 'tw_nack', meta, args));
  return reply === 'retry' || reply === 'dead' || reply === 'lost' ? reply : undefined;
}

/** tw_overdue: up to `max` deliveries whose visibility ran out by `upTo`, oldest first (as take). */
export async function overdue(valkey: Valkey, meta: string, upTo: number, max: number) {
  type Row = [Buffer, Buffer, number, Buffer, Buffer | null | false, Buffer];
  const rows = await call<Row[]>(valkey, 'tw_overdue', meta, [String(upTo), max], true);
  return rows.map(([bucket, id, attempts, , record, due]) => ({
    id: str(id),
    bucket: num(bucket),
    attempts: Number(attempts),
    record,
    deliverAt: num(due),
  }));
}

/** tw_expire: deliveries past their visibility failed as by a nack, due again at `due`. */
export async function expire(
  valkey: Valkey,
  meta: string,
  by: Owner,
  deliveries: readonly Retry[],
) {
  const args: Arg[] = [by.node, by.epoch, deliveries.length];
  for (const d of deliveries) args.push(d.id, d.bucket, d.attempt, String(d.due), d.window);
  const reply = (await call<unknown[]>(valkey, 'tw_expire', meta, args)).map(Number);
  if (reply[0] === -1) return undefined;
  // Per delivery: left alone (not out with that attempt, or not past its deadline) or not.
  const outcomes = reply
    .slice(3)
    .map((o): 'left' | 'retried' | 'dead' => (o === 1 ? 'retried' : o === 2 ? 'dead' : 'left'));
  return { seq: reply[2], outcomes };
}
