/**
 * Takes whose visibility timeout ends in the same millisecond share one lease (one timer on the
 * wheel); what they share must not change when a message comes back: never before its own
 * take's timeout, and always once it has run out.
 */

import { describe, expect, it } from 'vitest';
import type { DelayQueue } from '../../src/delay-queue.js';
import type { ManualClock } from '../../src/index.js';
import { T0, settle, useQueues } from './harness.js';

const openQueue = useQueues();

async function pendingTimers(queue: DelayQueue): Promise<number> {
  const stats = await queue.stats();
  return stats.timers.pending;
}

/** Whether a message is still in flight (its visibility timeout has not run out). */
async function inFlight(queue: DelayQueue, id: string): Promise<boolean> {
  return (await queue.get(id))?.status === 'inflight';
}

/**
 * Advances the clock to 0.1 ms before a message's visibility timeout runs out (`ms` from now),
 * where it must still be in flight, and then to it, where it must not be.
 */
async function expectTimeoutIn(
  clock: ManualClock,
  queue: DelayQueue,
  id: string,
  ms: number,
): Promise<void> {
  clock.advance(ms - 0.1);
  await settle();
  expect(await inFlight(queue, id)).toBe(true);
  clock.advance(0.1);
  await settle();
  expect(await inFlight(queue, id)).toBe(false);
}

async function scheduleReady(queue: DelayQueue, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    ids.push((await queue.schedule({ topic: 't', payload: i, deliverAt: T0 })).id);
  }
  await settle();
  return ids;
}

describe('leases shared by takes', () => {
  it('takes in the same millisecond share one timer, and all come back together on time', async () => {
    const { clock, queue } = await openQueue();
    await scheduleReady(queue, 3);
    clock.advance(0);
    const timersBefore = await pendingTimers(queue);
    const a = await queue.receive('t', { visibilityMs: 1000 });
    const b = await queue.receive('t', { visibilityMs: 1000 });
    expect(a.length + b.length).toBe(2);
    // One lease timer for both takes (a second lease would be a second timer).
    expect(await pendingTimers(queue)).toBe(timersBefore + 1);
    // A take half a millisecond later ends in the next millisecond: a lease of its own.
    clock.advance(0.5);
    const c = await queue.receive('t', { visibilityMs: 1000 });
    expect(await pendingTimers(queue)).toBe(timersBefore + 2);

    clock.advance(999.4); // T0 + 999.9: nothing has run out
    await settle();
    for (const m of [...a, ...b, ...c]) expect(await inFlight(queue, m.id)).toBe(true);
    clock.advance(0.1); // T0 + 1000: the first two takes' timeout
    await settle();
    expect(await inFlight(queue, a[0].id)).toBe(false);
    expect(await inFlight(queue, b[0].id)).toBe(false);
    expect(await inFlight(queue, c[0].id)).toBe(true);
    clock.advance(1); // past T0 + 1000.5, the third take's timeout
    await settle();
    expect(await inFlight(queue, c[0].id)).toBe(false);
  });

  it('an ack of one message of a shared lease leaves the other on its timeout', async () => {
    const { clock, queue } = await openQueue();
    await scheduleReady(queue, 2);
    clock.advance(0);
    const [a] = await queue.receive('t', { visibilityMs: 200 });
    const [b] = await queue.receive('t', { visibilityMs: 200 });
    expect(await queue.ack(a.receipt)).toBe(true);
    await expectTimeoutIn(clock, queue, b.id, 200);
    expect((await queue.get(a.id))?.status).toBe('acked');
  });

  it('a take after every message of a lease was acked starts a new lease, which runs out', async () => {
    const { clock, queue } = await openQueue();
    await scheduleReady(queue, 2);
    clock.advance(0);
    const timersBefore = await pendingTimers(queue);
    const [a] = await queue.receive('t', { visibilityMs: 300 });
    expect(await queue.ack(a.receipt)).toBe(true);
    // The lease's timer was cleared with its last message.
    expect(await pendingTimers(queue)).toBe(timersBefore);
    // Same millisecond, same deadline: it must not join the lease whose timer is gone.
    const [b] = await queue.receive('t', { visibilityMs: 300 });
    expect(await pendingTimers(queue)).toBe(timersBefore + 1);
    await expectTimeoutIn(clock, queue, b.id, 300);
  });

  it('a message that left its lease and was taken again in the same millisecond times out once, in its latest place', async () => {
    const { clock, queue } = await openQueue();
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const { id } = await queue.schedule({
        topic: 't',
        payload: i,
        deliverAt: T0,
        backoff: { type: 'fixed', delayMs: 10 },
      });
      ids.push(id);
    }
    await settle();
    clock.advance(0);
    const [a] = await queue.receive('t', { visibilityMs: 100 });
    const [b] = await queue.receive('t', { visibilityMs: 100 });
    // Back at once, and taken again in the same millisecond: it rejoins the lease b holds open.
    expect(await queue.nack(a.receipt, { delayMs: 0 })).toBe(true);
    await settle();
    const [again] = await queue.receive('t', { visibilityMs: 100 });
    expect([again.id, again.attempts]).toEqual([a.id, 2]);
    const before = await queue.stats();
    await expectTimeoutIn(clock, queue, b.id, 100);
    expect(await inFlight(queue, a.id)).toBe(false);
    // Two messages timed out, each once.
    expect((await queue.stats()).expired - before.expired).toBe(2);
    // Their retries in the order of their latest takes: b, then a.
    clock.advance(10);
    await settle();
    clock.advance(0);
    const retried = await queue.receive('t', { max: 10 });
    expect(retried.map((m) => [m.id, m.attempts])).toEqual([
      [b.id, 2],
      [a.id, 3],
    ]);
  });

  it('a take after a lease ran out starts a new one, which runs out in its turn', async () => {
    const { clock, queue } = await openQueue();
    await scheduleReady(queue, 2);
    clock.advance(0);
    const [a] = await queue.receive('t', { visibilityMs: 100 });
    clock.advance(100);
    await settle();
    expect(await inFlight(queue, a.id)).toBe(false);
    // Taken in the millisecond the first lease ran out: a new lease, whose timer runs.
    const [b] = await queue.receive('t', { visibilityMs: 100 });
    expect(b.id).not.toBe(a.id);
    await expectTimeoutIn(clock, queue, b.id, 100);
  });
});
