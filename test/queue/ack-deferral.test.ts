/**
 * Deliveries first (src/queue/deliveries.ts): consume()'s acks wait while consumers keep taking
 * the ready messages of a burst, so that it is not delivered at the pace of the acks before it.
 * Every put-off ack is still applied, durably; never after half its visibility timeout, never
 * after its visibility timeout was acted on, and at once for anything that looks its message up
 * by id.
 */

import { setImmediate as realSetImmediate } from 'node:timers';
import { performance } from 'node:perf_hooks';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DelayQueue, MemoryStore, type QueueStats } from '../../src/delay-queue.js';
import { ManualClock } from '../../src/index.js';
import type { MessageState } from '../../src/queue/message.js';
import { Worker } from '../../src/queue/worker.js';
import { T0, advance, fileKind, settle, useQueues, type QueueKind } from './harness.js';
import { waitFor } from '../support/wait-for.js';

const openQueue = useQueues();

async function ackedNow(queue: DelayQueue): Promise<number> {
  return (await queue.stats()).acked;
}

/** Reopened on the same files: every ack was written, nothing comes back. */
async function expectNothingAfterReopen(kind: QueueKind, clock: ManualClock): Promise<void> {
  const reopened = await kind.open(clock);
  try {
    await advance(clock, 60_000, 5000, reopened);
    expect(await reopened.receive('jobs', { max: 10 })).toEqual([]);
    expect((await reopened.stats()).store?.live).toBe(0);
  } finally {
    await reopened.close();
  }
}

/** 3000 messages ready, a consumer that takes one a turn (its handler ends the next turn). */
async function oneATurn(visibilityMs = 1000) {
  const { clock, queue } = await openQueue();
  const scheduled = await queue.scheduleMany(
    Array.from({ length: 3000 }, (_, i) => ({ topic: 'jobs', payload: i })),
  );
  const received: string[] = [];
  const errors: unknown[] = [];
  const consumer = queue.consume(
    'jobs',
    (message) => {
      received.push(message.id);
      return new Promise<void>((resolve) => realSetImmediate(resolve));
    },
    { visibilityMs, onError: (err) => errors.push(err) },
  );
  const until = async (count: number) => {
    while (received.length < count) await settle(1);
  };
  return { clock, queue, consumer, received, errors, until, first: scheduled[0].id };
}

describe('consume() acks while a burst is delivered', () => {
  // The Worker's turn taken after 10 ms of real time would be a turn without a receive, which
  // applies put-off acks: on a loaded machine that would come at random points of these tests.
  const yieldAfterMs = Worker.yieldAfterMs;
  beforeEach(() => {
    Worker.yieldAfterMs = 1e9;
  });
  afterEach(() => {
    Worker.yieldAfterMs = yieldAfterMs;
  });

  it('waits with the acks until the burst is delivered, then applies every one durably', async () => {
    const { clock, queue, kind } = await openQueue(fileKind);
    const n = 10_000;
    const ids = Array.from({ length: n }, (_, i) => `m${i}`);
    await queue.scheduleMany(ids.map((id) => ({ id, topic: 'jobs', payload: id, delayMs: 10 })));
    let delivered = 0;
    let statsAtTheEnd: Promise<QueueStats> | undefined;
    let allDelivered!: () => void;
    const done = new Promise<void>((resolve) => (allDelivered = resolve));
    const seen = new Set<string>();
    const consumer = queue.consume(
      'jobs',
      (message) => {
        seen.add(message.id);
        if (++delivered === n) {
          // stats() reads its counters when called, not when awaited.
          statsAtTheEnd = queue.stats();
          allDelivered();
        }
      },
      { concurrency: 1000 },
    );
    await advance(clock, 10, 10, queue);
    await done;
    expect(seen.size).toBe(n);
    // Most acks waited for the burst (without putting them off: n - 1 here).
    expect((await statsAtTheEnd)?.acked).toBeLessThan(n / 2);
    await consumer.close();
    // close() of the consumer waited for every ack to be applied and durable.
    expect(await ackedNow(queue)).toBe(n);
    const statuses = await Promise.all(ids.map((id) => queue.get(id)));
    expect(statuses.filter((info) => info?.status !== 'acked')).toEqual([]);
    await queue.close();
    // Reopened: nothing comes back.
    await expectNothingAfterReopen(kind, clock);
  });

  it('applies a put-off ack within half its visibility timeout even while deliveries go on', async () => {
    const { clock, queue, consumer, until } = await oneATurn(1000);
    await until(20);
    expect(await ackedNow(queue)).toBe(0);
    clock.advance(499);
    await until(40);
    expect(await ackedNow(queue)).toBe(0);
    clock.advance(1);
    await until(60);
    expect(await ackedNow(queue)).toBeGreaterThan(20);
    await consumer.close();
  });

  it('applies put-off acks before a visibility timeout is acted on: nothing handled is expired', async () => {
    const jumps: Array<(clock: ManualClock) => Promise<void> | void> = [
      (clock) => clock.advance(1000),
      (clock) => clock.advanceAsync(1000),
    ];
    for (const jump of jumps) {
      const { clock, queue, consumer, received, errors, until, first } = await oneATurn(1000);
      await until(20);
      await jump(clock);
      await settle(3);
      // Only the handler running at the jump may have timed out.
      expect((await queue.stats()).expired).toBeLessThanOrEqual(1);
      expect((await queue.get(first))?.status).toBe('acked');
      await consumer.close();
      expect(new Set(received).size).toBe(received.length);
      // The ack of a delivery that timed out is refused quietly, not a TypeError.
      expect(errors).toEqual([]);
    }
  });

  it('finishes a put-off message first for whoever looks it up by id', async () => {
    const { queue } = await openQueue();
    const filler = (count: number) =>
      Array.from({ length: count }, (_, i) => ({ topic: 'jobs', payload: i }));
    await queue.scheduleMany(filler(3000));
    await queue.schedule({ id: 'user-7', topic: 'jobs', payload: 'v1' });
    await queue.schedule({ id: 'user-8', topic: 'jobs', payload: 'v1' });
    await queue.schedule({ id: 'trigger', topic: 'jobs', payload: 'now' });
    await queue.scheduleMany(filler(3000));
    let atTrigger: Promise<[QueueStats, unknown, boolean, unknown]> | undefined;
    let handled = 0;
    let done!: () => void;
    const all = new Promise<void>((resolve) => (done = resolve));
    const consumer = queue.consume(
      'jobs',
      (message) => {
        // Handlers of user-7 and user-8 have ended; their acks are put off (the burst goes on).
        if (message.id === 'trigger') {
          atTrigger = Promise.all([
            queue.stats(),
            queue.schedule({ id: 'user-7', topic: 'jobs', payload: 'v2' }),
            queue.cancel('user-8'),
            queue.get('user-8'),
          ]);
        }
        if (++handled === 6004) done();
      },
      { concurrency: 1000 },
    );
    // v2 must be delivered too; a put-off ack taken for a live message would swallow it.
    await Promise.race([all, new Promise((resolve) => setTimeout(resolve, 10_000))]);
    await consumer.close();
    const [stats, , cancelled, info] = await (atTrigger as NonNullable<typeof atTrigger>);
    expect(stats.acked).toBeLessThan(3000);
    // A new schedule with the id of a handled message is a new message, not a duplicate.
    expect((await queue.stats()).deduplicated).toBe(0);
    expect((await queue.get('user-7'))?.status).toBe('acked'); // v2, delivered too
    expect(handled).toBe(6004);
    // Nothing to cancel, and get() says acked.
    expect(cancelled).toBe(false);
    expect((info as { status: string }).status).toBe('acked');
  });

  it('never delivers a message again whose handler ended within its visibility timeout (system clock)', async () => {
    const queue = await DelayQueue.open({ store: new MemoryStore() });
    try {
      const n = 3000;
      await queue.scheduleMany(
        Array.from({ length: n }, (_, i) => ({ topic: 'jobs', payload: i })),
      );
      let handled = 0;
      let done!: () => void;
      const all = new Promise<void>((resolve) => (done = resolve));
      const consumer = queue.consume(
        'jobs',
        () => {
          // 0.25 ms of CPU each: a batch of 500 takes longer than visibilityMs.
          const end = performance.now() + 0.25;
          while (performance.now() < end);
          if (++handled === n) done();
        },
        { concurrency: 500, visibilityMs: 100 },
      );
      await all;
      await consumer.close();
      const stats = await queue.stats();
      expect(stats.expired).toBe(0);
      expect(stats.acked).toBe(n);
    } finally {
      await queue.close();
    }
  });

  it('applies acks at once when few messages wait: a chain of jobs on a ManualClock', async () => {
    const { queue } = await openQueue();
    const first = await queue.schedule({ topic: 'jobs', payload: 0 });
    let handled = 0;
    const consumer = queue.consume('jobs', async (message) => {
      handled++;
      const step = message.payload as number;
      if (step < 1000) await queue.schedule({ topic: 'jobs', payload: step + 1 });
    });
    while (handled < 200) await settle(1);
    expect(await ackedNow(queue)).toBeGreaterThan(150);
    expect((await queue.get(first.id))?.status).toBe('acked');
    await consumer.close();
  });

  it('reports a failed write of an ack applied early through its consumer, never as an unhandled rejection', async () => {
    class FlakyStore extends MemoryStore {
      failing = false;
      override finish(message: MessageState): Promise<void> {
        if (this.failing) return Promise.reject(new Error('disk gone'));
        return super.finish(message);
      }
    }
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.prependListener('unhandledRejection', onUnhandled);
    const store = new FlakyStore();
    const queue = await DelayQueue.open({ store, clock: new ManualClock(T0), horizonMs: 1000 });
    try {
      const filler = (count: number) =>
        Array.from({ length: count }, (_, i) => ({ topic: 'jobs', payload: i }));
      await queue.scheduleMany(filler(3000));
      await queue.schedule({ id: 'user-8', topic: 'jobs', payload: 'v1' });
      await queue.schedule({ id: 'trigger', topic: 'jobs', payload: 'now' });
      await queue.scheduleMany(filler(3000));
      let fired = false;
      const errors: unknown[] = [];
      const consumer = queue.consume(
        'jobs',
        (message) => {
          if (message.id === 'trigger') {
            fired = true;
            // A status look-up (GET /v1/messages/:id) while the disk fails.
            store.failing = true;
            queue.get('user-8').catch(() => {});
            store.failing = false;
          }
        },
        { concurrency: 1000, onError: (err) => errors.push(err) },
      );
      while (!fired) await settle(1);
      await settle(2);
      await consumer.close();
      expect(unhandled).toEqual([]);
      expect(errors.map((err) => (err as Error).message)).toContain('disk gone');
    } finally {
      process.removeListener('unhandledRejection', onUnhandled);
      await queue.close();
    }
  });
});

describe('put-off acks of a topic that stops being delivered', () => {
  it('are applied while another topic keeps its consumer busy (a paused topic)', async () => {
    const { queue } = await openQueue();
    await queue.scheduleMany(Array.from({ length: 3000 }, (_, i) => ({ topic: 'a', payload: i })));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let startedA = 0;
    const consumerA = queue.consume(
      'a',
      async () => {
        startedA++;
        await gate;
      },
      { concurrency: 10 },
    );
    for (let t = 0; t < 200 && startedA < 10; t++) await settle(1);
    expect(startedA).toBe(10);
    await queue.pause('a');
    const ackedOfA: string[] = [];
    queue.events.on('acked', (event: { id: string; topic: string }) => {
      if (event.topic === 'a') ackedOfA.push(event.id);
    });
    // A chain on topic b: few ready at a time, its acks are applied at once.
    await queue.schedule({ topic: 'b', payload: 0 });
    let chained = 0;
    const consumerB = queue.consume('b', async (message) => {
      chained++;
      await queue.schedule({ topic: 'b', payload: (message.payload as number) + 1 });
    });
    release(); // a's 10 handlers end now, with a paused and 2,990 of its messages ready
    // Turns of the event loop (the chain alone runs in microtasks between them).
    for (let t = 0; t < 20; t++) await settle(1);
    expect(chained).toBeGreaterThan(20);
    // a's handlers succeeded 20 turns ago: their acks are applied (and durable).
    expect(ackedOfA).toHaveLength(10);
    await consumerB.close();
    await consumerA.close();
  });
});

describe('ack() without durable while a burst is delivered (a pull consumer)', () => {
  /** n messages ready on the file store; the receive loop acks each batch before the next. */
  async function burst(n: number) {
    const { clock, queue, kind } = await openQueue(fileKind);
    const ids = Array.from({ length: n }, (_, i) => `m${i}`);
    await queue.scheduleMany(ids.map((id) => ({ id, topic: 'jobs', payload: id })));
    return { clock, queue, kind, ids };
  }

  it('puts the acks off while messages wait, ends each delivery at once, and applies every one', async () => {
    const { clock, queue, kind, ids } = await burst(2000);
    const first = await queue.receive('jobs', { max: 500, visibilityMs: 1000 });
    expect(await Promise.all(first.map((m) => queue.ack(m.receipt)))).toEqual(
      first.map(() => true),
    );
    // Put off (1,500 still ready): not counted yet...
    expect((await queue.stats()).acked).toBe(0);
    // ...but ended: a second ack or a nack of the same receipt is refused.
    expect(await queue.ack(first[0].receipt)).toBe(false);
    expect(await queue.nack(first[1].receipt)).toBe(false);
    expect(await queue.ackMany([first[2].receipt], { durable: true })).toEqual([false]);
    // Looked up by id, it is acked (its ack applied first).
    expect((await queue.get(first[3].id))?.status).toBe('acked');
    // A visibility timeout running out does not hand any of them out again.
    clock.advance(1000);
    await settle(3);
    const rest: string[] = [];
    for (;;) {
      const batch = await queue.receive('jobs', { max: 500 });
      if (batch.length === 0) break;
      rest.push(...batch.map((m) => m.id));
      await Promise.all(batch.map((m) => queue.ack(m.receipt)));
    }
    expect(rest).toEqual(ids.slice(500));
    expect((await queue.stats()).expired).toBe(0);
    // Nothing ready: every put-off ack is applied within a few turns, and written.
    await waitFor(async () => (await queue.stats()).acked === ids.length);
    await queue.close();
    await expectNothingAfterReopen(kind, clock);
  });

  it('applies a durable ack at once, and acks of a topic with few messages ready at once', async () => {
    const { queue } = await burst(300);
    const [a] = await queue.receive('jobs', { max: 1 });
    await queue.ack(a.receipt, { durable: true });
    expect((await queue.stats()).acked).toBe(1);
    const batch = await queue.receive('jobs', { max: 100 }); // 199 left ready: under the bound
    await Promise.all(batch.map((m) => queue.ack(m.receipt)));
    expect((await queue.stats()).acked).toBe(101);
  });
});
