/**
 * Messages leaving memory (acked, cancelled) leave stale entries behind in the near horizon's
 * id map until a sweep drops them: none of that may show. An id is found in its current state
 * before and after the sweep, and an id reused after its message finished is a new message.
 * The sweep moves the held messages into a new map a bounded step a turn of the event loop
 * (several turns for a large burst), looking in both maps meanwhile, and drops the whole map at
 * once when nothing is held: the tests below read the engine's private id maps to see that they
 * really shrink.
 */

import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import type { DelayQueue } from '../../src/delay-queue.js';
import { advance, fileKind, memoryKind, settle, useQueues } from './harness.js';

/** Enough releases in one turn that the sweep takes several turns (it moves 4,096 a turn). */
const BURST = 10_000;

const openQueue = useQueues();

async function receiveAll(queue: DelayQueue, topic: string, n: number) {
  const all = [];
  while (all.length < n) {
    const batch = await queue.receive(topic, { max: 1000 });
    expect(batch.length).toBeGreaterThan(0);
    all.push(...batch);
  }
  return all;
}

interface NearIds {
  byId: ReadonlyMap<string, unknown>;
  moving: { from: ReadonlyMap<string, unknown> } | undefined;
}

function nearIds(queue: DelayQueue): NearIds {
  return (queue as unknown as { backend: { near: { ids: NearIds } } }).backend.near.ids;
}

/**
 * The near horizon's id maps (private) as one: held messages, and stale entries not swept yet
 * (while a sweep moves entries, those of the old map not moved yet are still there).
 */
function idMap(queue: DelayQueue): ReadonlyMap<string, unknown> {
  const { byId, moving } = nearIds(queue);
  return moving === undefined ? byId : new Map([...moving.from, ...byId]);
}

/** A burst due together, delivered: BURST messages in flight in topic 't', ids m0.. */
async function deliveredBurst(queue: DelayQueue, clock: ManualClock) {
  const ids = Array.from({ length: BURST }, (_, i) => `m${i}`);
  await queue.scheduleMany(ids.map((id, i) => ({ id, topic: 't', payload: { i }, delayMs: 5 })));
  await advance(clock, 10, 5, queue);
  const delivered = await receiveAll(queue, 't', BURST);
  expect(delivered.map((m) => m.id)).toEqual(ids);
  return delivered;
}

describe.each([
  ['memory', memoryKind],
  ['file', fileKind],
] as const)('messages leaving memory (%s store)', (_name, makeKind) => {
  it('are found in their state before and after the sweep, and their ids can be used again', async () => {
    const { clock, queue } = await openQueue(makeKind);
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
    expect((await queue.stats()).inMemory).toBe(0);

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
    expect((await queue.stats()).inMemory).toBe(0);
    expect(await queue.get(`m${n - 1}`)).toMatchObject({ status: 'acked' });
  });

  it('sweeps a burst released in one turn over several turns, down to the held messages', async () => {
    const { clock, queue } = await openQueue(makeKind);
    const later = Array.from({ length: 10 }, (_, i) => `later${i}`);
    await queue.scheduleMany(
      later.map((id) => ({ id, topic: 'later', payload: { id }, delayMs: 500 })),
    );
    const delivered = await deliveredBurst(queue, clock);
    const kept = delivered.slice(BURST - 10); // left in flight
    const held = [...later, ...kept.map((m) => m.id)].sort();
    // ackMany releases every message before it returns: all the stale entries come in one turn.
    const acked = queue.ackMany(delivered.slice(0, BURST - 10).map((m) => m.receipt));
    expect(idMap(queue).size).toBe(BURST + later.length);
    await settle(1);
    // One turn moves a bounded step of the entries into the new map, not all.
    expect(nearIds(queue).moving).toBeDefined();
    expect(nearIds(queue).byId.size).toBeLessThan(held.length);
    expect(idMap(queue).size).toBe(BURST + later.length);
    for (const message of kept) {
      expect(await queue.get(message.id)).toMatchObject({ status: 'inflight', attempts: 1 });
    }
    expect((await acked).every(Boolean)).toBe(true);
    await settle(5);
    expect(nearIds(queue).moving).toBeUndefined();
    expect([...idMap(queue).keys()].sort()).toEqual(held);
    expect((await queue.stats()).inMemory).toBe(held.length);

    // Every held message is still found by id, in its state.
    for (const message of kept) {
      expect(await queue.get(message.id)).toMatchObject({ status: 'inflight', attempts: 1 });
    }
    for (const id of later) expect(await queue.get(id)).toMatchObject({ status: 'scheduled' });
    expect(await queue.get('m0')).toMatchObject({ status: 'acked' });
    // A cancel that found the message takes it out of flight: its receipt no longer acks.
    expect(await queue.cancel(kept[0].id)).toBe(true);
    expect(await queue.ack(kept[0].receipt)).toBe(false);
    for (const message of kept.slice(1)) expect(await queue.ack(message.receipt)).toBe(true);
    expect(await queue.cancel('later0')).toBe(true);
    expect(await queue.reschedule('later1', { delayMs: 100 })).toBe(true);
    await advance(clock, 600, 100, queue);
    const rest = await queue.receive('later', { max: 100 });
    expect(rest.map((m) => m.id)).toEqual(later.slice(1));
    expect(await queue.ackMany(rest.map((m) => m.receipt))).toEqual(rest.map(() => true));
    await settle();
    expect(idMap(queue).size).toBe(0);
  });

  it('drops the whole id map on the next turn once nothing is held, even mid-sweep', async () => {
    const { clock, queue } = await openQueue(makeKind);
    const first = await deliveredBurst(queue, clock);
    const last = first[BURST - 1];
    const acked = queue.ackMany(first.slice(0, BURST - 1).map((m) => m.receipt));
    await settle(1);
    expect(idMap(queue).size).toBeGreaterThan(1); // a sweep under way, `last` still held
    const ackedLast = queue.ack(last.receipt); // nothing held any more
    await settle(1);
    expect(idMap(queue).size).toBe(0);
    expect((await acked).every(Boolean)).toBe(true);
    expect(await ackedLast).toBe(true);

    // The same at the start of a sweep: a burst drained in one turn leaves no map behind.
    const second = await deliveredBurst(queue, clock);
    expect(second.every((m) => m.attempts === 1)).toBe(true);
    const ackedSecond = queue.ackMany(second.map((m) => m.receipt));
    await settle(1);
    expect(idMap(queue).size).toBe(0);
    expect((await ackedSecond).every(Boolean)).toBe(true);
    expect(await queue.get('m0')).toMatchObject({ status: 'acked' });
    await queue.schedule({ id: 'm0', topic: 't', payload: {}, delayMs: 5 });
    expect(await queue.get('m0')).toMatchObject({ status: 'scheduled', attempts: 0 });
    expect([...idMap(queue).keys()]).toEqual(['m0']);
  });
});

// The file store's writes take more turns than a sweep of BURST entries: holding ids again
// mid-sweep is only certain with the memory store (the sweep is the same for both).
describe('ids held again mid-sweep (memory store)', () => {
  it('keeps an id held again while the sweep runs, and delivers it exactly once', async () => {
    const { clock, queue } = await openQueue(memoryKind);
    await queue.scheduleMany([
      { id: 'keep', topic: 'keep', payload: {}, delayMs: 500 }, // held throughout
      { id: 'r0', topic: 'moved', payload: { r: 0 }, delayMs: 500 },
      { id: 'r1', topic: 'moved', payload: { r: 1 }, delayMs: 500 },
    ]);
    const delivered = await deliveredBurst(queue, clock);
    const acked = queue.ackMany(delivered.map((m) => m.receipt));
    await settle(1); // the sweep has done the first of several steps
    // Released in this sweep, held again before it reaches them: ids of the burst used again
    // by new messages, and a message rescheduled within the horizon, or out of it and back.
    // Started together, so that all are held before the sweep's next step; r1's in order (lock).
    const changed = await Promise.all([
      queue.schedule({ id: 'm9999', topic: 'again', payload: { again: 1 }, delayMs: 20 }),
      queue.schedule({ id: 'm9998', topic: 'again', payload: { again: 2 }, delayMs: 20 }),
      queue.reschedule('r0', { delayMs: 30 }),
      queue.reschedule('r1', { delayMs: 5000 }),
      queue.reschedule('r1', { delayMs: 40 }),
    ]);
    expect(changed.slice(2)).toEqual([true, true, true]);
    // The sweep goes in insertion order and has not reached m9997 yet, so none of the above.
    expect(idMap(queue).has('m9997')).toBe(true);
    expect((await acked).every(Boolean)).toBe(true);
    await settle(6);
    const held = ['keep', 'm9998', 'm9999', 'r0', 'r1'];
    expect([...idMap(queue).keys()].sort()).toEqual(held);
    for (const id of held) {
      expect(await queue.get(id)).toMatchObject({ status: 'scheduled', attempts: 0 });
    }

    await advance(clock, 100, 10, queue);
    const again = await queue.receive('again', { max: 100 });
    expect(again.map((m) => [m.id, m.payload, m.attempts])).toEqual([
      ['m9999', { again: 1 }, 1],
      ['m9998', { again: 2 }, 1],
    ]);
    const moved = await queue.receive('moved', { max: 100 });
    expect(moved.map((m) => [m.id, m.payload, m.attempts])).toEqual([
      ['r0', { r: 0 }, 1],
      ['r1', { r: 1 }, 1],
    ]);
    expect(await queue.ackMany([...again, ...moved].map((m) => m.receipt))).toEqual([
      true,
      true,
      true,
      true,
    ]);
    await advance(clock, 600, 100, queue);
    expect(await queue.receive('again', { max: 100 })).toEqual([]);
    expect(await queue.receive('moved', { max: 100 })).toEqual([]);
    expect((await queue.receive('keep', { max: 100 })).map((m) => m.id)).toEqual(['keep']);
  });
});
