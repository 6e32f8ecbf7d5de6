/**
 * A burst made ready at once: a topic's ready list makes room for the rest of the burst in one
 * go (near.ts fire(): the messages still scheduled for that millisecond), and no more than the
 * topic itself still has scheduled, so a burst spread over many topics does not give every
 * topic's list room for all of it. The lists are private: the test reads their capacity.
 */

import { describe, expect, it } from 'vitest';
import type { DelayQueue } from '../../src/delay-queue.js';
import { T0, advance, memoryKind, useQueues } from './harness.js';

const openQueue = useQueues();

function readyLists(queue: DelayQueue): Map<string, { capacity: number; length: number }> {
  return (
    queue as unknown as { near: { ready: Map<string, { capacity: number; length: number }> } }
  ).near.ready;
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
