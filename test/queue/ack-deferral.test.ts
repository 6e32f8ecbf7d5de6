/**
 * Deliveries first (src/queue/deliveries.ts): consume()'s acks wait while consumers keep taking
 * ready messages, so that a burst of messages due together is not delivered at the pace of the
 * acks before it. Every put-off ack is still applied, durably, and never after half its
 * visibility timeout.
 */

import { setImmediate as realSetImmediate } from 'node:timers';
import { describe, expect, it } from 'vitest';
import type { MessageInfo } from '../../src/delay-queue.js';
import { advance, fileKind, settle, useQueues } from './harness.js';

const openQueue = useQueues();

describe('consume() acks while a burst is delivered', () => {
  it('waits with the acks until the burst is delivered, then applies every one durably', async () => {
    const { clock, queue, kind } = await openQueue(fileKind);
    const n = 5000;
    const ids = Array.from({ length: n }, (_, i) => `m${i}`);
    await queue.scheduleMany(ids.map((id) => ({ id, topic: 'jobs', payload: id, delayMs: 10 })));
    let delivered = 0;
    let firstAtTheEnd: Promise<MessageInfo | undefined> | undefined;
    let allDelivered!: () => void;
    const done = new Promise<void>((resolve) => (allDelivered = resolve));
    const seen = new Set<string>();
    const consumer = queue.consume(
      'jobs',
      (message) => {
        seen.add(message.id);
        if (++delivered === n) {
          // Read synchronously here: the first message's ack has not been applied yet.
          firstAtTheEnd = queue.get(ids[0]);
          allDelivered();
        }
      },
      { concurrency: 1000 },
    );
    await advance(clock, 10, 10, queue);
    await done;
    expect(seen.size).toBe(n);
    expect((await firstAtTheEnd)?.status).toBe('inflight');
    await consumer.close();
    // close() of the consumer waited for every ack to be applied and durable.
    const statuses = await Promise.all(ids.map((id) => queue.get(id)));
    expect(statuses.filter((info) => info?.status !== 'acked')).toEqual([]);
    expect((await queue.stats()).acked).toBe(n);
    await queue.close();
    // Reopened: nothing comes back.
    const reopened = await kind.open(clock);
    try {
      await advance(clock, 60_000, 5000, reopened);
      expect(await reopened.receive('jobs', { max: 10 })).toEqual([]);
      expect(((await reopened.stats()).store as { live: number }).live).toBe(0);
    } finally {
      await reopened.close();
    }
  });

  it('applies a put-off ack within half its visibility timeout even while deliveries go on', async () => {
    const { clock, queue } = await openQueue();
    const scheduled = await queue.scheduleMany(
      Array.from({ length: 300 }, (_, i) => ({ topic: 'jobs', payload: i })),
    );
    const first = scheduled[0].id;
    const received: string[] = [];
    // One message a turn: the consumer takes one in every turn, and messages stay ready.
    const consumer = queue.consume(
      'jobs',
      (message) => {
        received.push(message.id);
        return new Promise<void>((resolve) => realSetImmediate(resolve));
      },
      { visibilityMs: 1000 },
    );
    const until = async (count: number) => {
      while (received.length < count) await settle(1);
    };
    await until(20);
    expect(received[0]).toBe(first);
    expect((await queue.get(first))?.status).toBe('inflight');
    clock.advance(499);
    await until(40);
    expect((await queue.get(first))?.status).toBe('inflight');
    clock.advance(1);
    await until(60);
    expect((await queue.get(first))?.status).toBe('acked');
    await consumer.close();
    // Never delivered twice, and every handled message acked.
    expect(new Set(received).size).toBe(received.length);
    const statuses = await Promise.all(received.map((id) => queue.get(id)));
    expect(statuses.every((info) => info?.status === 'acked')).toBe(true);
  });
});
