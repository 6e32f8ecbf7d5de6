/**
 * A burst made ready at once: a topic's ready list makes room for the rest of the burst in one
 * go (near.ts fire(): the messages still scheduled for that millisecond), and no more than the
 * topic itself still has scheduled, so a burst spread over many topics does not give every
 * topic's list room for all of it. The lists are private: the test reads their capacity.
 */

import { afterEach, describe, expect, it } from 'vitest';
import type { DelayQueue } from '../../src/delay-queue.js';
import { NearHorizon } from '../../src/queue/near.js';
import { T0, advance, memoryKind, useQueues } from './harness.js';
import { waitFor } from '../support/wait-for.js';

const openQueue = useQueues();

function readyLists(queue: DelayQueue): Map<string, { capacity: number; length: number }> {
  return (
    queue as unknown as {
      backend: { near: { ready: Map<string, { capacity: number; length: number }> } };
    }
  ).backend.near.ready;
}

describe('a burst made ready at once', () => {
  it('gives each topic room for its own share of the burst, not for all of it', async () => {
    const { clock, queue } = await openQueue(memoryKind);
    const topics = 50;
    const each = 100;
    const due = T0 + 500;
    await queue.scheduleMany(
      Array.from({ length: topics * each }, (_, i) => ({
        topic: `t${i % topics}`,
        payload: i,
        deliverAt: due,
      })),
    );
    await advance(clock, 500, 50, queue);
    const lists = readyLists(queue);
    expect(lists.size).toBe(topics);
    for (const list of lists.values()) {
      expect(list.length).toBe(each);
      expect(list.capacity).toBeLessThanOrEqual(128);
    }
    for (let t = 0; t < topics; t++) {
      const got = await queue.receive(`t${t}`, { max: 1000 });
      expect(got.map((m) => m.payload)).toEqual(
        Array.from({ length: each }, (_, k) => k * topics + t),
      );
    }
  });

  it('one topic: room for the whole burst, every message in order', async () => {
    const { clock, queue } = await openQueue(memoryKind);
    const n = 5000;
    const due = T0 + 500;
    await queue.scheduleMany(
      Array.from({ length: n }, (_, i) => ({ topic: 't', payload: i, deliverAt: due })),
    );
    await advance(clock, 500, 50, queue);
    const list = readyLists(queue).get('t');
    expect(list?.length).toBe(n);
    expect(list?.capacity).toBe(8192);
    const got = [];
    while (got.length < n) got.push(...(await queue.receive('t', { max: 1000 })));
    expect(got.map((m) => m.payload)).toEqual(Array.from({ length: n }, (_, i) => i));
  });
});

async function pendingTimers(queue: DelayQueue): Promise<number> {
  return (await queue.stats()).timers.pending;
}

describe('a busy millisecond shares one due timer', () => {
  const groupFrom = NearHorizon.groupFrom;
  afterEach(() => {
    NearHorizon.groupFrom = groupFrom;
  });

  it('from the 64th message of a millisecond on: one timer on the wheel for the rest', async () => {
    const { clock, queue } = await openQueue(memoryKind);
    const n = 5000;
    const due = T0 + 500;
    const before = await pendingTimers(queue);
    await queue.scheduleMany(
      Array.from({ length: n }, (_, i) => ({ topic: 't', payload: i, deliverAt: due })),
    );
    // Each of the first 63 has its own timer; the 64th made the group's.
    expect((await pendingTimers(queue)) - before).toBe(groupFrom);
    await advance(clock, 499, 50, queue);
    expect(await queue.receive('t', { max: 1000 })).toEqual([]); // never early
    await advance(clock, 1, 1, queue);
    const got = [];
    while (got.length < n) got.push(...(await queue.receive('t', { max: 1000 })));
    expect(got.map((m) => m.payload)).toEqual(Array.from({ length: n }, (_, i) => i));
  });

  it('a group takes every later message of its millisecond, dense or not any more: scheduling order holds', async () => {
    NearHorizon.groupFrom = 4;
    const { clock, queue } = await openQueue(memoryKind);
    const due = T0 + 300; // inside the horizon: held when scheduled
    const at = (id: string) => queue.schedule({ id, topic: 't', payload: id, deliverAt: due });
    for (let i = 0; i < 5; i++) await at(`a${i}`); // a3 makes the group; a4 joins it
    for (const id of ['a0', 'a1', 'a2']) expect(await queue.cancel(id)).toBe(true);
    await at('b0'); // 3 scheduled now: not dense, but the group still takes it
    await at('b1'); // dense again
    await queue.schedule({ id: 'early', topic: 't', payload: 'early', deliverAt: due - 1 });
    await queue.schedule({ id: 'late', topic: 't', payload: 'late', deliverAt: due + 1 });
    await advance(clock, 299, 100, queue);
    expect((await queue.receive('t', { max: 100 })).map((m) => m.id)).toEqual(['early']);
    await advance(clock, 2, 1, queue);
    expect((await queue.receive('t', { max: 100 })).map((m) => m.id)).toEqual([
      'a3',
      'a4',
      'b0',
      'b1',
      'late',
    ]);
  });

  it('a message of a group cancelled, rescheduled away or back fires as its last change says', async () => {
    NearHorizon.groupFrom = 3;
    const { clock, queue } = await openQueue(memoryKind);
    const due = T0 + 300; // inside the horizon: held when scheduled
    for (let i = 0; i < 6; i++) {
      await queue.schedule({ id: `m${i}`, topic: 't', payload: i, deliverAt: due });
    }
    expect(await queue.cancel('m3')).toBe(true);
    expect(await queue.reschedule('m4', { deliverAt: due + 500 })).toBe(true);
    expect(await queue.reschedule('m2', { deliverAt: due })).toBe(true);
    await advance(clock, 300, 100, queue);
    expect((await queue.receive('t', { max: 100 })).map((m) => m.id)).toEqual([
      'm0',
      'm1',
      'm5',
      'm2',
    ]);
    await advance(clock, 499, 100, queue);
    expect(await queue.receive('t', { max: 100 })).toEqual([]);
    await advance(clock, 1, 1, queue);
    expect((await queue.receive('t', { max: 100 })).map((m) => m.id)).toEqual(['m4']);
  });

  it('entries of messages that left a pending group are dropped as it grows: it stays near its live size', async () => {
    NearHorizon.groupFrom = 4;
    const { queue } = await openQueue(memoryKind);
    const due = T0 + 500;
    for (let i = 0; i < 100; i++)
      await queue.schedule({ id: `m${i}`, topic: 't', payload: i, deliverAt: due });
    for (let i = 0; i < 100; i++) expect(await queue.cancel(`m${i}`)).toBe(true);
    await queue.schedule({ id: 'r', topic: 't', payload: 'r', deliverAt: due });
    for (let i = 0; i < 1000; i++)
      expect(await queue.reschedule('r', { deliverAt: due })).toBe(true);
    const group = (
      queue as unknown as { backend: { near: { groups: Map<number, { messages: unknown[] }> } } }
    ).backend.near.groups.get(due);
    expect(group).toBeDefined();
    expect(group?.messages.length).toBeLessThanOrEqual(2 * 1 + 64 + 1);
  });

  it('a group that fires wakes as many waiting receives as it has messages of their topic', async () => {
    NearHorizon.groupFrom = 2;
    const { clock, queue } = await openQueue(memoryKind);
    const due = T0 + 300;
    // The first has a timer of its own; the group has a run of two of topic t.
    await queue.scheduleMany([
      { topic: 'u', payload: 'u1', deliverAt: due },
      { topic: 't', payload: 'a', deliverAt: due },
      { topic: 't', payload: 'b', deliverAt: due },
      { topic: 'u', payload: 'u2', deliverAt: due },
    ]);
    const waiting = [1, 2, 3].map(() => queue.receive('t', { max: 1, waitMs: 1000 }));
    const answered: string[] = [];
    for (const each of waiting)
      void each.then((got) => answered.push(...got.map((m) => `${m.payload}`)));
    await advance(clock, 300, 100, queue);
    await waitFor(() => answered.length === 2);
    expect(answered.sort()).toEqual(['a', 'b']);
    await advance(clock, 1000, 100, queue);
    expect((await Promise.all(waiting)).map((got) => got.length).sort()).toEqual([0, 1, 1]);
  });
});
