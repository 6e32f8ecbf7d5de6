/**
 * list() on the embedded queue against a reference model (a sorted array), on random operation
 * sequences from seeded randoms: schedules near and far (many sharing due times), cancels,
 * reschedules, time passing (messages fire and become ready), receives (in flight), and
 * listings with random limits and ranges, with more operations between their pages. The file
 * store runs with a tiny `listScanRecords`, so that pages stop early (fewer messages than the
 * limit, with a cursor) and due times held by more messages than a page examines are read
 * whole.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/index.js';
import { DelayQueue } from '../../src/delay-queue.js';
import type { ListOptions, MessageInfo } from '../../src/queue/types.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { seededInt } from '../support/random.mjs';
import { useTempDirs } from '../support/temp-dir.js';

const START = 1_700_000_000_000;
const HOUR = 3_600_000;
const TOPICS = ['a', 'a', 'a', 'a', 'a', 'a', 'a', 'a', 'b', 'c'];

interface Modelled {
  topic: string;
  deliverAt: number;
  /** The order of its first schedule: equal due times list in it. */
  seq: number;
  inflight: boolean;
}

const tempDir = useTempDirs('tickwheel-list-model-');
const opened: DelayQueue[] = [];
afterEach(async () => {
  for (const queue of opened.splice(0)) await queue.close();
});

const stores = {
  memory: async (clock: ManualClock) =>
    DelayQueue.open({ store: new MemoryStore(), clock, horizonMs: 2_000, visibilityMs: 10 * HOUR }),
  file: async (clock: ManualClock) =>
    DelayQueue.open({
      dir: tempDir(),
      clock,
      horizonMs: 2_000,
      windowMs: 1_000,
      visibilityMs: 10 * HOUR,
      listScanRecords: 3,
    }),
};

describe.each(Object.keys(stores) as Array<keyof typeof stores>)(
  'list() on the %s store',
  (store) => {
    it.each([1, 2, 3, 4, 5, 6])('matches the model, seed %i', async (seed) => {
      const int = seededInt(seed * 7919 + (store === 'file' ? 1 : 0));
      const clock = new ManualClock(START);
      const queue = await stores[store](clock);
      opened.push(queue);
      const model = new Map<string, Modelled>();
      const dues: number[] = [];
      let made = 0;

      const pending = () => [...model.keys()];
      const pick = () => {
        const all = pending();
        return all.length === 0 ? undefined : all[int(all.length)];
      };
      const dueTime = () => {
        const now = clock.now();
        if (dues.length > 0 && int(3) === 0) return dues[int(dues.length)];
        const due = int(2) === 0 ? now + int(5_000) : now + HOUR + int(30 * 24) * HOUR + int(1000);
        dues.push(due);
        return due;
      };
      const keyOf = (id: string) => {
        const it = model.get(id)!;
        return [it.deliverAt, it.seq] as const;
      };
      const before = (a: readonly [number, number], b: readonly [number, number]) =>
        a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);

      /** One change; the ids it touched. */
      const change = async (): Promise<string[]> => {
        const what = int(10);
        if (what < 5) {
          const id = `m${made}`;
          const topic = TOPICS[int(TOPICS.length)];
          const deliverAt = dueTime();
          await queue.schedule({ topic, id, payload: made, deliverAt });
          model.set(id, { topic, deliverAt, seq: made++, inflight: false });
          return [id];
        }
        const id = pick();
        if (id === undefined) return [];
        if (what < 7) {
          expect(await queue.cancel(id)).toBe(true);
          model.delete(id);
          return [id];
        }
        if (what < 9 && !model.get(id)!.inflight) {
          const deliverAt = dueTime();
          expect(await queue.rescheduleTo(id, { deliverAt })).toBe(deliverAt);
          model.get(id)!.deliverAt = deliverAt;
          return [id];
        }
        return [];
      };

      const passTime = async () => {
        clock.advance(int(1_500));
        await queue.settled();
        clock.advance(0);
        if (int(2) === 0) {
          for (const message of await queue.receive('a', { max: 1 + int(3) })) {
            model.get(message.id)!.inflight = true;
          }
        }
      };

      const expectedStatus = (id: string) => {
        const it = model.get(id)!;
        if (it.inflight) return 'inflight';
        return it.deliverAt <= clock.now() ? 'ready' : 'scheduled';
      };

      const listPass = async (changing: boolean) => {
        // Whatever is due by now has fired.
        await queue.settled();
        clock.advance(0);
        const topic = TOPICS[int(TOPICS.length)];
        const options: ListOptions = { topic, limit: 1 + int(7) };
        if (int(3) === 0) options.from = clock.now() + int(2) * HOUR;
        if (int(3) === 0) options.until = clock.now() + int(20 * 24) * HOUR;
        if (
          options.until !== undefined &&
          options.from !== undefined &&
          options.until < options.from
        ) {
          options.until = options.from;
        }
        const inRange = (id: string) => {
          const it = model.get(id)!;
          return (
            it.topic === topic &&
            it.deliverAt >= (options.from ?? -Infinity) &&
            it.deliverAt < (options.until ?? Infinity)
          );
        };
        const sorted = () =>
          pending()
            .filter(inRange)
            .sort((x, y) => (before(keyOf(x), keyOf(y)) ? -1 : 1));
        const atStart = sorted();
        const touched = new Set<string>();
        const listed: MessageInfo[] = [];
        let last: readonly [number, number] | undefined;
        let cursor: string | undefined;
        for (let page = 0; ; page++) {
          expect(page).toBeLessThan(5_000);
          const got = await queue.list({ ...options, ...(cursor === undefined ? {} : { cursor }) });
          expect(got.messages.length).toBeLessThanOrEqual(options.limit!);
          for (const message of got.messages) {
            expect(model.has(message.id), message.id).toBe(true);
            expect(inRange(message.id)).toBe(true);
            expect(message.deliverAt).toBe(model.get(message.id)!.deliverAt);
            expect(message.status).toBe(expectedStatus(message.id));
            const key = keyOf(message.id);
            if (last !== undefined) expect(before(last, key), message.id).toBe(true);
            last = key;
            listed.push(message);
          }
          cursor = got.cursor;
          if (cursor === undefined) break;
          if (changing && int(2) === 0) for (const id of await change()) touched.add(id);
        }
        const ids = listed.map((message) => message.id);
        // A message moved later while listed may be listed again: no other one is.
        const once = ids.filter((id) => !touched.has(id));
        expect(new Set(once).size, JSON.stringify({ changing, ids })).toBe(once.length);
        if (!changing) expect(ids).toEqual(atStart);
        else {
          const stayed = atStart.filter((id) => !touched.has(id));
          expect(stayed.filter((id) => !ids.includes(id))).toEqual([]);
        }
      };

      for (let step = 0; step < 120; step++) {
        const what = int(10);
        if (what < 6) await change();
        else if (what < 8) await passTime();
        else await listPass(what === 9);
      }
      // Every topic, whole, unchanged while listed.
      await listPass(false);
    });
  },
);

describe('list() on the file store, bounded', () => {
  it('stops a page of a rare topic after listScanRecords records, with a cursor', async () => {
    const clock = new ManualClock(START);
    const queue = await DelayQueue.open({ dir: tempDir(), clock, listScanRecords: 10 });
    opened.push(queue);
    const far = START + 24 * HOUR;
    await queue.scheduleMany(
      Array.from({ length: 95 }, (_, i) => ({ topic: 'common', payload: i, deliverAt: far + i })),
    );
    await queue.schedule({ topic: 'rare', id: 'needle', payload: 0, deliverAt: far + 50 });
    const first = await queue.list({ topic: 'rare', limit: 5 });
    expect(first.messages).toEqual([]);
    expect(first.cursor).toEqual(expect.any(String));
    const pages: string[][] = [];
    let cursor = first.cursor;
    while (cursor !== undefined) {
      const page = await queue.list({ topic: 'rare', limit: 5, cursor });
      pages.push(page.messages.map((message) => message.id));
      cursor = page.cursor;
      expect(pages.length).toBeLessThan(100);
    }
    // 96 waiting messages, 10 records examined a page: about ten pages, one with the needle.
    expect(pages.length).toBeGreaterThanOrEqual(5);
    expect(pages.flat()).toEqual(['needle']);
    // The common topic fills its pages.
    expect((await queue.list({ topic: 'common', limit: 5 })).messages).toHaveLength(5);
  });

  it('refuses a listScanRecords that is not a whole number from 1 to 1,000,000', async () => {
    for (const listScanRecords of [0, 1.5, 2_000_000, Number.NaN]) {
      await expect(DelayQueue.open({ dir: tempDir(), listScanRecords })).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
      });
    }
  });
});

describe('list() on a store without listWaiting()', () => {
  it('is refused with a code that names what is missing', async () => {
    const store = new MemoryStore();
    Object.defineProperty(store, 'listWaiting', { value: undefined });
    const queue = await DelayQueue.open({ store });
    opened.push(queue);
    await expect(queue.list({ topic: 'a' })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
      message: expect.stringMatching(/listWaiting/),
    });
  });
});
