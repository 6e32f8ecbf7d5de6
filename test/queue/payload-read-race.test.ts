import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import type { MessageState } from '../../src/queue/message.js';
import { T0, advance, settle } from './harness.js';

// A receive whose payloads are not in memory reads them from the store first, and the queue
// keeps running meanwhile. A delivery that ended during the read (cancelled, or timed out and
// taken again by another receive) must not be handed over: the first caller would get the
// other delivery's receipt, or none.

/** A memory store that drops payloads on load (as after a restart) and can hold reads back. */
class SlowReadStore extends MemoryStore {
  private gate: Promise<void> | undefined;
  private release: () => void = () => {};
  reads = 0;

  holdReads(): () => void {
    this.gate = new Promise<void>((resolve) => (this.release = resolve));
    return () => {
      this.gate = undefined;
      this.release();
    };
  }

  override loadUntil(until: number, onDue: (message: MessageState) => void): Promise<void> {
    return super.loadUntil(until, (message) => onDue({ ...message, payload: undefined }));
  }

  override async payloadOf(message: MessageState): Promise<Uint8Array> {
    this.reads++;
    const payload = await super.payloadOf(message);
    if (this.gate !== undefined) await this.gate;
    return payload;
  }
}

let queue: DelayQueue | undefined;
afterEach(async () => {
  await queue?.close();
  queue = undefined;
});

async function dueMessage(): Promise<{ store: SlowReadStore; clock: ManualClock; q: DelayQueue }> {
  const store = new SlowReadStore();
  const clock = new ManualClock(T0);
  const q = await DelayQueue.open({ store, clock, horizonMs: 1000 });
  queue = q;
  await q.schedule({
    id: 'a',
    topic: 't',
    payload: 'p',
    delayMs: 5000,
    backoff: { type: 'fixed', delayMs: 0 },
  });
  await advance(clock, 5100, 100, q);
  return { store, clock, q };
}

describe('a receive that reads payloads from the store', () => {
  it('does not hand over a message cancelled during the read', async () => {
    const { store, q } = await dueMessage();
    const open = store.holdReads();
    const receiving = q.receive('t', { visibilityMs: 1000 });
    await settle();
    expect(store.reads).toBe(1);
    expect(await q.cancel('a')).toBe(true);
    open();
    expect(await receiving).toEqual([]);
  });

  it('does not hand over a delivery that timed out and was taken again during the read', async () => {
    const { store, clock, q } = await dueMessage();
    const open = store.holdReads();
    const receiving = q.receive('t', { visibilityMs: 10 });
    await settle();
    expect(store.reads).toBe(1);
    // Its visibility runs out: retried at once (backoff 0) and taken by a second receive.
    const release = open;
    await advance(clock, 20, 5, q);
    const other = q.receive('t', { visibilityMs: 60_000 });
    release();
    const [first, second] = await Promise.all([receiving, other]);
    expect(first).toEqual([]);
    expect(second.map((m) => [m.id, m.attempts])).toEqual([['a', 2]]);
    expect(await q.ack(second[0].receipt)).toBe(true);
  });
});
