/**
 * The message functions of one partition against a reference model, on a real Valkey: random
 * runs of schedule (with ids given, some of them duplicates, and without: located ids), load,
 * fire, take, ack, nack, cancel, reschedule and requeue. After every step each id's state
 * (tw_get) is the model's, the partition's counts are the model's, and reading every segment
 * (tw_read, as an owner loads them) finds exactly the model's scheduled messages with their due
 * times. At the end, with everything finished, no segment and no tombstone bitmap is left but
 * the current near segment (docs/cluster.md, "Located ids").
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { metaKey, partitionPrefix } from '../../src/cluster/keys.js';
import * as tw from '../../src/cluster/functions.js';
import type { ScheduleEntry } from '../../src/partitioned/driver.js';
import { placeRuns, type LocatedRun } from '../../src/partitioned/producer.js';
import { decodeRecord, encodeRecord, parseLocated, placeOf } from '../../src/partitioned/record.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed } from '../../scripts/valkey.mjs';
import { seededInt } from '../support/random.mjs';
import { withValkey } from './with-valkey.js';

const QUEUE = 'model';
const PARTITION = 3;
const PARTITIONS = 8;
const WINDOW_MS = 1_000;
const META = metaKey(QUEUE, PARTITION);
const P = partitionPrefix(QUEUE, PARTITION);
const TOPICS = ['mail', 'sms'];
const NODE = 'model-node';

type Status = 'S' | 'R' | 'I' | 'D';

interface Live {
  status: Status;
  due: string;
  attempts: number;
  topic: string;
  payload: string;
  maxAttempts: number;
}

describe.runIf(installed('valkey-server'))('message functions against a model', () => {
  const servers = withValkey();

  /** A due time as the functions take it: the time, then its window. */
  const placeOfDue = (due: string) => [due, Math.floor(Number(due) / WINDOW_MS)] as const;
  const cmd = (...words: Array<string | number>) => servers.valkey.command(META, words.map(String));
  const bucketOf = (id: string) => placeOf(id, PARTITIONS).bucket;

  /** How often the runs took the paths that are easy to miss. */
  const covered = { straddled: 0, nearLocated: 0 };

  async function run(seed: number): Promise<void> {
    const rand = seededInt(seed);
    await cmd('FLUSHALL');
    const [granted, epoch] = (await servers.valkey.fcall('tw_lease', META, [
      'acquire',
      NODE,
      0,
      600_000,
    ])) as number[];
    expect(granted).toBe(1);
    const model = new Map<string, Live>();
    const finished = new Map<string, 'A' | 'C'>();
    const ready: Record<string, string[]> = { mail: [], sms: [] };
    const everId = new Set<string>();
    // Due times in the past (so that the server's clock never calls a fire early), spread over
    // a few windows; loadedUntil moves through them.
    const base = Math.floor((Date.now() - 3_600_000) / WINDOW_MS) * WINDOW_MS;
    let loadedUntil = base;
    let payloads = 0;
    const newDue = () =>
      String(base + rand(8 * WINDOW_MS) + (rand(10) === 0 ? 0.5 : 0)).replace(/\.0$/, '');
    const count = (topic: string, status: Status, by: number) => {
      const key = `${topic}|${status}`;
      counts.set(key, (counts.get(key) ?? 0) + by);
    };
    const counts = new Map<string, number>();
    const finish = (id: string, how: 'A' | 'C') => {
      const m = model.get(id)!;
      count(m.topic, m.status, -1);
      model.delete(id);
      finished.set(id, how);
    };
    const pick = (status?: Status): string | undefined => {
      const ids = [...model].filter(([, m]) => status === undefined || m.status === status);
      return ids.length === 0 ? undefined : ids[rand(ids.length)][0];
    };

    const steps: Array<() => Promise<void>> = [
      // schedule a batch of items: messages with ids given (some pending already: dedup)
      // and runs of messages without (one window and topic each, as a producer sends them)
      async () => {
        interface Sent {
          id: string;
          tag: string;
          topic: string;
          due: string;
          deliverAt: number;
          payload: string;
          maxAttempts: number;
          record: Buffer;
        }
        const make = (id: string, topic: string, due: string): Sent => {
          const payload = `payload-${payloads++}`;
          const maxAttempts = 1 + rand(3);
          const tag = id === '' ? `t${rand(1e6)}` : '';
          const fields = {
            id,
            topic,
            maxAttempts,
            backoff: undefined,
            payloadKind: 0,
            payload: Buffer.from(payload),
          };
          const deliverAt = Number(due);
          const record =
            id === ''
              ? encodeRecord(fields, 0, { tag, deliverAt })
              : encodeRecord(fields, bucketOf(id));
          return { id, tag, topic, due, deliverAt, payload, maxAttempts, record };
        };
        const batch: Sent[] = [];
        const runs: LocatedRun[] = [];
        const sent: ScheduleEntry[] = [];
        for (let items = 1 + rand(4); items > 0; items--) {
          const topic = TOPICS[rand(2)];
          if (rand(5) < 2) {
            const m = make(`given-${rand(25)}`, topic, newDue());
            const window = Math.floor(m.deliverAt / WINDOW_MS);
            const { id, deliverAt, record } = m;
            sent.push({
              kind: 'message',
              id,
              bucket: bucketOf(id),
              deliverAt,
              window,
              topic,
              record,
            });
            batch.push(m);
            continue;
          }
          const window = Math.floor(Number(newDue()) / WINDOW_MS);
          const k = 1 + rand(5);
          const run: LocatedRun = {
            start: batch.length,
            end: batch.length + k,
            min: Infinity,
            max: -Infinity,
          };
          for (let j = 0; j < k; j++) {
            const m = make('', topic, String(window * WINDOW_MS + rand(WINDOW_MS)));
            run.min = Math.min(run.min, m.deliverAt);
            run.max = Math.max(run.max, m.deliverAt);
            batch.push(m);
          }
          const records = batch.slice(run.start, run.end).map((m) => m.record);
          sent.push({ kind: 'run', window, earliest: run.min, latest: run.max, topic, records });
          runs.push(run);
        }
        const answer = await tw.schedule(servers.valkey, META, sent);
        if (runs.length > 0) {
          placeRuns(answer, batch as never, runs, PARTITION);
          const until = answer.loadedUntil;
          covered.straddled += runs.filter((r) => r.min < until && r.max >= until).length;
          covered.nearLocated += batch.filter((m) => m.tag !== '' && m.deliverAt < until).length;
        }
        const seen = new Map<string, string>();
        let explicit = 0;
        for (const m of batch) {
          if (m.tag !== '') {
            expect(parseLocated(m.id)).toMatchObject({ partition: PARTITION, tag: m.tag });
            expect(everId.has(m.id)).toBe(false);
          } else {
            const existing = answer.existing[explicit++];
            const prior = seen.get(m.id) ?? model.get(m.id)?.due;
            if (prior !== undefined) {
              expect(String(existing)).toBe(prior);
              continue;
            }
            expect(existing).toBeUndefined();
            seen.set(m.id, m.due);
          }
          everId.add(m.id);
          finished.delete(m.id);
          model.set(m.id, { ...m, status: 'S', attempts: 0 });
          count(m.topic, 'S', 1);
        }
      },
      // the owner loads the next stretch of time (sometimes starting a new near segment)
      async () => {
        // (Not always at a window's end: then a run of located records can straddle it.)
        loadedUntil += rand(2 * WINDOW_MS);
        const reply = (await servers.valkey.fcall('tw_load', META, [
          NODE,
          epoch,
          loadedUntil,
          rand(3) === 0 ? '1' : '0',
        ])) as unknown[];
        expect(Number(reply[0])).toBe(1);
      },
      // the owner fires some of what it finds scheduled in the segments
      async () => {
        const found = await readAll();
        const chosen = found.filter(() => rand(2) === 0);
        if (chosen.length === 0) return;
        const args: Array<string | number> = [NODE, epoch, 250, chosen.length];
        for (const f of chosen) args.push(f.id, bucketOf(f.id), f.seg, f.index);
        const [fired] = (await servers.valkey.fcall('tw_fire', META, args)) as number[];
        expect(Number(fired)).toBe(chosen.length);
        for (const f of chosen) {
          const m = model.get(f.id)!;
          count(m.topic, 'S', -1);
          count(m.topic, 'R', 1);
          m.status = 'R';
          ready[m.topic].push(f.id);
        }
      },
      // a consumer takes up to 3 of a topic, in the order they became ready
      async () => {
        const topic = TOPICS[rand(2)];
        const max = 1 + rand(3);
        const rows = (await servers.valkey.fcall(
          'tw_take',
          META,
          [topic, max, 60_000, 1 << 20],
          true,
        )) as Array<[Buffer, number, Buffer, Buffer]>;
        const expected: string[] = [];
        while (expected.length < max && ready[topic].length > 0) {
          const id = ready[topic].shift()!;
          // An entry left by a cancelled delivery of the same id is where the server finds the
          // id ready: it is taken there, once (its later entry then finds it in flight).
          if (model.get(id)?.status === 'R' && !expected.includes(id)) expected.push(id);
        }
        expect(rows.map((r) => String(r[0]))).toEqual(expected);
        for (const [idBuf, attempts, due, record] of rows) {
          const m = model.get(String(idBuf))!;
          m.status = 'I';
          m.attempts++;
          count(topic, 'R', -1);
          count(topic, 'I', 1);
          expect(Number(attempts)).toBe(m.attempts);
          expect(String(due)).toBe(m.due);
          expect(String(decodeRecord(record).payload)).toBe(m.payload);
        }
      },
      // ack an inflight delivery (and an ack of a stale attempt, which does nothing)
      async () => {
        const id = pick('I');
        if (id === undefined) return;
        const m = model.get(id)!;
        const ack = (attempt: number) =>
          tw.ack(servers.valkey, META, [{ id, bucket: bucketOf(id), attempt }]);
        expect(await ack(m.attempts + 1)).toEqual([false]);
        expect(await ack(m.attempts)).toEqual([true]);
        finish(id, 'A');
      },
      // nack an inflight delivery: retried at a new due time, or dead after maxAttempts
      async () => {
        const id = pick('I');
        if (id === undefined) return;
        const m = model.get(id)!;
        const due = newDue();
        const reply = await servers.valkey.fcall('tw_nack', META, [
          id,
          bucketOf(id),
          m.attempts,
          ...placeOfDue(due),
          'failed',
        ]);
        count(m.topic, 'I', -1);
        if (m.attempts >= m.maxAttempts) {
          expect(reply).toBe('dead');
          m.status = 'D';
        } else {
          expect(reply).toBe('retry');
          m.status = 'S';
          m.due = due;
        }
        count(m.topic, m.status, 1);
      },
      // cancel a live message of any status, a finished one, or one that never was
      async () => {
        const choice = rand(4);
        const finishedIds = [...finished.keys()];
        const id =
          choice === 0 && finishedIds.length > 0
            ? finishedIds[rand(finishedIds.length)]
            : choice === 1
              ? `@3.w${rand(9)}.${rand(5)}.nothing`
              : pick();
        if (id === undefined) return;
        const cancelled = await tw.cancel(servers.valkey, META, { id, bucket: bucketOf(id) });
        const m = model.get(id);
        expect(cancelled).toEqual(
          m && { topic: m.topic, deliverAt: Number(m.due), attempts: m.attempts },
        );
        if (cancelled !== undefined) finish(id, 'C');
      },
      // reschedule a scheduled or ready message, scheduled again (one of another status is
      // refused; a ready one's entry stays in its ready list)
      async () => {
        const id = rand(4) === 0 ? pick() : pick(rand(2) === 0 ? 'S' : 'R');
        if (id === undefined) return;
        const m = model.get(id)!;
        const due = newDue();
        const done = Number(
          await servers.valkey.fcall('tw_reschedule', META, [id, bucketOf(id), ...placeOfDue(due)]),
        );
        expect(done).toBe(m.status === 'S' || m.status === 'R' ? 1 : 0);
        if (done !== 1) return;
        m.due = due;
        if (m.status === 'R') {
          count(m.topic, 'R', -1);
          count(m.topic, 'S', 1);
          m.status = 'S';
        }
      },
      // requeue a dead letter
      async () => {
        const id = pick('D');
        if (id === undefined) return;
        const m = model.get(id)!;
        const due = newDue();
        const done = await servers.valkey.fcall('tw_requeue', META, [
          id,
          bucketOf(id),
          ...placeOfDue(due),
        ]);
        expect(Number(done)).toBe(1);
        count(m.topic, 'D', -1);
        count(m.topic, 'S', 1);
        m.status = 'S';
        m.attempts = 0;
        m.due = due;
      },
    ];

    /** Every segment read as an owner would: the scheduled messages found, where. */
    async function readAll(): Promise<
      Array<{ id: string; seg: string; index: number; due: string }>
    > {
      const keys = (await cmd('KEYS', `${P}s:*`)) as string[];
      const out: Array<{ id: string; seg: string; index: number; due: string }> = [];
      for (const key of keys) {
        const seg = key.slice(P.length + 2);
        for (let from = 0; ; from += 50) {
          const [scanned, live] = (await servers.valkey.fcall(
            'tw_read',
            META,
            [seg, from, 50],
            true,
          )) as [number, Array<[number, Buffer, Buffer, number, Buffer, Buffer]>];
          for (const [index, status, due, , , id] of live) {
            if (String(status) === 'S') {
              out.push({ id: String(id), seg, index: Number(index), due: String(due) });
            }
          }
          if (Number(scanned) < 50) break;
        }
      }
      return out;
    }

    async function check(): Promise<void> {
      for (const id of everId) {
        const state = (await servers.valkey.fcall('tw_get', META, [id, bucketOf(id)])) as
          string | null;
        const m = model.get(id);
        if (m === undefined) {
          // Finished: remembered as acked or cancelled, or already forgotten.
          if (state !== null) expect(state[0]).toBe(finished.get(id));
          continue;
        }
        expect(state, id).not.toBeNull();
        const [status, , , due, attempts, topic] = String(state).split('|');
        expect({ id, status, due, attempts: Number(attempts), topic }).toEqual({
          id,
          status: m.status,
          due: m.due,
          attempts: m.attempts,
          topic: m.topic,
        });
        const found = (await servers.valkey.fcall('tw_record', META, [id, bucketOf(id)], true)) as [
          Buffer,
          Buffer,
        ];
        expect(String(decodeRecord(found[1]).payload)).toBe(m.payload);
      }
      const stored = (await cmd('HGETALL', `${P}counts`)) as Record<string, string>;
      const nonZero = (entries: Array<[string, number]>) =>
        Object.fromEntries(entries.filter(([, v]) => v !== 0).sort());
      expect(nonZero(Object.entries(stored).map(([k, v]) => [k, Number(v)]))).toEqual(
        nonZero([...counts]),
      );
      const scheduled = (await readAll()).map((f) => `${f.id} ${f.due}`).sort();
      const expected = [...model]
        .filter(([, m]) => m.status === 'S')
        .map(([id, m]) => `${id} ${m.due}`)
        .sort();
      expect(scheduled).toEqual(expected);
    }

    for (let step = 0; step < 120; step++) {
      await steps[rand(steps.length)]();
      await check();
    }
    // Finish everything: cancel what is live; then only the current near segment may remain,
    // and no tombstone bitmap outlives its segment.
    for (const id of [...model.keys()]) {
      expect(await tw.cancel(servers.valkey, META, { id, bucket: bucketOf(id) })).toBeDefined();
      finish(id, 'C');
    }
    await check();
    const near = `n${String((await cmd('HGET', META, 'near')) ?? '0')}`;
    const segments = ((await cmd('KEYS', `${P}s:*`)) as string[]).map((k) => k.slice(P.length + 2));
    expect(segments.filter((s) => s !== near)).toEqual([]);
    const tombs = ((await cmd('KEYS', `${P}t:*`)) as string[]).map((k) => k.slice(P.length + 2));
    expect(tombs.filter((s) => s !== near)).toEqual([]);
    expect(Number(await cmd('HLEN', `${P}live`)) <= 1).toBe(true);
  }

  it('agrees with the model over random runs of every message function', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 2 ** 31 - 1 }), (seed) => run(seed)),
      { numRuns: 25 },
    );
    expect(covered.straddled).toBeGreaterThan(0);
    expect(covered.nearLocated).toBeGreaterThan(0);
  }, 240_000);
});
