/**
 * The file store's tables of live messages, and `apply`, the one function that changes them,
 * live and in recovery's replay alike (HANDOUTs of messages in flight: only before a snapshot).
 *
 *   ids          id hash -> position of the message's latest record (IdTable); `collisions`
 *                holds it by exact id for an id whose 64-bit hash another live id holds
 *   deadIds      exact id -> its BURY record, for messages that used up their attempts
 *   segmentLive  log segment -> live messages whose payload (SCHEDULE record) is in it
 *   tally        per topic and per minute (counts.ts)
 *   near         latest positions of live messages the queue holds: they have no index entry
 *
 * A record points its id at itself (a FINISH removes it), takes the previous position out of
 * `near`, and keeps segmentLive, tally and deadIds (a BURY adds its id; any later record of the
 * id takes it out). A SCHEDULE, MOVE, HANDOUT or live RELOCATE is then placed: with `reindex` an
 * index entry, else a `near` position. A record other than a SCHEDULE or RELOCATE of an id not
 * in the tables changes nothing (its message finished before the log begins). A RELOCATE
 * (compaction.ts) moves its message's payload to itself, state unchanged; of an id not in the
 * tables (the segments before it deleted) it enters the message as it carries it.
 *
 * Invariants (checked against a model in test/store/table.test.ts): an id is in `ids` or in
 * `collisions`, never both, exactly while its message is live; a dead id's latest record is its
 * BURY; the sum of segmentLive is the number of live messages; every `near` position is the
 * latest record of a live message that is not dead. Pure: no I/O, no clock.
 */

import { debugAssert } from '../../assert.js';
import type { MessageState } from '../../queue/message.js';
import { readF64 } from '../bytes.js';
import { MessageCounts, TopicNames } from '../counts.js';
import { IdHash, IdTable, hashId, hashIdBytes, type IdTableArrays } from './id-table.js';
import { PositionSet } from './position-set.js';
import {
  BURY,
  FINISH,
  OUTCOME_CANCELLED,
  SCHEDULE,
  encodeFinish,
  idLength,
  idStart,
  payloadPositionOf,
  previousDeliverAt,
  RELOCATE,
  RELOCATE_PREFIX,
  recordDeliverAt,
  recordId,
  relocatedDead,
  relocatedFrom,
  relocatedRank,
  topicLength,
  topicStart,
} from './records.js';
import type { StoreSnapshot } from './snapshot.js';
import { segmentOf } from '../log/index.js';

/** The latest record of an id whose hash another live id owns. */
interface CollidedId {
  position: number;
  deliverAt: number;
}

interface DeadMessage {
  /** Its BURY record (or the RELOCATE that carried it). */
  position: number;
  /** What orders dead letters, oldest death first: its BURY's position, carried by a RELOCATE. */
  rank: number;
  /** Its SCHEDULE record, which keeps its segment. */
  payloadPosition: number;
  topic: string;
}

/** Where `apply` puts schedule-index entries. */
export interface IndexSink {
  append(deliverAt: number, position: number, low: number, high: number): void;
}

/** What a recovery's replay learns beyond the tables (this base learns nothing). */
export class ReplayWatcher {
  /** A SCHEDULE, MOVE or HANDOUT that is not indexed gave its message this due time. */
  placed(_deliverAt: number, _position: number, _low: number, _high: number): void {}
  /** A SCHEDULE record, its body at `body[at...]`. */
  scheduled(_body: Buffer, _at: number): void {}
  /** A FINISH of a message in the tables. */
  finished(_low: number, _high: number, _position: number): void {}
  /** A record other than SCHEDULE of a message not in the tables (none of its SCHEDULE). */
  unknown(
    _type: number,
    _body: Buffer,
    _at: number,
    _position: number,
    _low: number,
    _high: number,
  ): void {}
}

type TableSnapshot = Pick<
  StoreSnapshot,
  'ids' | 'collisions' | 'dead' | 'segmentLive' | 'counts' | 'near'
>;

export class Tables {
  readonly ids = new IdTable();
  readonly collisions = new Map<string, CollidedId>();
  readonly deadIds = new Map<string, DeadMessage>();
  readonly segmentLive = new Map<number, number>();
  readonly tally = new MessageCounts();
  near = new PositionSet();
  /** Only while a recovery replays the log; its absence tells `placed` to note near positions. */
  replay: ReplayWatcher | undefined;
  /** Low hash halves of ids in deadIds or collisions: apply() makes strings only for these. */
  private readonly exactLows = new Set<number>();
  private readonly topicNames = new TopicNames();
  /** Reused by every hash computed here: hashing allocates nothing. */
  private readonly hash = new IdHash();

  constructor(private readonly index: IndexSink) {}

  get live(): number {
    return this.ids.size + this.collisions.size;
  }

  /** Applies one record (body at `body[at...]`); `reindex`: it gets a schedule-index entry. */
  apply(type: number, body: Buffer, at: number, position: number, reindex: boolean): void {
    const hash = this.hash;
    hashIdBytes(body, at + idStart(type), idLength(type, body, at), hash);
    const low = hash.low;
    const high = hash.high;
    if (this.exactLows.size > 0 && this.collisions.size === 0 && this.deadIds.size === 0) {
      this.exactLows.clear(); // (clear() is not free even on an empty set: test first)
    }
    const exact = this.exactLows.size > 0 && this.exactLows.has(low);
    const id = exact ? recordId(type, body, at) : '';
    const topic = this.topicNames.name(
      body,
      at + topicStart(type, body, at),
      topicLength(type, body, at),
    );
    if (type === SCHEDULE) {
      const deliverAt = readF64(body, at);
      const replaced = exact ? this.deadIds.get(id) : undefined;
      if (replaced !== undefined) {
        // The same id scheduled again after it died: the dead message is replaced.
        this.release(segmentOf(replaced.payloadPosition));
        this.deadIds.delete(id);
        if (this.tally.finishDead(replaced.topic) && replaced.topic !== topic) {
          this.topicNames.forget(replaced.topic);
        }
        if (this.collisions.size === 0 || !this.collisions.delete(id)) this.ids.delete(low, high);
      }
      if (this.replay !== undefined) this.replay.scheduled(body, at);
      // A live id is never scheduled again (the queue deduplicates), so a taken slot means
      // another id with the same 64-bit hash: this one is kept apart, by its exact id.
      if (!this.ids.add(low, high, position, deliverAt)) {
        this.collisions.set(recordId(type, body, at), { position, deliverAt });
        this.exactLows.add(low);
      }
      const segment = segmentOf(position);
      this.segmentLive.set(segment, (this.segmentLive.get(segment) ?? 0) + 1);
      this.tally.add(topic, deliverAt);
      this.placed(deliverAt, position, low, high, reindex);
      return;
    }
    if (type === RELOCATE) {
      this.relocate(id, exact, low, high, topic, body, at, position, reindex);
      return;
    }
    const collided = exact ? this.collisions.get(id) : undefined;
    // A FINISH takes its id out of `ids` as it looks it up (one probe sequence, not two).
    const previous =
      collided !== undefined
        ? collided.position
        : type === FINISH
          ? this.ids.remove(low, high)
          : this.ids.get(low, high);
    if (previous < 0) {
      this.replay?.unknown(type, body, at, position, low, high);
      return;
    }
    this.near.delete(previous);
    const dead = exact ? this.deadIds.get(id) : undefined;
    if (type === FINISH) {
      this.replay?.finished(low, high, position);
      if (collided !== undefined) this.collisions.delete(id);
      if (dead !== undefined) this.deadIds.delete(id);
      const ended =
        dead !== undefined
          ? this.tally.finishDead(dead.topic)
          : this.tally.finish(topic, recordDeliverAt(FINISH, body, at));
      // A topic named per order or tenant keeps no name here once its messages have ended.
      if (ended) this.topicNames.forget(topic);
      this.release(segmentOf(payloadPositionOf(FINISH, body, at)));
      return;
    }
    const deliverAt = readF64(body, at);
    this.link(id, low, high, position, deliverAt);
    if (type === BURY) {
      if (dead === undefined) this.tally.bury(topic, previousDeliverAt(body, at));
      this.exactLows.add(low);
      this.deadIds.set(id === '' ? recordId(type, body, at) : id, {
        position,
        rank: position,
        payloadPosition: payloadPositionOf(BURY, body, at),
        topic,
      });
      return;
    }
    if (dead !== undefined) {
      this.deadIds.delete(id);
      this.tally.revive(topic, deliverAt);
    } else {
      this.tally.move(previousDeliverAt(body, at), deliverAt);
    }
    this.placed(deliverAt, position, low, high, reindex);
  }

  private relocate(
    exactId: string,
    exact: boolean,
    low: number,
    high: number,
    topic: string,
    body: Buffer,
    at: number,
    position: number,
    reindex: boolean,
  ): void {
    const deliverAt = recordDeliverAt(RELOCATE, body, at);
    const dead = relocatedDead(body, at);
    const collided = exact ? this.collisions.get(exactId) : undefined;
    const previous = collided !== undefined ? collided.position : this.ids.get(low, high);
    let id = exactId;
    if (previous >= 0) {
      this.near.delete(previous);
      this.link(id, low, high, position, deliverAt);
      this.release(segmentOf(relocatedFrom(body, at)));
    } else {
      // Its earlier records are not in the log any more: it enters as it is carried.
      if (this.replay !== undefined) this.replay.scheduled(body, at + RELOCATE_PREFIX);
      if (!this.ids.add(low, high, position, deliverAt)) {
        id ||= recordId(RELOCATE, body, at);
        this.collisions.set(id, { position, deliverAt });
        this.exactLows.add(low);
      }
      this.tally.add(topic, deliverAt);
      if (dead) this.tally.bury(topic, deliverAt);
    }
    const segment = segmentOf(position);
    this.segmentLive.set(segment, (this.segmentLive.get(segment) ?? 0) + 1);
    if (!dead) {
      this.placed(deliverAt, position, low, high, reindex);
      return;
    }
    this.exactLows.add(low);
    this.deadIds.set(id || recordId(RELOCATE, body, at), {
      position,
      rank: relocatedRank(body, at),
      payloadPosition: position,
      topic,
    });
  }

  latest(id: string): number {
    const collided = this.collisions.get(id);
    if (collided !== undefined) return collided.position;
    hashId(id, this.hash);
    return this.ids.get(this.hash.low, this.hash.high);
  }

  /** Whether the record at `position` is the BURY of a dead message of this id. */
  isDeadAt(id: string, position: number): boolean {
    return this.deadIds.get(id)?.position === position;
  }

  /** Whether the record at `position` is the latest of a live message of this id, not dead. */
  isPendingAt(id: string, position: number): boolean {
    return this.latest(id) === position && !this.isDeadAt(id, position);
  }

  /** Whether an index entry (low, high, position) is still its message's latest record. */
  latestCheck(): (low: number, high: number, position: number) => boolean {
    const collided = new Set<number>();
    for (const { position } of this.collisions.values()) collided.add(position);
    return (low, high, position) => this.ids.get(low, high) === position || collided.has(position);
  }

  /** Undoes a SCHEDULE whose write failed by applying a FINISH that is never written. */
  forget(message: MessageState, position: number): void {
    if (this.latest(message.id) !== position) return;
    this.apply(FINISH, encodeFinish(message, OUTCOME_CANCELLED), 0, position, false);
  }

  /** Replaces the (empty) tables with a snapshot's; its arrays are taken over, not copied. */
  adopt(snapshot: StoreSnapshot): void {
    this.ids.adoptArrays(snapshot.ids);
    for (const [id, position, deliverAt] of snapshot.collisions) {
      this.collisions.set(id, { position, deliverAt });
      hashId(id, this.hash);
      this.exactLows.add(this.hash.low);
    }
    for (const [id, position, payloadPosition, topic, rank] of snapshot.dead) {
      this.deadIds.set(id, { position, rank, payloadPosition, topic });
      hashId(id, this.hash);
      this.exactLows.add(this.hash.low);
    }
    for (const [segment, live] of snapshot.segmentLive) this.segmentLive.set(segment, live);
    this.tally.load(snapshot.counts);
    this.near = new PositionSet(snapshot.near);
  }

  /** A copy of the tables now, with `ids` copied by the caller in pieces (Checkpoints). */
  capture(ids: IdTableArrays): TableSnapshot {
    return {
      ids,
      collisions: [...this.collisions].map(([id, c]) => [id, c.position, c.deliverAt]),
      dead: [...this.deadIds].map(([id, d]) => [
        id,
        d.position,
        d.payloadPosition,
        d.topic,
        d.rank,
      ]),
      segmentLive: [...this.segmentLive],
      counts: this.tally.entries(),
      near: this.near.toArray(),
    };
  }

  private placed(deliverAt: number, position: number, low: number, high: number, reindex: boolean) {
    if (reindex) this.index.append(deliverAt, position, low, high);
    else if (this.replay === undefined) this.near.add(position);
    else this.replay.placed(deliverAt, position, low, high);
  }

  private link(id: string, low: number, high: number, position: number, deliverAt: number): void {
    const collided = this.collisions.size === 0 ? undefined : this.collisions.get(id);
    if (collided !== undefined) {
      collided.position = position;
      collided.deliverAt = deliverAt;
    } else {
      this.ids.set(low, high, position, deliverAt);
    }
  }

  private release(segment: number): void {
    if (segment < 0) return;
    const live = (this.segmentLive.get(segment) ?? 0) - 1;
    debugAssert(live >= 0, 'a message was finished whose payload segment counted no live one');
    if (live > 0) this.segmentLive.set(segment, live);
    else this.segmentLive.delete(segment);
  }
}
