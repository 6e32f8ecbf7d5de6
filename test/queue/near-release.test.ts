/**
 * Messages leaving memory (acked, cancelled) leave stale entries behind in the near horizon's
 * id map until a sweep drops them: none of that may show. An id is found in its current state
 * before and after the sweep, and an id reused after its message finished is a new message.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import type { DelayQueue } from '../../src/delay-queue.js';
import { T0, advance, fileKind, memoryKind, settle, type QueueKind } from './harness.js';

const kinds: QueueKind[] = [];
const queues: DelayQueue[] = [];
afterEach(async () => {
  for (const queue of queues.splice(0)) await queue.close();
  for (const kind of kinds.splice(0)) kind.cleanup();
});

async function receiveAll(queue: DelayQueue, topic: string, n: number) {
  const all = [];
  while (all.length < n) {
    const batch = await queue.receive(topic, { max: 1000 });
    expect(batch.length).toBeGreaterThan(0);
    all.push(...batch);
  }
  return all;
}

describe.each([
  ['memory', memoryKind],
  ['file', fileKind],
] as const)('messages leaving memory (%s store)', (_name, makeKind) => {
  it('are found in their state before and after the sweep, and their ids can be used again', async () => {
    const kind = makeKind();
    kinds.push(kind);
    const clock = new ManualClock(T0);
    const queue = await kind.open(clock);
    queues.push(queue);
    const n = 3000; // enough released messages for a sweep
    const ids = Array.from({ length: n }, (_, i) => `m${i}`);
    const schedule = () =>
      queue.scheduleMany(ids.map((id, i) => ({ id, topic: 't', payload: { i }, delayMs: 5 })));
    await schedule();
    await advance(clock, 10, 5, queue);
    const first = await receiveAll(queue, 't', n);
    expect(first.map((m) => m.id)).toEqual(ids);
    // Ack all but the last 500; cancel 100 of those.
    for (const message of first.slice(0, n - 500)) {
      expect(await queue.ack(message.receipt)).toBe(true);
    }
    expect(await queue.get('m0')).toMatchObject({ status: 'acked' });
    expect(await queue.get(`m${n - 1}`)).toMatchObject({ status: 'inflight' });
    for (const id of ids.slice(n - 100)) expect(await queue.cancel(id)).toBe(true);
    await settle(); // the sweep runs
    expect(await queue.get('m0')).toMatchObject({ status: 'acked' });
    expect(await queue.get(`m${n - 1}`)).toMatchObject({ status: 'cancelled' });
    expect(await queue.get(`m${n - 101}`)).toMatchObject({ status: 'inflight' });
    expect(await queue.cancel('m0')).toBe(false);
    expect(await queue.ack(first[0].receipt)).toBe(false);
    for (const message of first.slice(n - 500, n - 100)) {
      expect(await queue.ack(message.receipt)).toBe(true);
    }
    expect(((await queue.stats()) as { inMemory: number }).inMemory).toBe(0);

    // The same ids again: new messages, delivered once more, first attempt.
    const again = await schedule();
    expect(again.map((m) => m.id)).toEqual(ids);
    expect(await queue.get('m0')).toMatchObject({ status: 'scheduled', attempts: 0 });
    await advance(clock, 10, 5, queue);
    const second = await receiveAll(queue, 't', n);
    expect(second.map((m) => m.id)).toEqual(ids);
    expect(second.every((m) => m.attempts === 1)).toBe(true);
    expect(second.map((m) => (m.payload as { i: number }).i)).toEqual(ids.map((_, i) => i));
    expect(await queue.receive('t', { max: 1000 })).toEqual([]);
    for (const message of second) expect(await queue.ack(message.receipt)).toBe(true);
    await settle();
    expect(((await queue.stats()) as { inMemory: number }).inMemory).toBe(0);
    expect(await queue.get(`m${n - 1}`)).toMatchObject({ status: 'acked' });
  });
});
