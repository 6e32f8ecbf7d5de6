/**
 * Lateness is how long after it could first have been delivered a message became ready (fire)
 * or was handed to a consumer (delivery): from its due time, or from when it was scheduled if
 * that due time was already past. And reschedule can report the due time it stored.
 */

import { readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import { T0, fileKind, settle } from './harness.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('late');

const DAY = 86_400_000;
const queues: DelayQueue[] = [];
afterEach(async () => {
  await Promise.all(queues.splice(0).map((queue) => queue.close()));
});

async function open(clock: ManualClock): Promise<DelayQueue> {
  const queue = await DelayQueue.open({ store: new MemoryStore(), clock, horizonMs: 1000 });
  queues.push(queue);
  return queue;
}

describe('lateness', () => {
  it('counts from the schedule, not from a deliverAt 326 days before it', async () => {
    const clock = new ManualClock(T0);
    const queue = await open(clock);
    const deliverAt = T0 - 326 * DAY;
    expect(await queue.schedule({ topic: 't', payload: 1, deliverAt })).toMatchObject({
      deliverAt,
    });
    const [many] = await queue.scheduleMany([{ topic: 't', payload: 2, deliverAt }]);
    expect(many.deliverAt).toBe(deliverAt);
    clock.advance(7);
    const received = await queue.receive('t', { max: 2 });
    expect(received.map((m) => m.deliverAt)).toEqual([deliverAt, deliverAt]);
    const stats = await queue.stats();
    expect(stats.latenessMs).toMatchObject({ max: 0, count: 2, sum: 0 });
    expect(stats.deliveryLatenessMs).toMatchObject({ count: 2, sum: 14 });
  });

  it('counts from a reschedule into the past', async () => {
    const clock = new ManualClock(T0);
    const queue = await open(clock);
    await queue.schedule({ topic: 't', payload: 1, id: 'm', delayMs: 60_000 });
    clock.advance(100);
    expect(await queue.reschedule('m', { deliverAt: T0 - 10 * DAY })).toBe(true);
    clock.advance(4);
    await queue.receive('t');
    const stats = await queue.stats();
    expect(stats.latenessMs.max).toBe(0);
    expect(stats.deliveryLatenessMs).toMatchObject({ count: 1, sum: 4 });
  });

  it('counts only first deliveries in deliveryLatenessMs, in cumulative buckets', async () => {
    const clock = new ManualClock(T0);
    const queue = await open(clock);
    await queue.schedule({ topic: 't', payload: 1 });
    clock.advance(2);
    const [first] = await queue.receive('t');
    await queue.nack(first.receipt, { delayMs: 0 });
    await settle();
    clock.advance(500);
    await queue.receive('t');
    const delivery = (await queue.stats()).deliveryLatenessMs;
    expect(delivery.count).toBe(1);
    expect(delivery.sum).toBe(2);
    expect(delivery.buckets.find(([le]) => le === 1)?.[1]).toBe(0);
    expect(delivery.buckets.find(([le]) => le === 5)?.[1]).toBe(1);
    const counts = delivery.buckets.map(([, n]) => n);
    expect(counts).toEqual([...counts].sort((a, b) => a - b));
  });

  it('after a restart counts recovered messages from their due time (the downtime is late)', async () => {
    const kind = fileKind();
    try {
      const clock = new ManualClock(T0);
      const first = await kind.open(clock);
      await first.schedule({ topic: 't', payload: 1, delayMs: 100 });
      await first.close();
      clock.advance(5000);
      const second = await kind.open(clock);
      clock.advance(20);
      await second.receive('t');
      const stats = await second.stats();
      await second.close();
      expect(stats.latenessMs).toMatchObject({ max: 4900, count: 1, sum: 4900 });
      expect(stats.deliveryLatenessMs).toMatchObject({ count: 1, sum: 4920 });
    } finally {
      kind.cleanup();
    }
  });
});

async function statsAfterReceiving(queue: DelayQueue) {
  const [overdue] = await queue.receive('t', { waitMs: 1_000 });
  const [downtime] = await queue.receive('u', { waitMs: 1_000 });
  const stats = await queue.stats();
  return { overdue, downtime, stats };
}

describe('lateness after a restart, on the system clock', () => {
  it('counts a message overdue before the stop from the last write, not from years ago', async () => {
    const dir = tempDir();
    const first = await DelayQueue.open({ dir });
    const ago = Date.now() - 7 * 365 * DAY;
    await first.schedule({ topic: 't', payload: 1, deliverAt: ago });
    // Comes due while the queue is down: that time counts.
    const soon = Date.now() + 300;
    await first.schedule({ topic: 'u', payload: 2, deliverAt: soon });
    await first.close();
    await new Promise((resolve) => setTimeout(resolve, 700));
    const second = await DelayQueue.open({ dir });
    const { overdue, downtime, stats } = await statsAfterReceiving(second).finally(() =>
      second.close(),
    );
    expect([overdue.deliverAt, downtime.deliverAt]).toEqual([ago, soon]);
    const fire = stats.latenessMs;
    expect(fire.count).toBe(2);
    // From the last write (the schedules, under a second before the reopen), not 7 years;
    // the other from its due time: at least the 400 ms the queue was down after it.
    expect(fire.max).toBeGreaterThanOrEqual(400);
    expect(fire.max).toBeLessThan(60_000);
    const delivery = stats.deliveryLatenessMs;
    expect(delivery.count).toBe(2);
    expect(delivery.sum).toBeLessThan(120_000);
  });
});

describe('lateness after a restart, the last write', () => {
  it('is the newest segment with a record: an empty one rolled over to does not count', async () => {
    const dir = tempDir();
    const first = await DelayQueue.open({ dir });
    await first.schedule({ topic: 't', payload: 1, deliverAt: Date.now() - 7 * 365 * DAY });
    await first.close();
    // The record's segment last written an hour ago; a newer segment, empty.
    const log = join(dir, 'log');
    const segments = readdirSync(log)
      .filter((name) => name.endsWith('.seg'))
      .sort();
    const newest = segments[segments.length - 1];
    const hourAgo = new Date(Date.now() - 3_600_000);
    utimesSync(join(log, newest), hourAgo, hourAgo);
    const next = String(Number(newest.slice(0, 10)) + 1).padStart(10, '0');
    writeFileSync(join(log, `${next}.seg`), '');
    const second = await DelayQueue.open({ dir });
    const { stats } = await overdueStats(second).finally(() => second.close());
    const fire = stats.latenessMs;
    expect(fire.count).toBe(1);
    expect(fire.max).toBeGreaterThanOrEqual(3_600_000);
    expect(fire.max).toBeLessThan(3_600_000 + 60_000);
  });
});

async function overdueStats(queue: DelayQueue) {
  const [overdue] = await queue.receive('t', { waitMs: 1_000 });
  const stats = await queue.stats();
  return { overdue, stats };
}

describe('rescheduleTo', () => {
  it('resolves with the due time stored, or undefined where reschedule gives false', async () => {
    const clock = new ManualClock(T0);
    const queue = await open(clock);
    await queue.schedule({ topic: 't', payload: 1, id: 'm', delayMs: 60_000 });
    expect(await queue.rescheduleTo('m', { delayMs: 10.2 })).toBe(T0 + 11);
    expect(await queue.rescheduleTo('m', { deliverAt: T0 + 99.9 })).toBe(T0 + 99);
    expect(await queue.rescheduleTo('m', { delayMs: -1 })).toBe(T0);
    expect((await queue.get('m'))?.deliverAt).toBe(T0);
    await queue.receive('t');
    expect(await queue.rescheduleTo('m', { delayMs: 5 })).toBeUndefined();
    expect(await queue.reschedule('m', { delayMs: 5 })).toBe(false);
    expect(await queue.rescheduleTo('nope', { delayMs: 5 })).toBeUndefined();
    await expect(queue.rescheduleTo('m', {})).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
    });
  });
});
