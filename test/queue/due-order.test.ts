import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import { T0 } from './harness.js';

/**
 * A clock whose time runs ahead of its alarms by `lag` ms: what a busy event loop does to a
 * real clock (a timer due at t runs at t + lag, while code that reads now() sees the later time).
 */
class LaggingClock extends ManualClock {
  lag = 0;
  override now(): number {
    return super.now() + this.lag;
  }
}

async function payloads(queue: DelayQueue, topic: string): Promise<unknown[]> {
  return (await queue.receive(topic, { max: 10 })).map((m) => m.payload);
}

describe('due order across the wheel and the due-at-once path', () => {
  it('a message due at once does not overtake one due earlier whose timer has not run yet', async () => {
    const clock = new LaggingClock(T0);
    const queue = await DelayQueue.open({ store: new MemoryStore(), clock });
    try {
      await queue.schedule({ topic: 't', payload: 'first', delayMs: 5 });
      clock.lag = 10; // the first one's timer (due at T0 + 5) is late
      await queue.schedule({ topic: 't', payload: 'second' }); // due at T0 + 10, already past
      await queue.schedule({ topic: 't', payload: 'third', deliverAt: T0 + 7 }); // past as well
      // Before the fix 'second' and 'third' were ready at once, ahead of 'first'. All three are
      // due by now: received at once, though the first one's timer has not run, 'first' ahead
      // of those ready after it ('third', scheduled into the past, cannot pass 'second', which
      // was ready before it existed).
      expect(await payloads(queue, 't')).toEqual(['first', 'second', 'third']);
      clock.advance(12);
      expect(await payloads(queue, 't')).toEqual([]);
    } finally {
      await queue.close();
    }
  });

  it('still hands a message due at once straight to a consumer when nothing is waiting to fire', async () => {
    const clock = new LaggingClock(T0);
    const queue = await DelayQueue.open({ store: new MemoryStore(), clock });
    try {
      await queue.schedule({ topic: 't', payload: 'later', delayMs: 60_000 });
      await queue.schedule({ topic: 't', payload: 'now' });
      expect(await payloads(queue, 't')).toEqual(['now']);
    } finally {
      await queue.close();
    }
  });

  it('on the system clock, messages scheduled one after another come out in that order', async () => {
    const queue = await DelayQueue.open({ store: new MemoryStore() });
    try {
      const wrong: string[] = [];
      for (let round = 0; round < 100; round++) {
        const topic = `r${round}`;
        for (let i = 0; i < 3; i++) {
          await queue.schedule({ topic, payload: i });
          if (round % 2 === 1)
            await new Promise((resolve) => setTimeout(resolve, Math.random() * 2));
        }
        const got: unknown[] = [];
        for (let tries = 0; tries < 50 && got.length < 3; tries++) {
          got.push(...(await queue.receive(topic, { max: 10, waitMs: 200 })).map((m) => m.payload));
        }
        if (got.join() !== '0,1,2') wrong.push(`round ${round}: ${got.join()}`);
      }
      expect(wrong).toEqual([]);
    } finally {
      await queue.close();
    }
  });
});

describe('a message due now', () => {
  it('is ready at once even when another one is due a millisecond later', async () => {
    // Found by the queue model test: 'now' went on the wheel behind 'soon' and a receive at
    // the same instant got nothing.
    const clock = new ManualClock(T0);
    const queue = await DelayQueue.open({ store: new MemoryStore(), clock });
    try {
      await queue.schedule({ topic: 't', payload: 'soon', delayMs: 1 });
      await queue.schedule({ topic: 't', payload: 'now' });
      expect(await payloads(queue, 't')).toEqual(['now']);
      clock.advance(1);
      expect(await payloads(queue, 't')).toEqual(['soon']);
    } finally {
      await queue.close();
    }
  });
});
