/**
 * A horizon load hands its messages to the queue only when the whole load is done. A store may
 * hand over a copy of a message the queue already holds (for the file store: an index window
 * read again while its deletion is under way). If the queue acks, cancels, reschedules or
 * retries that message while the load runs, the copy is stale and must not come back.
 */

import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import type { MessageState } from '../../src/queue/message.js';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import { T0, advance, settle } from './harness.js';

/** A memory store whose next load also hands over `stale`, then waits for `release`. */
class StaleLoadStore extends MemoryStore {
  stale: MessageState | undefined;
  release: (() => void) | undefined;
  loading: Promise<void> | undefined;

  override async loadUntil(until: number, onDue: (message: MessageState) => void) {
    await super.loadUntil(until, onDue);
    const stale = this.stale;
    if (stale === undefined) return;
    this.stale = undefined;
    onDue({ ...stale });
    await new Promise<void>((resolve) => (this.release = resolve));
  }
}

describe.each(['ack', 'cancel', 'reschedule', 'nack'] as const)(
  'a load hands over a stale copy of a message that is %s-ed meanwhile',
  (change) => {
    it('the copy is not taken over: the message is not delivered again', async () => {
      const clock = new ManualClock(T0);
      const store = new StaleLoadStore();
      const queue = await DelayQueue.open({ store, clock, horizonMs: 1000 });
      try {
        const { id } = await queue.schedule({ topic: 't', payload: 'x', delayMs: 10 });
        await advance(clock, 20, 10, queue);
        const [message] = await queue.receive('t');
        expect(message.id).toBe(id);
        const copy = (await store.lookup(id)) as MessageState;
        store.stale = { ...copy, payload: Buffer.from('"x"') };
        // The next horizon tick starts a load; it stops after handing over the stale copy.
        clock.advance(300);
        await settle();
        expect(store.release).toBeDefined();
        if (change === 'ack') expect(await queue.ack(message.receipt)).toBe(true);
        if (change === 'cancel') expect(await queue.cancel(id)).toBe(true);
        if (change === 'reschedule') {
          expect(await queue.nack(message.receipt, { delayMs: 0 })).toBe(true);
          expect(await queue.reschedule(id, { delayMs: 5000 })).toBe(true);
        }
        if (change === 'nack')
          expect(await queue.nack(message.receipt, { delayMs: 5000 })).toBe(true);
        store.release?.();
        await queue.settled();
        await advance(clock, 1000, 100, queue);
        expect(await queue.receive('t', { max: 10 })).toEqual([]);
        const info = await queue.get(id);
        if (change === 'ack') expect(info?.status).toBe('acked');
        else if (change === 'cancel') expect(info?.status).toBe('cancelled');
        else expect(info?.deliverAt).toBeGreaterThan(clock.now());
      } finally {
        store.release?.();
        await queue.close();
      }
    });
  },
);

/** A memory store whose loads wait for `open()` while `gated` is set. */
class GatedLoadStore extends MemoryStore {
  gated = false;
  private waiting: (() => void) | undefined;
  loading = false;

  override async loadUntil(until: number, onDue: (message: MessageState) => void) {
    this.loading = true;
    if (this.gated) await new Promise<void>((resolve) => (this.waiting = resolve));
    try {
      return await super.loadUntil(until, onDue);
    } finally {
      this.loading = false;
    }
  }

  open(): void {
    this.gated = false;
    this.waiting?.();
  }
}

describe('a message held twice while a load runs', () => {
  it('is armed once after it: moved later again, it is not delivered at its earlier time', async () => {
    const clock = new ManualClock(T0);
    const store = new GatedLoadStore();
    const queue = await DelayQueue.open({ store, clock, horizonMs: 1000 });
    try {
      store.gated = true;
      clock.advance(250); // the horizon's tick starts a load, which waits
      await settle();
      expect(store.loading).toBe(true);
      // Held during the load (armed only after it), then moved: held a second time.
      await queue.schedule({ id: 'm', topic: 't', payload: 1, deliverAt: T0 + 600 });
      expect(await queue.reschedule('m', { deliverAt: T0 + 700 })).toBe(true);
      store.open();
      await queue.settled();
      await settle();
      expect(await queue.reschedule('m', { deliverAt: T0 + 1100 })).toBe(true);
      await advance(clock, 500, 50, queue); // T0 + 750: past both earlier due times
      expect(await queue.receive('t', { max: 10 })).toEqual([]);
      await advance(clock, 350, 50, queue); // T0 + 1100
      expect((await queue.receive('t', { max: 10 })).map((m) => m.id)).toEqual(['m']);
    } finally {
      store.open();
      await queue.close();
    }
  });
});
