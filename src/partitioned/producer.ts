/**
 * The producer's side of a node: schedule, cancel, reschedule, get, requeue, straight to the
 * store whoever owns the partition. Group commit: a turn's schedules go as one schedule call per
 * partition, then one durability wait (the driver's `durable`) after the write has answered.
 */

import { randomBytes } from 'node:crypto';

import { TickwheelTypeError, isMaybeWritten, outcomeUnknown } from '../errors.js';
import { checkRequest, type CheckedRequest, type ScheduleRequest } from '../queue/message.js';
import type { EventSource } from '../queue/events.js';
import type { MessageInfo, TransactionClient } from '../queue/types.js';
import type {
  At,
  PartitionDriver,
  SchedAnswer,
  SchedChange,
  ScheduleAnswer,
  ScheduleEntry,
} from './driver.js';
import { TAG_LENGTH, encodeRecord, locatedId, placeOf } from './record.js';
import { turnBatches } from './gated-batches.js';

/** Messages without an id to one partition before the next one's turn (driver.locatedRun). */
const LOCATED_RUN = 128;
/**
 * A run also ends once its records reach this many bytes: one call's records stay far below
 * what a client can send as one statement (pg sends a bytea[] as hex text, twice the bytes).
 */
export const LOCATED_RUN_BYTES = 16 * 1024 * 1024;
/** Bytes of a located record's tag (base64url: 4 characters per 3 bytes). */
const TAG_BYTES = (TAG_LENGTH * 3) / 4;

export interface ProducerOptions {
  partitions: number;
  windowMs: number;
  maxPayloadBytes: number;
}

interface Pending {
  /** '' until the schedule call places a message scheduled without an id (its id is then located). */
  id: string;
  /** A located record's tag ('' for a message with an id). */
  tag: string;
  bucket: number;
  deliverAt: number;
  topic: string;
  record: Buffer;
  /** The call it came in, and its place in the call's results. */
  call: Call | undefined;
  slot: number;
}

/** What a schedule gave; `deduplicated` (its id was pending) is told to the queue, not the caller. */
type Scheduled = { id: string; deliverAt: number; deduplicated?: true };

/**
 * One schedule or scheduleMany call: one promise, settled when all its messages are, each
 * partition's written, or failed (a call over several partitions may fail in one and be written
 * in another: its error then names both).
 */
interface Call {
  results: Scheduled[];
  left: number;
  resolve: (results: Scheduled[]) => void;
  reject: (err: unknown) => void;
  /** The first failure of a partition's write of the call's messages. */
  failure?: { err: unknown };
  /** Its messages in partition writes that failed after they may have taken effect. */
  maybe: Pending[];
  /** Whether every message has the caller's own id (not one made where the store put it). */
  own: boolean;
}

export class Producer {
  private readonly batches = turnBatches<number, Pending>((partition, batch) => {
    void this.write(partition, batch);
  });
  /** Messages without an id so far: which partition's turn it is (from a random partition). */
  private located: number;
  private readonly locatedRun: number;
  /** Bytes of records in the current run (LOCATED_RUN_BYTES). */
  private runBytes = 0;
  private tags = Buffer.alloc(0);
  private tagAt = 0;

  constructor(
    private readonly driver: PartitionDriver,
    private readonly options: ProducerOptions,
  ) {
    this.locatedRun = driver.locatedRun ?? LOCATED_RUN;
    this.located = Math.floor(Math.random() * options.partitions) * this.locatedRun;
  }

  /** An id of '': the message is located, its id made from where the store put it. */
  schedule(request: CheckedRequest): Promise<{ id: string; deliverAt: number }> {
    return this.enqueue([this.prepare(request)]).then((results) => results[0]);
  }

  /** If a write fails, any subset may have been scheduled (ids make a retry harmless). */
  scheduleMany(requests: readonly CheckedRequest[]): Promise<Scheduled[]> {
    return this.enqueue(requests.map((request) => this.prepare(request)));
  }

  private enqueue(pendings: Pending[]): Promise<Scheduled[]> {
    return new Promise((resolve, reject) => {
      const call: Call = {
        results: new Array(pendings.length),
        left: pendings.length,
        resolve,
        reject,
        maybe: [],
        own: pendings.every((m) => m.id !== ''),
      };
      for (let slot = 0; slot < pendings.length; slot++) {
        const pending = pendings[slot];
        pending.call = call;
        pending.slot = slot;
        this.batches.add(this.partitionOf(pending), pending);
      }
    });
  }

  /** Its id's partition; without an id, the partition whose turn it is. */
  private partitionOf(pending: Pending): number {
    if (pending.id !== '') return placeOf(pending.id, this.options.partitions).partition;
    if (this.runBytes >= LOCATED_RUN_BYTES) this.nextRun();
    this.runBytes += pending.record.length;
    const turn = Math.floor(this.located++ / this.locatedRun);
    if (this.located % this.locatedRun === 0) this.runBytes = 0;
    return turn % this.options.partitions;
  }

  /** The next partition's turn for messages without an id. */
  private nextRun(): void {
    this.located = (Math.floor(this.located / this.locatedRun) + 1) * this.locatedRun;
    this.runBytes = 0;
  }

  /**
   * Messages scheduled as statements of the caller's open transaction (the driver's
   * scheduleIn), one partition after the other on its client: they exist if it commits. A
   * failure leaves the transaction for its owner to roll back.
   */
  async scheduleIn(
    client: TransactionClient,
    requests: readonly CheckedRequest[],
  ): Promise<Scheduled[]> {
    const { driver } = this;
    if (driver.scheduleIn === undefined) {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_OPTION',
        'this store cannot join a transaction',
      );
    }
    const results = new Array<Scheduled>(requests.length);
    const byPartition = new Map<number, Pending[]>();
    for (let slot = 0; slot < requests.length; slot++) {
      const pending = this.prepare(requests[slot]);
      pending.slot = slot;
      const partition = this.partitionOf(pending);
      const batch = byPartition.get(partition);
      if (batch === undefined) byPartition.set(partition, [pending]);
      else batch.push(pending);
    }
    // The caller's transaction holds these partitions until it ends: the node's next messages
    // without ids go elsewhere.
    this.nextRun();
    for (const [partition, batch] of byPartition) {
      const { entries, runs } = this.entriesOf(batch);
      const answer = await driver.scheduleIn(client, partition, entries);
      if (runs.length > 0) placeRuns(answer, batch, runs, partition);
      answered(batch, answer, (m, result) => (results[m.slot] = result));
    }
    return results;
  }

  /**
   * A recurring schedule's occurrence, made at most once while its mark lives (`markMs`)
   * whatever became of it since: true when made now; durable either way.
   */
  async scheduleOnce(request: ScheduleRequest, markMs: number): Promise<boolean> {
    const m = this.prepare(checkRequest(request, Date.now(), this.options.maxPayloadBytes));
    if (m.id === '') {
      throw new TickwheelTypeError('ERR_TICKWHEEL_INVALID_ID', 'scheduleOnce needs an id');
    }
    const { partition } = this.at(m.id);
    const { id, bucket, deliverAt, topic, record } = m;
    const message = { id, bucket, deliverAt, window: this.windowOf(deliverAt), topic, record };
    const made = await this.driver.scheduleOnce(partition, markMs, message);
    await this.driver.durable(partition, id);
    return made;
  }

  /**
   * Cancels a live message; resolves with what it was, read in the same call (a new message
   * given the same id right after cannot be mistaken for it).
   */
  async cancelGiving(id: string): Promise<EventSource | undefined> {
    const at = this.at(id);
    const cancelled = await this.driver.cancel(at);
    if (cancelled === undefined) return undefined;
    await this.driver.durable(at.partition, id);
    return { id, ...cancelled };
  }

  /** Moves a scheduled or ready message; resolves with the due time stored. */
  async rescheduleTo(id: string, due: number): Promise<number | undefined> {
    return (await this.move('reschedule', id, due)) ? due : undefined;
  }

  /** A reschedule, or a requeue (a dead message, its attempts reset); false if not so. */
  async move(kind: 'reschedule' | 'requeue', id: string, due: number): Promise<boolean> {
    const at = this.at(id);
    const done = await this.driver.move(kind, at, due, this.windowOf(due));
    if (done) await this.driver.durable(at.partition, id);
    return done;
  }

  async get(id: string): Promise<MessageInfo | undefined> {
    return this.driver.get(this.at(id));
  }

  private at(id: string): At {
    return { id, ...placeOf(id, this.options.partitions) };
  }

  private windowOf(due: number): number {
    return Math.floor(due / this.options.windowMs);
  }

  /** A checked request's record (the queue refuses ids starting with '@': located ids). */
  private prepare(checked: CheckedRequest): Pending {
    const { topic, deliverAt, maxAttempts, backoff, payload, trace } = checked;
    const fields = {
      id: '',
      topic,
      maxAttempts,
      backoff,
      payloadKind: payload.kind,
      payload: payload.bytes ?? payload.text ?? '',
      trace,
    };
    if (checked.id === '') {
      const tag = this.tag();
      const record = encodeRecord(fields, 0, { tag, deliverAt });
      return { id: '', tag, bucket: -1, deliverAt, topic, record, call: undefined, slot: 0 };
    }
    const id = checked.id;
    const { bucket } = placeOf(id, this.options.partitions);
    const record = encodeRecord({ ...fields, id }, bucket);
    return { id, tag: '', bucket, deliverAt, topic, record, call: undefined, slot: 0 };
  }

  /** A located record's random tag, from a pool filled 1,024 tags at a time. */
  private tag(): string {
    if (this.tagAt + TAG_BYTES > this.tags.length) {
      this.tags = randomBytes(TAG_BYTES * 1024);
      this.tagAt = 0;
    }
    return this.tags.toString('base64url', this.tagAt, (this.tagAt += TAG_BYTES));
  }

  /** A partition's batch as the store's schedule call takes it, and its runs without ids. */
  private entriesOf(batch: Pending[]): { entries: ScheduleEntry[]; runs: LocatedRun[] } {
    const { windowMs } = this.options;
    const entries: ScheduleEntry[] = [];
    const runs: LocatedRun[] = [];
    for (let i = 0; i < batch.length;) {
      const m = batch[i];
      const window = Math.floor(m.deliverAt / windowMs);
      if (m.id !== '') {
        const { id, bucket, deliverAt, topic, record } = m;
        entries.push({ kind: 'message', id, bucket, deliverAt, window, topic, record });
        i++;
        continue;
      }
      // A run: the messages without ids that follow, of the same window and topic.
      const run: LocatedRun = { start: i, end: i + 1, min: m.deliverAt, max: m.deliverAt };
      for (; run.end < batch.length; run.end++) {
        const next = batch[run.end];
        if (next.id !== '' || next.topic !== m.topic) break;
        if (Math.floor(next.deliverAt / windowMs) !== window) break;
        run.min = Math.min(run.min, next.deliverAt);
        run.max = Math.max(run.max, next.deliverAt);
      }
      const records = batch.slice(run.start, run.end).map((r) => r.record);
      const { min: earliest, max: latest } = run;
      entries.push({ kind: 'run', window, earliest, latest, topic: m.topic, records });
      runs.push(run);
      i = run.end;
    }
    return { entries, runs };
  }

  private async write(partition: number, batch: Pending[]): Promise<void> {
    const { entries, runs } = this.entriesOf(batch);
    // Once the schedule call answered the batch is written, whatever fails after.
    let written = false;
    try {
      const answer = await this.driver.schedule(partition, entries);
      written = true;
      if (runs.length > 0) placeRuns(answer, batch, runs, partition);
      const what = batch.length === 1 ? batch[0].id : `${batch.length} messages`;
      await this.driver.durable(partition, what);
      answered(batch, answer, (m, result) => {
        m.call!.results[m.slot] = result;
        settle(m.call!, 1);
      });
    } catch (err) {
      for (const [call, pendings] of byCall(batch)) {
        call.failure ??= { err };
        if (written || isMaybeWritten(err)) call.maybe.push(...pendings);
        settle(call, pendings.length);
      }
    }
  }

  /** A change of recurring schedules' records (kept with partition 0), as durable as a message. */
  async sched(change: SchedChange, what: string): Promise<SchedAnswer> {
    const answer = await this.driver.sched(change);
    await this.driver.durable(0, what);
    return answer;
  }
}

/** Messages `start` to `end` of a partition batch, without ids, sent as one located run. */
export interface LocatedRun {
  start: number;
  end: number;
  min: number;
  max: number;
}

/**
 * Gives each message of the located runs its id from where the store put them: a segment and
 * first index per run, two for a run straddling loadedUntil (the part before it went near).
 */
export function placeRuns(
  answer: Pick<ScheduleAnswer, 'loadedUntil' | 'where'>,
  batch: Pending[],
  runs: readonly LocatedRun[],
  partition: number,
): void {
  const { loadedUntil, where } = answer;
  let w = 0;
  for (const run of runs) {
    const straddles = run.min < loadedUntil && run.max >= loadedUntil;
    const parts = where.slice(w, w + (straddles ? 2 : 1));
    w += parts.length;
    const next = parts.map(({ first }) => first);
    for (let k = run.start; k < run.end; k++) {
      const m = batch[k];
      const part = parts.length === 2 && m.deliverAt >= loadedUntil ? 1 : 0;
      m.id = locatedId(partition, parts[part].segment, next[part]++, m.tag);
    }
  }
}

/** Each message's result from the store's answer: the due time of one pending already, if so. */
function answered(
  batch: readonly Pending[],
  answer: ScheduleAnswer,
  each: (m: Pending, result: Scheduled) => void,
): void {
  let explicit = 0;
  for (const m of batch) {
    const existing = m.tag !== '' ? undefined : answer.existing[explicit++];
    each(
      m,
      existing === undefined
        ? { id: m.id, deliverAt: m.deliverAt }
        : { id: m.id, deliverAt: existing, deduplicated: true },
    );
  }
}

function byCall(batch: readonly Pending[]): Map<Call, Pending[]> {
  const calls = new Map<Call, Pending[]>();
  for (const m of batch) {
    const pendings = calls.get(m.call!);
    if (pendings === undefined) calls.set(m.call!, [m]);
    else pendings.push(m);
  }
  return calls;
}

/** Counts `n` of the call's messages answered; the last one settles the call. */
function settle(call: Call, n: number): void {
  call.left -= n;
  if (call.left > 0) return;
  if (call.failure === undefined) call.resolve(call.results);
  else call.reject(failedCall(call, call.failure.err));
}

/**
 * A failed call's error: `err` itself when nothing of it was written, else a
 * TickwheelOutcomeError naming every message written or maybe written (a written one's located
 * id included). Repeating is safe only when every message had the caller's own id (a located id
 * cannot be given again).
 */
function failedCall(call: Call, err: unknown): unknown {
  const written = call.results.filter((result) => result !== undefined);
  if (written.length === 0 && call.maybe.length === 0) return err;
  const ids = [
    ...written.map((result) => result.id),
    ...call.maybe.map((m) => m.id).filter((id) => id !== ''),
  ];
  const subject = ids.length === 0 ? undefined : call.results.length === 1 ? ids[0] : ids;
  return outcomeUnknown(err, subject, call.own);
}
