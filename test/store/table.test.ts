/**
 * The file store's tables (src/store/file/table.ts), without a disk: records are encoded as the
 * store writes them and applied one by one; the tables must agree with a model of plain Maps
 * (latest record, dead or not, payload segment, counts, index entries, near positions).
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { MessageState } from '../../src/queue/message.js';
import { minuteNumber } from '../../src/store/counts.js';
import { IdHash, hashId } from '../../src/store/file/id-table.js';
import { positionOf, segmentOf } from '../../src/store/log/positions.js';
import {
  BURY,
  FINISH,
  MOVE,
  OUTCOME_ACKED,
  OUTCOME_CANCELLED,
  SCHEDULE,
  encodeFinish,
  moveLength,
  scheduleLength,
  writeMove,
  writeScheduleHead,
} from '../../src/store/file/records.js';
import { ReplayWatcher, Tables } from '../../src/store/file/table.js';

const T0 = Date.UTC(2026, 0, 1);
const HOUR = 3_600_000;

type Entry = [deliverAt: number, position: number, low: number, high: number];

/** An IndexSink that keeps what it is given. */
class Entries {
  readonly list: Entry[] = [];
  append(deliverAt: number, position: number, low: number, high: number): void {
    this.list.push([deliverAt, position, low, high]);
  }
}

function state(id: string, topic: string, deliverAt: number, ref = 0): MessageState {
  return {
    id,
    topic,
    deliverAt,
    attempts: 0,
    maxAttempts: 3,
    backoff: undefined,
    payloadKind: 0,
    payload: Buffer.from(`payload of ${id}`),
    ref,
  };
}

/** A record body at offset `at` of a larger buffer, as in the log's staging buffer. */
function placedAt(body: Buffer, at: number): Buffer {
  const buf = Buffer.alloc(at + body.length + 3, 0xee);
  body.copy(buf, at);
  return buf;
}

function hashOf(id: string): [number, number] {
  const hash = new IdHash();
  hashId(id, hash);
  return [hash.low, hash.high];
}

/** A SCHEDULE body, as the file store writes one into the log's buffer. */
function encodeSchedule(message: MessageState, payload: Uint8Array): Buffer {
  const body = Buffer.allocUnsafe(scheduleLength(message, payload.byteLength));
  body.set(payload, writeScheduleHead(body, 0, message));
  return body;
}

/** A MOVE (or BURY) body. */
function encodeMove(message: MessageState, previousDeliverAt: number): Buffer {
  const body = Buffer.allocUnsafe(moveLength(message));
  writeMove(body, 0, message, previousDeliverAt);
  return body;
}

/** Drives one Tables with records the way FileStore writes them. */
class Writer {
  readonly entries = new Entries();
  readonly tables = new Tables(this.entries);
  private offset = 0;

  constructor(readonly at = 0) {}

  schedule(id: string, topic: string, deliverAt: number, position: number, reindex = false) {
    const body = encodeSchedule(state(id, topic, deliverAt), Buffer.from(`payload of ${id}`));
    this.apply(SCHEDULE, body, position, reindex);
  }

  /** A MOVE (or BURY) of a message whose SCHEDULE is at `payload`. */
  move(
    type: typeof MOVE | typeof BURY,
    id: string,
    topic: string,
    deliverAt: number,
    previous: number,
    payload: number,
    position: number,
    reindex = false,
  ) {
    this.apply(type, encodeMove(state(id, topic, deliverAt, payload), previous), position, reindex);
  }

  finish(id: string, topic: string, deliverAt: number, payload: number, position: number) {
    const outcome = position % 2 === 0 ? OUTCOME_ACKED : OUTCOME_CANCELLED;
    this.apply(FINISH, encodeFinish(state(id, topic, deliverAt, payload), outcome), position);
  }

  private apply(type: number, body: Buffer, position: number, reindex = false) {
    // Alternate between a body at 0 (replay) and one inside a larger buffer (live).
    const at = this.at === 0 ? 0 : this.at + (this.offset++ % 5);
    this.tables.apply(type, at === 0 ? body : placedAt(body, at), at, position, reindex);
  }
}

function counts(tables: Tables) {
  const { topics } = tables.tally.read();
  const minutes = tables.tally.dueMinutes();
  return {
    topics: [...topics].sort((a, b) => a[0].localeCompare(b[0])),
    minutes: [...minutes].sort((a, b) => a[0] - b[0]),
  };
}

describe('Tables: one record at a time', () => {
  it('a SCHEDULE makes its message live: latest record, payload segment, counts, index entry or near', () => {
    const w = new Writer(7);
    const p1 = positionOf(0, 100);
    const p2 = positionOf(3, 40);
    w.schedule('a', 'mail', T0 + 5, p1, false);
    w.schedule('b', 'sms', T0 + 2 * HOUR, p2, true);
    const { tables } = w;
    expect(tables.latest('a')).toBe(p1);
    expect(tables.latest('b')).toBe(p2);
    expect(tables.latest('c')).toBe(-1);
    expect(tables.live).toBe(2);
    expect([...tables.segmentLive]).toEqual([
      [0, 1],
      [3, 1],
    ]);
    // Not indexed: the queue holds it (near); indexed: an entry, and not near.
    expect([...tables.near]).toEqual([p1]);
    expect(w.entries.list).toEqual([[T0 + 2 * HOUR, p2, ...hashOf('b')]]);
    expect(counts(tables)).toEqual({
      topics: [
        ['mail', { pending: 1, dead: 0 }],
        ['sms', { pending: 1, dead: 0 }],
      ],
      minutes: [
        [minuteNumber(T0), 1],
        [minuteNumber(T0 + 2 * HOUR), 1],
      ],
    });
    expect(tables.isPendingAt('a', p1)).toBe(true);
    expect(tables.isPendingAt('a', p2)).toBe(false);
  });

  it('a MOVE changes the latest record and the hour counted; the previous one leaves near', () => {
    const w = new Writer();
    w.schedule('a', 'mail', T0, 10);
    w.move(MOVE, 'a', 'mail', T0 + 3 * HOUR, T0, 10, 20, true);
    const { tables } = w;
    expect(tables.latest('a')).toBe(20);
    expect(tables.near.size).toBe(0);
    expect(w.entries.list).toEqual([[T0 + 3 * HOUR, 20, ...hashOf('a')]]);
    expect(counts(tables).minutes).toEqual([[minuteNumber(T0 + 3 * HOUR), 1]]);
    // The payload stays where the SCHEDULE is.
    expect([...tables.segmentLive]).toEqual([[0, 1]]);
  });

  it('a BURY makes it dead; a MOVE of a dead one revives it; a SCHEDULE of a dead id replaces it', () => {
    const w = new Writer(3);
    const { tables } = w;
    w.schedule('a', 'mail', T0, positionOf(1, 0));
    w.move(BURY, 'a', 'mail', T0, T0, positionOf(1, 0), positionOf(1, 50));
    expect(tables.isDeadAt('a', positionOf(1, 50))).toBe(true);
    expect(tables.isPendingAt('a', positionOf(1, 50))).toBe(false);
    expect(tables.near.size).toBe(0);
    expect(counts(tables)).toEqual({ topics: [['mail', { pending: 0, dead: 1 }]], minutes: [] });

    w.move(MOVE, 'a', 'mail', T0 + HOUR, T0, positionOf(1, 0), positionOf(1, 90));
    expect(tables.isDeadAt('a', positionOf(1, 90))).toBe(false);
    expect(tables.deadIds.size).toBe(0);
    expect(counts(tables)).toEqual({
      topics: [['mail', { pending: 1, dead: 0 }]],
      minutes: [[minuteNumber(T0 + HOUR), 1]],
    });

    w.move(BURY, 'a', 'mail', T0 + HOUR, T0 + HOUR, positionOf(1, 0), positionOf(2, 0));
    w.schedule('a', 'sms', T0 + 2 * HOUR, positionOf(2, 70));
    expect(tables.latest('a')).toBe(positionOf(2, 70));
    expect(tables.deadIds.size).toBe(0);
    expect(tables.live).toBe(1);
    // The dead message's payload segment is released; the new one's counted.
    expect([...tables.segmentLive]).toEqual([[2, 1]]);
    expect(counts(tables)).toEqual({
      topics: [['sms', { pending: 1, dead: 0 }]],
      minutes: [[minuteNumber(T0 + 2 * HOUR), 1]],
    });
  });

  it('a FINISH ends the message and releases its payload segment', () => {
    const w = new Writer();
    const { tables } = w;
    w.schedule('a', 'mail', T0, positionOf(4, 8));
    w.schedule('b', 'mail', T0, positionOf(4, 80));
    w.finish('a', 'mail', T0, positionOf(4, 8), positionOf(5, 0));
    expect(tables.latest('a')).toBe(-1);
    expect([...tables.segmentLive]).toEqual([[4, 1]]);
    expect([...tables.near]).toEqual([positionOf(4, 80)]);
    w.finish('b', 'mail', T0, positionOf(4, 80), positionOf(5, 90));
    expect(tables.segmentLive.size).toBe(0);
    expect(tables.live).toBe(0);
    expect(tables.near.size).toBe(0);
    expect(counts(tables)).toEqual({ topics: [], minutes: [] });
  });

  it('a record of an id not in the tables changes nothing, and a replay watcher hears of it', () => {
    const w = new Writer();
    const heard: string[] = [];
    class Listener extends ReplayWatcher {
      override placed(deliverAt: number, position: number) {
        heard.push(`placed ${position} ${deliverAt - T0}`);
      }
      override scheduled() {
        heard.push('scheduled');
      }
      override finished(_low: number, _high: number, position: number) {
        heard.push(`finished ${position}`);
      }
      override unknown(type: number, _body: Buffer, _at: number, position: number) {
        heard.push(`unknown ${type} ${position}`);
      }
    }
    w.tables.replay = new Listener();
    w.move(MOVE, 'gone', 'mail', T0, T0, 1, 5);
    w.finish('gone', 'mail', T0, 1, 6);
    expect(w.tables.live).toBe(0);
    expect(counts(w.tables)).toEqual({ topics: [], minutes: [] });
    w.schedule('a', 'mail', T0 + 9, 7);
    w.schedule('b', 'mail', T0 + 9, 8, true);
    w.finish('a', 'mail', T0 + 9, 7, 9);
    expect(heard).toEqual([
      `unknown ${MOVE} 5`,
      `unknown ${FINISH} 6`,
      'scheduled',
      'placed 7 9',
      'scheduled',
      'finished 9',
    ]);
    // In a replay nothing is near: what the queue holds is worked out when the replay ends.
    expect(w.tables.near.size).toBe(0);
  });

  it('forget undoes a SCHEDULE whose write failed, and only that one', () => {
    const w = new Writer();
    const { tables } = w;
    w.schedule('a', 'mail', T0, positionOf(0, 10));
    w.move(MOVE, 'a', 'mail', T0 + 1, T0, positionOf(0, 10), positionOf(0, 20));
    // A message whose latest record is another is not touched.
    tables.forget(state('a', 'mail', T0, positionOf(0, 10)), positionOf(0, 10));
    expect(tables.latest('a')).toBe(positionOf(0, 20));
    w.schedule('b', 'sms', T0 + HOUR, positionOf(1, 0));
    tables.forget(state('b', 'sms', T0 + HOUR, positionOf(1, 0)), positionOf(1, 0));
    expect(tables.latest('b')).toBe(-1);
    expect([...tables.segmentLive]).toEqual([[0, 1]]);
    expect(counts(tables)).toEqual({
      topics: [['mail', { pending: 1, dead: 0 }]],
      minutes: [[minuteNumber(T0), 1]],
    });
  });

  it('keeps an id whose hash another live id holds apart, by its exact id', () => {
    // A snapshot in which "twin" shares its 64-bit hash with a live id that is not named here
    // (its slot holds position 1): it is kept in the collisions table.
    const [low, high] = hashOf('twin');
    const source = new Writer();
    source.tables.ids.add(low, high, 1, T0);
    source.tables.ids.beginCopy();
    source.tables.ids.copyStep(Infinity);
    const ids = source.tables.ids.endCopy()!;
    const w = new Writer(5);
    const { tables } = w;
    tables.adopt({
      position: 100,
      frontier: T0,
      windowMs: 1000,
      ids,
      collisions: [['twin', 50, T0 + 5]],
      dead: [],
      segmentLive: [[0, 2]],
      counts: { topics: [['mail', 2, 0]], minutes: [[T0, 2]], hours: [[T0, 2]] },
      near: Float64Array.from([50]),
      loaded: [],
    });
    expect(tables.latest('twin')).toBe(50);
    expect(tables.live).toBe(2);
    w.move(MOVE, 'twin', 'mail', T0 + 6, T0 + 5, 50, 120);
    expect(tables.latest('twin')).toBe(120);
    expect(tables.ids.get(low, high)).toBe(1); // the other id's slot is untouched
    expect(tables.latestCheck()(low, high, 120)).toBe(true);
    expect(tables.latestCheck()(low, high, 50)).toBe(false);
    expect([...tables.near]).toEqual([120]);
    w.move(BURY, 'twin', 'mail', T0 + 6, T0 + 6, 50, 130);
    expect(tables.isDeadAt('twin', 130)).toBe(true);
    w.finish('twin', 'mail', T0 + 6, 50, 140);
    expect(tables.collisions.has('twin')).toBe(false);
    // By hash, 'twin' now finds the other id's record: FileStore.lookup reads it and sees
    // another id there.
    expect(tables.latest('twin')).toBe(1);
    expect(tables.ids.get(low, high)).toBe(1);
    expect(tables.live).toBe(1);
    // Scheduled again: the hash is still taken, so it is kept apart again.
    w.schedule('twin', 'mail', T0 + 7, 150);
    expect(tables.latest('twin')).toBe(150);
    expect(tables.collisions.get('twin')).toEqual({ position: 150, deliverAt: T0 + 7 });
    expect(tables.ids.get(low, high)).toBe(1);
  });
});

/** The model: what each live message is, by id, and what the tables should say of it. */
interface Modelled {
  topic: string;
  deliverAt: number;
  /** Its latest record. */
  position: number;
  /** Its SCHEDULE record. */
  payload: number;
  dead: boolean;
}

type Op =
  | { kind: 'schedule'; id: number; topic: number; delay: number; reindex: boolean }
  | { kind: 'move'; id: number; delay: number; reindex: boolean }
  /** Of a dead message too: its BURY is then its latest record, and it is counted once. */
  | { kind: 'bury'; id: number }
  | { kind: 'finish'; id: number }
  | { kind: 'snapshot' };

/** Few ids, so that each goes through many lives: scheduled, moved, dead, revived, finished. */
const IDS = 5;
const TOPICS = ['mail', 'sms', 'push'];
const delayArb = fc.oneof(
  fc.integer({ min: 0, max: 10_000 }),
  fc.integer({ min: 0, max: 30 * HOUR }),
);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc
      .tuple(fc.nat(IDS - 1), fc.nat(TOPICS.length - 1), delayArb, fc.boolean())
      .map(([id, topic, delay, reindex]) => ({
        kind: 'schedule' as const,
        id,
        topic,
        delay,
        reindex,
      })),
  },
  {
    weight: 4,
    arbitrary: fc
      .tuple(fc.nat(IDS - 1), delayArb, fc.boolean())
      .map(([id, delay, reindex]) => ({ kind: 'move' as const, id, delay, reindex })),
  },
  { weight: 2, arbitrary: fc.nat(IDS - 1).map((id) => ({ kind: 'bury' as const, id })) },
  { weight: 3, arbitrary: fc.nat(IDS - 1).map((id) => ({ kind: 'finish' as const, id })) },
  { weight: 1, arbitrary: fc.constant({ kind: 'snapshot' as const }) },
);

function modelCounts(model: Map<string, Modelled>) {
  const result = {
    topics: new Map<string, { pending: number; dead: number }>(),
    minutes: new Map<number, number>(),
  };
  for (const m of model.values()) {
    const topic = result.topics.get(m.topic) ?? { pending: 0, dead: 0 };
    result.topics.set(m.topic, topic);
    if (m.dead) topic.dead++;
    else {
      topic.pending++;
      const minute = minuteNumber(m.deliverAt);
      result.minutes.set(minute, (result.minutes.get(minute) ?? 0) + 1);
    }
  }
  return {
    topics: [...result.topics].sort((a, b) => a[0].localeCompare(b[0])),
    minutes: [...result.minutes].sort((a, b) => a[0] - b[0]),
  };
}

/**
 * Applies random record sequences, as the queue and store would write them (a live id is never
 * scheduled again; moves, buries and finishes of ids that are not live come from messages
 * finished before the log begins), and compares after every record.
 */
function runModel(ops: Op[]): void {
  const model = new Map<string, Modelled>();
  const near = new Set<number>();
  const expectedEntries: Entry[] = [];
  let position = positionOf(0, 0);
  let writers = [new Writer(), new Writer(11)];
  let step = 0;
  const next = () => {
    // Records of a few hundred bytes, crossing into new segments now and then.
    position += step++ % 17 === 16 ? positionOf(1, 0) : 200 + (step % 7) * 30;
    return position;
  };
  for (const op of ops) {
    const id = op.kind === 'snapshot' ? '' : `id-${op.id}`;
    const now = model.get(id);
    switch (op.kind) {
      case 'schedule': {
        if (now !== undefined && !now.dead) continue; // the queue deduplicates live ids
        const p = next();
        const topic = TOPICS[op.topic];
        const deliverAt = T0 + op.delay;
        for (const w of writers) w.schedule(id, topic, deliverAt, p, op.reindex);
        model.set(id, { topic, deliverAt, position: p, payload: p, dead: false });
        if (op.reindex) expectedEntries.push([deliverAt, p, ...hashOf(id)]);
        else near.add(p);
        break;
      }
      case 'move': {
        const p = next();
        const deliverAt = T0 + op.delay;
        const topic = now?.topic ?? 'mail';
        const previous = now?.deliverAt ?? T0;
        for (const w of writers) {
          w.move(MOVE, id, topic, deliverAt, previous, now?.payload ?? 1, p, op.reindex);
        }
        if (now === undefined) break; // finished before the log begins: nothing changes
        near.delete(now.position);
        Object.assign(now, { deliverAt, position: p, dead: false });
        if (op.reindex) expectedEntries.push([deliverAt, p, ...hashOf(id)]);
        else near.add(p);
        break;
      }
      case 'bury': {
        const p = next();
        const topic = now?.topic ?? 'mail';
        const deliverAt = now?.deliverAt ?? T0;
        for (const w of writers)
          w.move(BURY, id, topic, deliverAt, deliverAt, now?.payload ?? 1, p);
        if (now === undefined) break;
        near.delete(now.position);
        Object.assign(now, { position: p, dead: true });
        break;
      }
      case 'finish': {
        const p = next();
        for (const w of writers) {
          w.finish(id, now?.topic ?? 'mail', now?.deliverAt ?? T0, now?.payload ?? 1, p);
        }
        if (now === undefined) break;
        near.delete(now.position);
        model.delete(id);
        break;
      }
      case 'snapshot': {
        // The second Tables is replaced by one adopted from a capture of the first: it must
        // go on answering the same.
        const source = writers[0];
        const ids = source.tables.ids;
        ids.beginCopy();
        ids.copyStep(Infinity);
        const copy = new Writer(11);
        copy.entries.list.push(...source.entries.list);
        copy.tables.adopt({
          position,
          frontier: T0,
          windowMs: 1000,
          ...source.tables.capture(ids.endCopy()!),
          loaded: [],
        });
        writers = [source, copy];
        break;
      }
    }
    const segments = new Map<number, number>();
    for (const m of model.values()) {
      const segment = segmentOf(m.payload);
      segments.set(segment, (segments.get(segment) ?? 0) + 1);
    }
    for (const { tables, entries } of writers) {
      for (let i = 0; i < IDS; i++) {
        const m = model.get(`id-${i}`);
        const latest = tables.latest(`id-${i}`);
        expect(latest).toBe(m?.position ?? -1);
        if (m !== undefined) {
          expect(tables.isDeadAt(`id-${i}`, latest)).toBe(m.dead);
          expect(tables.isPendingAt(`id-${i}`, latest)).toBe(!m.dead);
        }
      }
      expect(tables.live).toBe(model.size);
      expect(tables.deadIds.size).toBe([...model.values()].filter((m) => m.dead).length);
      expect(new Map(tables.segmentLive)).toEqual(segments);
      expect(counts(tables)).toEqual(modelCounts(model));
      expect(new Set(tables.near)).toEqual(near);
      expect(entries.list).toEqual(expectedEntries);
    }
  }
}

describe('Tables against a model of Maps', () => {
  it('agree after every record of random schedule / move / bury / finish sequences', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 40, maxLength: 150 }), (ops) => runModel(ops)),
      { seed: 20_260_101, numRuns: 300 },
    );
  });
});
