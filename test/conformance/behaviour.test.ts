/**
 * The `Queue` contract's behaviour, one specification run on every backend (backends.ts): due
 * times kept and never early, dedup by id, cancel and reschedule, retries to dead letters and
 * requeue, visibility timeouts, consume(), topic controls, recurring schedules and their
 * bound, events, the closed state. Real time with short delays; every wait is for a condition,
 * and "never early" compares the time a message came with its due time.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import type { Queue } from '../../src/queue/api.js';
import type { QueueEvent } from '../../src/queue/events.js';
import type { ReceivedMessage } from '../../src/queue/types.js';
import { backends, closeAll, useBackends } from './backends.js';

useBackends();

type Arrived = ReceivedMessage & { at: number };

/** Waits until `check` holds, looking every 20 ms; fails after `ms`. */
async function waitFor(check: () => boolean | Promise<boolean>, ms = 5_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`not within ${ms} ms: ${String(check)}`);
    await sleep(20);
  }
}

/** Receives from `topic` until `count` messages came, noting when each arrived. */
async function receiveAll(queue: Queue, topic: string, count: number): Promise<Arrived[]> {
  const got: Arrived[] = [];
  while (got.length < count) {
    const batch = await queue.receive(topic, { max: 100, waitMs: 2_000 });
    const at = Date.now();
    for (const message of batch) got.push({ ...message, at });
  }
  return got;
}

/** The events of `queue` from now on, as they are recorded. */
function recordEvents(queue: Queue): QueueEvent[] {
  const seen: QueueEvent[] = [];
  queue.events.on('event', (event: QueueEvent) => seen.push(event));
  return seen;
}

describe.each(backends)('Queue behaviour on $name', (backend) => {
  afterEach(closeAll);

  it('schedules, dedups by id, delivers never early, in order of due time', async () => {
    const queue = await backend.open();
    const events = recordEvents(queue);
    const start = Date.now();
    const first = await queue.schedule({
      topic: 'mail',
      id: 'm-1',
      payload: { to: 'a@b.c' },
      deliverAt: start + 600,
    });
    expect(first).toEqual({ id: 'm-1', deliverAt: start + 600 });
    // The same id again: the first one stands.
    expect(
      await queue.schedule({ topic: 'mail', id: 'm-1', payload: 2, deliverAt: start + 9_000 }),
    ).toEqual({ id: 'm-1', deliverAt: start + 600 });
    const many = await queue.scheduleMany([
      { topic: 'mail', payload: new Uint8Array([1, 2, 3]), deliverAt: start + 300 },
      { topic: 'mail', payload: 'text', deliverAt: start + 450 },
    ]);
    expect(many.map((m) => m.deliverAt)).toEqual([start + 300, start + 450]);
    // A schedule deduplicated by its id is no new message: no event.
    expect(events.map((event) => `${event.type} ${event.deliverAt - start}`)).toEqual([
      'scheduled 600',
      'scheduled 300',
      'scheduled 450',
    ]);
    expect(await queue.get('m-1')).toEqual({
      id: 'm-1',
      topic: 'mail',
      status: 'scheduled',
      deliverAt: start + 600,
      attempts: 0,
    });
    const got = await receiveAll(queue, 'mail', 3);
    expect(got.map((m) => m.payload)).toEqual([Buffer.from([1, 2, 3]), 'text', { to: 'a@b.c' }]);
    for (const message of got) {
      expect(message.at).toBeGreaterThanOrEqual(message.deliverAt);
      expect(message.attempts).toBe(1);
    }
    expect(await queue.get('m-1')).toMatchObject({ status: 'inflight', attempts: 1 });
    expect(await queue.ackMany(got.map((m) => m.receipt))).toEqual([true, true, true]);
    expect(await queue.ack(got[0].receipt)).toBe(false);
    expect(await queue.get('m-1')).toEqual({
      id: 'm-1',
      topic: 'mail',
      status: 'acked',
      deliverAt: start + 600,
      attempts: 1,
    });
  });

  it("refuses ids starting with '@', which the queue makes itself", async () => {
    const queue = await backend.open();
    await expect(
      queue.schedule({ topic: 't', id: '@1.w2.3.abc', payload: 1 }),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_ID', message: /starting with '@'/ });
    await expect(
      queue.scheduleMany([
        { topic: 't', payload: 1 },
        { topic: 't', id: '@x', payload: 1 },
      ]),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_ID', message: /^messages\[1\]: / });
    expect(await queue.topicInfo('t')).toMatchObject({ pending: 0 });
  });

  it('cancels and reschedules what is scheduled; an id finished may be used again', async () => {
    const queue = await backend.open();
    const start = Date.now();
    await queue.schedule({ topic: 'job', id: 'gone', payload: 1, delayMs: 300 });
    await queue.schedule({ topic: 'job', id: 'moved', payload: 2, delayMs: 60_000 });
    expect(await queue.cancel('gone')).toBe(true);
    expect(await queue.cancel('gone')).toBe(false);
    expect(await queue.get('gone')).toMatchObject({ id: 'gone', status: 'cancelled' });
    await queue.schedule({ topic: 'job', id: 'gone', payload: 3, delayMs: 60_000 });
    expect(await queue.get('gone')).toMatchObject({ status: 'scheduled', attempts: 0 });
    expect(await queue.cancel('gone')).toBe(true);
    expect(await queue.rescheduleTo('moved', { deliverAt: start + 500 })).toBe(start + 500);
    expect(await queue.get('moved')).toMatchObject({ deliverAt: start + 500 });
    const got = await receiveAll(queue, 'job', 1);
    expect(got.map((m) => m.id)).toEqual(['moved']);
    expect(got[0].at).toBeGreaterThanOrEqual(start + 500);
    // In flight: it cannot be moved, but it can be cancelled (its ack then fails).
    expect(await queue.reschedule('moved', { delayMs: 10 })).toBe(false);
    expect(await queue.cancel('moved')).toBe(true);
    expect(await queue.ack(got[0].receipt)).toBe(false);
    expect(await queue.receive('job', { waitMs: 700 })).toEqual([]);
  });

  it('reschedules a ready message: scheduled again, delivered at its new time only', async () => {
    const queue = await backend.open();
    await queue.schedule({ topic: 'late', id: 'r-1', payload: 1 });
    await waitFor(async () => (await queue.get('r-1'))?.status === 'ready');
    const start = Date.now();
    expect(await queue.rescheduleTo('r-1', { deliverAt: start + 800 })).toBe(start + 800);
    expect(await queue.get('r-1')).toMatchObject({ status: 'scheduled', deliverAt: start + 800 });
    expect(await queue.topicInfo('late')).toMatchObject({ pending: 1 });
    const got = await receiveAll(queue, 'late', 1);
    expect(got.map((m) => [m.id, m.attempts])).toEqual([['r-1', 1]]);
    expect(got[0].at).toBeGreaterThanOrEqual(start + 800);
    expect(await queue.ack(got[0].receipt)).toBe(true);
    expect(await queue.receive('late', { waitMs: 300 })).toEqual([]);
  });

  it('retries a nack after its delay, keeps the reason, buries at maxAttempts, requeues', async () => {
    const queue = await backend.open();
    await queue.schedule({ topic: 'pay', id: 'p-1', payload: 'x', maxAttempts: 2 });
    const [first] = await receiveAll(queue, 'pay', 1);
    const nackedAt = Date.now();
    expect(await queue.nack(first.receipt, { delayMs: 400, reason: 'card declined' })).toBe(true);
    expect(await queue.get('p-1')).toMatchObject({
      status: 'scheduled',
      attempts: 1,
      lastError: 'card declined',
    });
    const [second] = await receiveAll(queue, 'pay', 1);
    expect(second.attempts).toBe(2);
    expect(second.at - nackedAt).toBeGreaterThanOrEqual(400);
    expect(await queue.nack(second.receipt, { reason: 'still declined' })).toBe(true);
    expect(await queue.deadLetters('pay')).toEqual([
      expect.objectContaining({ id: 'p-1', status: 'dead', lastError: 'still declined' }),
    ]);
    expect(await queue.topicInfo('pay')).toMatchObject({ pending: 0, dead: 1 });
    expect(await queue.payloadPreview('p-1')).toEqual({ preview: '"x"', truncated: false });
    expect(await queue.requeue('p-1', { delayMs: 0 })).toBe(true);
    expect(await queue.requeue('p-1')).toBe(false);
    expect(await queue.deadLetters('pay')).toEqual([]);
    const [third] = await receiveAll(queue, 'pay', 1);
    expect(third).toMatchObject({ id: 'p-1', attempts: 1 });
    expect(await queue.ack(third.receipt)).toBe(true);
  });

  it('lists dead letters oldest first: in the order they died, up to the limit', async () => {
    const queue = await backend.open();
    const ids = ['d-1', 'd-2', 'd-3', 'd-4'];
    await queue.scheduleMany(ids.map((id) => ({ topic: 'rip', id, payload: id, maxAttempts: 1 })));
    const received = await receiveAll(queue, 'rip', ids.length);
    const byId = new Map(received.map((message) => [message.id, message]));
    for (const id of ['d-3', 'd-1', 'd-4', 'd-2']) {
      expect(await queue.nack(byId.get(id)!.receipt, { durable: true })).toBe(true);
    }
    const dead = async (limit?: number) =>
      (await queue.deadLetters('rip', limit)).map((message) => message.id);
    expect(await dead()).toEqual(['d-3', 'd-1', 'd-4', 'd-2']);
    expect(await dead(2)).toEqual(['d-3', 'd-1']);
  });

  it('acks and nacks durable or not: either ends the delivery, never handed out again', async () => {
    const queue = await backend.open();
    const ids = ['d-1', 'd-2', 'd-3', 'd-4'];
    await queue.scheduleMany(ids.map((id) => ({ topic: 'dur', id, payload: id })));
    const got = new Map((await receiveAll(queue, 'dur', 4)).map((m) => [m.id, m]));
    const receipt = (id: string) => (got.get(id) as Arrived).receipt;
    expect(await queue.ack(receipt('d-1'), { durable: true })).toBe(true);
    expect(await queue.ack(receipt('d-2'), { durable: false })).toBe(true);
    expect(await queue.ackMany([receipt('d-3')], { durable: true })).toEqual([true]);
    expect(await queue.nack(receipt('d-4'), { delayMs: 0, durable: true })).toBe(true);
    for (const id of ['d-1', 'd-2', 'd-3', 'd-4']) expect(await queue.ack(receipt(id))).toBe(false);
    const [second] = await receiveAll(queue, 'dur', 1);
    expect(second).toMatchObject({ id: 'd-4', attempts: 2 });
    expect(await queue.nack(second.receipt, { delayMs: 0, durable: false })).toBe(true);
    const [third] = await receiveAll(queue, 'dur', 1);
    expect(third).toMatchObject({ id: 'd-4', attempts: 3 });
    expect(await queue.ackMany([third.receipt], { durable: false })).toEqual([true]);
    await waitFor(async () => (await queue.topicInfo('dur')).pending === 0);
  });

  it('delivers again when the visibility timeout runs out, and fails the old receipt', async () => {
    const queue = await backend.open();
    const events = recordEvents(queue);
    await queue.schedule({ topic: 'slow', id: 's-1', payload: 1 });
    const [first] = await queue.receive('slow', { waitMs: 5_000, visibilityMs: 300 });
    expect(first).toMatchObject({ id: 's-1', attempts: 1 });
    const [second] = await receiveAll(queue, 'slow', 1);
    expect(second).toMatchObject({ id: 's-1', attempts: 2 });
    expect(second.at - first.deliverAt).toBeGreaterThanOrEqual(300);
    expect(await queue.ack(first.receipt)).toBe(false);
    expect(await queue.ack(second.receipt)).toBe(true);
    await waitFor(() => events.some((event) => event.type === 'acked'));
    expect(events.map((event) => event.type)).toEqual([
      'scheduled',
      'delivered',
      'failed',
      'delivered',
      'acked',
    ]);
    expect(events[2]).toMatchObject({ id: 's-1', reason: expect.stringMatching(/visibility/) });
  });

  it('consumes with prefetch: each message once, in handlers of at most `concurrency`; close() runs those received ahead', async () => {
    const queue = await backend.open();
    const count = 60;
    await queue.scheduleMany(
      Array.from({ length: count }, (_, i) => ({ topic: 'ahead', id: `a-${i}`, payload: i })),
    );
    const seen: string[] = [];
    let running = 0;
    let most = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const consumer = queue.consume(
      'ahead',
      async (message) => {
        most = Math.max(most, ++running);
        seen.push(message.id);
        await gate;
        running--;
      },
      { concurrency: 3, prefetch: 20 },
    );
    // Three run; the rest of what was received waits in the consumer.
    await waitFor(() => seen.length === 3);
    const closing = consumer.close();
    release();
    await closing;
    expect(most).toBe(3);
    expect(new Set(seen).size).toBe(seen.length);
    // Every message handled was acked, and one received ahead was not left in flight.
    for (const id of seen) {
      await waitFor(async () => (await queue.get(id))?.status === 'acked', 5_000);
    }
    // A partitioned backend may answer from some partitions first: received until all are in.
    const rest: ReceivedMessage[] = [];
    await waitFor(async () => {
      rest.push(...(await queue.receive('ahead', { max: 100, waitMs: 100 })));
      return seen.length + rest.length >= count;
    });
    expect(new Set([...seen, ...rest.map((message) => message.id)]).size).toBe(count);
    expect(seen.length + rest.length).toBe(count);
    expect(rest.every((message) => message.attempts === 1)).toBe(true);
  });

  it('consumes with a handler: acks what resolves, retries what throws', async () => {
    const queue = await backend.open();
    const seen: string[] = [];
    const errors: string[] = [];
    let failOnce = true;
    const consumer = queue.consume(
      'work',
      (message) => {
        seen.push(`${message.id}#${message.attempts}`);
        if (message.id === 'w-2' && failOnce) {
          failOnce = false;
          throw new Error('flaky');
        }
      },
      { concurrency: 2, onError: (err) => errors.push((err as Error).message) },
    );
    await queue.scheduleMany([
      { topic: 'work', id: 'w-1', payload: 1, delayMs: 100 },
      {
        topic: 'work',
        id: 'w-2',
        payload: 2,
        delayMs: 150,
        backoff: { type: 'fixed', delayMs: 200 },
      },
    ]);
    await waitFor(() => seen.includes('w-2#2'), 10_000);
    await consumer.close();
    expect(seen.sort()).toEqual(['w-1#1', 'w-2#1', 'w-2#2']);
    expect(errors).toEqual(['flaky']);
    await waitFor(async () => (await queue.get('w-2'))?.status === 'acked', 5_000);
    expect(await queue.get('w-1')).toMatchObject({ status: 'acked', attempts: 1 });
  });

  it('pauses and resumes a topic: nothing delivered while paused, schedules still taken', async () => {
    const queue = await backend.open();
    expect(await queue.pause('held')).toMatchObject({ topic: 'held', paused: true, pending: 0 });
    await queue.schedule({ topic: 'held', id: 'h-1', payload: 1 });
    expect(await queue.topicInfo('held')).toMatchObject({ paused: true, pending: 1 });
    expect(await queue.receive('held', { waitMs: 500 })).toEqual([]);
    expect((await queue.topicList()).topics.map((topic) => topic.topic)).toEqual(['held']);
    const polling = queue.receive('held', { waitMs: 5_000 });
    expect(await queue.resume('held')).toMatchObject({ paused: false });
    const woken = await polling;
    const got = woken.length > 0 ? woken : await receiveAll(queue, 'held', 1);
    expect(got.map((m) => m.id)).toEqual(['h-1']);
    expect(
      await queue.configureTopic('held', { rateLimit: { perSecond: 5, burst: 2 } }),
    ).toMatchObject({ rateLimit: { perSecond: 5, burst: 2 } });
    expect(await queue.topicInfo('held')).toMatchObject({ rateLimit: { perSecond: 5, burst: 2 } });
  });

  it('keeps recurring schedules, and makes their occurrences messages', async () => {
    const queue = await backend.open();
    const put = await queue.putSchedule('beat', { topic: 'beats', everyMs: 1_000, payload: 'b' });
    expect(put).toMatchObject({ name: 'beat', topic: 'beats', everyMs: 1_000 });
    expect(await queue.getSchedule('beat')).toMatchObject({ name: 'beat', everyMs: 1_000 });
    expect(await queue.updateSchedule('beat', { payload: 'c' })).toMatchObject({ payload: 'c' });
    expect(await queue.updateSchedule('none', { payload: 'c' })).toBeUndefined();
    await expect(queue.updateSchedule('beat', { everyMs: 5 })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    expect((await queue.listSchedules()).map((schedule) => schedule.name)).toEqual(['beat']);
    const [occurrence] = await receiveAll(queue, 'beats', 1);
    expect(occurrence).toMatchObject({ topic: 'beats', payload: 'c', id: /^beat@\d+$/ });
    expect(occurrence.at).toBeGreaterThanOrEqual(occurrence.deliverAt);
    expect(await queue.ack(occurrence.receipt)).toBe(true);
    expect(await queue.deleteSchedule('beat')).toBe(true);
    expect(await queue.deleteSchedule('beat')).toBe(false);
    expect(await queue.getSchedule('beat')).toBeUndefined();
  });

  it('keeps at most maxSchedules recurring schedules: a new name past them is refused until one is deleted', async () => {
    const queue = await backend.open({ maxSchedules: 3 });
    const spec = { topic: 'beats', everyMs: 60_000 };
    for (const name of ['a', 'b', 'c']) await queue.putSchedule(name, spec);
    await expect(queue.putSchedule('d', spec)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_CONFLICT',
      message: expect.stringMatching(
        /^3 recurring schedules exist, .*\(maxSchedules: 3\): delete one before creating recurring schedule d/,
      ) as string,
    });
    expect(await queue.getSchedule('d')).toBeUndefined();
    // The schedules there still change: put again, or updated.
    expect(await queue.putSchedule('a', { ...spec, payload: 'again' })).toMatchObject({
      payload: 'again',
    });
    expect(await queue.updateSchedule('b', { paused: true })).toMatchObject({ paused: true });
    expect(await queue.deleteSchedule('c')).toBe(true);
    expect(await queue.putSchedule('d', spec)).toMatchObject({ name: 'd' });
    expect((await queue.listSchedules()).map((schedule) => schedule.name)).toEqual(['a', 'b', 'd']);
  });

  it('never passes maxSchedules with puts of new names at once', async () => {
    const queue = await backend.open({ maxSchedules: 3 });
    const names = ['n1', 'n2', 'n3', 'n4', 'n5', 'n6', 'n7', 'n8'];
    const puts = await Promise.allSettled(
      names.map((name) => queue.putSchedule(name, { topic: 'beats', everyMs: 60_000 })),
    );
    expect(puts.filter((put) => put.status === 'fulfilled')).toHaveLength(3);
    for (const put of puts) {
      if (put.status === 'rejected') {
        expect(put.reason).toMatchObject({ code: 'ERR_TICKWHEEL_CONFLICT' });
      }
    }
    expect(await queue.listSchedules()).toHaveLength(3);
  });

  it('takes a maxSchedules from 0 (none) to 10,000,000, refusing others with a named error', async () => {
    for (const maxSchedules of [-1, 2.5, 10_000_001, Number.NaN, '5']) {
      await expect(backend.open({ maxSchedules: maxSchedules as number })).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
        message: expect.stringContaining('maxSchedules must be an integer from 0 to 10000000'),
      });
    }
    const none = await backend.open({ maxSchedules: 0 });
    await expect(none.putSchedule('a', { topic: 't', everyMs: 60_000 })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_CONFLICT',
      message: expect.stringMatching(
        /^this queue keeps no recurring schedules \(maxSchedules: 0\)/,
      ),
    });
  });

  it('refuses every call once closed, and says so in problem()', async () => {
    const queue = await backend.open();
    expect(await queue.problem()).toBeUndefined();
    const polling = queue.receive('nothing', { waitMs: 8_000 });
    await queue.close();
    expect(await polling).toEqual([]);
    expect(await queue.problem()).toBe('the queue is closed');
    const calls: Array<[string, () => unknown]> = [
      ['schedule', () => queue.schedule({ topic: 'x', payload: 1 })],
      ['scheduleMany', () => queue.scheduleMany([{ topic: 'x', payload: 1 }])],
      ['cancel', () => queue.cancel('x')],
      ['reschedule', () => queue.reschedule('x', { delayMs: 1 })],
      ['requeue', () => queue.requeue('x')],
      ['get', () => queue.get('x')],
      ['receive', () => queue.receive('x')],
      ['ack', () => queue.ack('r')],
      ['nack', () => queue.nack('r')],
      ['ackMany', () => queue.ackMany(['r'])],
      ['consume', () => queue.consume('x', () => {})],
      ['deadLetters', () => queue.deadLetters('x')],
      ['pause', () => queue.pause('x')],
      ['topicInfo', () => queue.topicInfo('x')],
      ['topicList', () => queue.topicList()],
      ['putSchedule', () => queue.putSchedule('n', { topic: 'x', everyMs: 1_000 })],
      ['listSchedules', () => queue.listSchedules()],
      ['stats', () => queue.stats()],
      ['dueTimeline', () => queue.dueTimeline([1_000])],
      ['payloadPreview', () => queue.payloadPreview('x')],
    ];
    const codes: Record<string, string> = {};
    for (const [name, call] of calls) {
      try {
        await call();
        codes[name] = 'ok';
      } catch (err) {
        codes[name] = (err as { code?: string }).code ?? 'uncoded';
      }
    }
    expect(codes).toEqual(
      Object.fromEntries(calls.map(([name]) => [name, 'ERR_TICKWHEEL_CLOSED'])),
    );
    await queue.close(); // a second close is harmless
  });

  it('counts by topic and sorts what is scheduled by time until due', async () => {
    const queue = await backend.open();
    await queue.scheduleMany([
      { topic: 'later', payload: 1, delayMs: 10 * 60_000 },
      { topic: 'later', payload: 2, delayMs: 3 * 3_600_000 },
      { topic: 'later', payload: 3, delayMs: 30 * 86_400_000 },
    ]);
    expect(await queue.topicInfo('later')).toMatchObject({ pending: 3, dead: 0 });
    expect((await queue.stats()).scheduled).toBe(3);
    expect(await queue.dueHistogram([60_000, 3_600_000, 86_400_000])).toEqual([0, 1, 1, 1]);
  });
});
