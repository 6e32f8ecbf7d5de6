import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock, TickwheelError, TickwheelStateError } from '../../src/index.js';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import { T0, advance, fileKind, memoryKind, settle, type QueueKind } from './harness.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

describe.each([
  ['memory', memoryKind],
  ['file', fileKind],
] as const)('DelayQueue (%s store)', (_name, makeKind) => {
  let kind: QueueKind;
  let queue: DelayQueue | undefined;
  let clock: ManualClock;

  async function open(options = {}) {
    kind ??= makeKind();
    clock ??= new ManualClock(T0);
    queue = await kind.open(clock, options);
    return queue;
  }

  afterEach(async () => {
    await queue?.close();
    queue = undefined;
    kind?.cleanup();
    kind = undefined as unknown as QueueKind;
    clock = undefined as unknown as ManualClock;
  });

  it('delivers a message at its due time and never before', async () => {
    const q = await open();
    const { id, deliverAt } = await q.schedule({
      topic: 'mail',
      payload: { to: 'a' },
      delayMs: 250,
    });
    expect(deliverAt).toBe(T0 + 250);
    await advance(clock, 249, 50, queue);
    expect(await q.receive('mail')).toEqual([]);
    expect((await q.get(id))?.status).toBe('scheduled');
    await advance(clock, 1, 100, queue);
    const [message] = await q.receive('mail');
    expect(message).toMatchObject({
      id,
      topic: 'mail',
      payload: { to: 'a' },
      deliverAt,
      attempts: 1,
    });
    expect((await q.get(id))?.status).toBe('inflight');
    expect(await q.ack(message.receipt)).toBe(true);
    expect(await q.ack(message.receipt)).toBe(false);
    expect((await q.get(id))?.status).toBe('acked');
  });

  it('delivers equal due times in scheduling order', async () => {
    const q = await open();
    const ids: string[] = [];
    for (let i = 0; i < 20; i++)
      ids.push((await q.schedule({ topic: 't', payload: i, deliverAt: T0 + 300 })).id);
    await advance(clock, 300, 100, queue);
    const received = await q.receive('t', { max: 100 });
    expect(received.map((m) => m.id)).toEqual(ids);
    expect(received.map((m) => m.payload)).toEqual([...Array(20).keys()]);
  });

  it('deduplicates by id while the message is pending', async () => {
    const q = await open();
    const first = await q.schedule({ topic: 't', payload: 1, delayMs: 100, id: 'order-1' });
    const again = await q.schedule({ topic: 't', payload: 2, delayMs: 900, id: 'order-1' });
    expect(again).toEqual(first);
    await advance(clock, 100, 100, queue);
    const received = await q.receive('t', { max: 10 });
    expect(received.map((m) => m.payload)).toEqual([1]);
    await q.ack(received[0].receipt);
    const third = await q.schedule({ topic: 't', payload: 3, delayMs: 10, id: 'order-1' });
    expect(third.deliverAt).toBe(clock.now() + 10);
  });

  it('cancels a pending message so it is never delivered', async () => {
    const q = await open();
    const near = await q.schedule({ topic: 't', payload: 'near', delayMs: 100 });
    const far = await q.schedule({ topic: 't', payload: 'far', delayMs: 5000 });
    expect(await q.cancel(near.id)).toBe(true);
    expect(await q.cancel(far.id)).toBe(true);
    expect(await q.cancel(far.id)).toBe(false);
    await advance(clock, 6000, 500, queue);
    expect(await q.receive('t')).toEqual([]);
    expect((await q.get(near.id))?.status).toBe('cancelled');
  });

  it('reschedules a message, near or beyond the horizon', async () => {
    const q = await open();
    const a = await q.schedule({ topic: 't', payload: 'a', delayMs: 100 });
    const b = await q.schedule({ topic: 't', payload: 'b', delayMs: 8000 });
    expect(await q.reschedule(a.id, { delayMs: 3000 })).toBe(true);
    expect(await q.reschedule(b.id, { deliverAt: T0 + 200 })).toBe(true);
    await advance(clock, 200, 100, queue);
    expect((await q.receive('t', { max: 5 })).map((m) => m.payload)).toEqual(['b']);
    await advance(clock, 2900, 500, queue);
    expect((await q.receive('t', { max: 5 })).map((m) => m.payload)).toEqual(['a']);
    expect(await q.reschedule('nope', { delayMs: 1 })).toBe(false);
  });

  it('holds far-future messages outside memory until their time comes near', async () => {
    const q = await open();
    for (let i = 0; i < 50; i++)
      await q.schedule({ topic: 'later', payload: i, delayMs: 60_000 + i });
    const stats = await q.stats();
    expect(stats.inMemory).toBe(0);
    await advance(clock, 60_100, 1000, queue);
    const got = await q.receive('later', { max: 100 });
    expect(got.map((m) => m.payload)).toEqual([...Array(50).keys()]);
    for (const m of got) expect(m.deliverAt).toBeLessThanOrEqual(clock.now());
  });

  it('redelivers a message whose visibility timeout passes, counting attempts', async () => {
    const q = await open();
    const { id } = await q.schedule({
      topic: 't',
      payload: 'x',
      backoff: { type: 'fixed', delayMs: 50 },
    });
    await advance(clock, 1, 100, queue);
    const [first] = await q.receive('t', { visibilityMs: 100 });
    expect(first.attempts).toBe(1);
    await advance(clock, 100, 100, queue);
    expect(await q.ack(first.receipt)).toBe(false);
    // The redelivery is written (a real fsync on the file store) before the message is back on
    // the wheel: wait for that in real time, then let its backoff pass in virtual time.
    const inMemory = async () => (await q.stats()).inMemory;
    await waitFor(async () => (await inMemory()) > 0, { intervalMs: 2 });
    await advance(clock, 60, 100, queue);
    const [second] = await q.receive('t');
    expect(second.id).toBe(id);
    expect(second.attempts).toBe(2);
  });

  it('hands over plain objects, and times out the last of a large take once most are acked', async () => {
    const q = await open();
    const ids = Array.from({ length: 40 }, (_, i) => `m${String(i).padStart(2, '0')}`);
    await q.scheduleMany(ids.map((id) => ({ id, topic: 't', payload: { id } })));
    await advance(clock, 1, 100, queue);
    const taken = await q.receive('t', { max: 40, visibilityMs: 100 });
    expect(taken.map((m) => m.id)).toEqual(ids);
    // A plain object, as API.md's ReceivedMessage: equal to a literal, prototype included.
    const { receipt, deliverAt } = taken[0];
    expect(taken[0]).toStrictEqual({
      id: 'm00',
      topic: 't',
      payload: { id: 'm00' },
      deliverAt,
      attempts: 1,
      receipt,
    });
    // 35 of 40 acked: the take's lease is compacted on the way; the other 5 still time out.
    for (const message of taken.slice(0, 35)) expect(await q.ack(message.receipt)).toBe(true);
    await advance(clock, 100, 100, queue);
    for (const message of taken.slice(35)) expect(await q.ack(message.receipt)).toBe(false);
    await q.settled();
    await advance(clock, 5_000, 100, queue);
    const again = await q.receive('t', { max: 40 });
    expect(again.map((m) => [m.id, m.attempts])).toEqual(ids.slice(35).map((id) => [id, 2]));
  });

  it('times out the messages taken together that are still in flight, and only those', async () => {
    const q = await open();
    const ids = ['a', 'b', 'c', 'd', 'e'];
    await q.scheduleMany(
      ids.map((id) => ({ id, topic: 't', payload: id, backoff: { type: 'fixed', delayMs: 50 } })),
    );
    await advance(clock, 1, 100, queue);
    const taken = await q.receive('t', { max: 10, visibilityMs: 100 });
    expect(taken.map((m) => m.id)).toEqual(ids);
    const [a, b, c, d, e] = taken;
    expect(await q.ack(a.receipt)).toBe(true);
    expect(await q.cancel(c.id)).toBe(true);
    expect(await q.nack(e.receipt, { delayMs: 1000 })).toBe(true);
    await advance(clock, 99, 100, queue);
    expect(await q.get('b')).toMatchObject({ status: 'inflight' }); // not before its time
    await advance(clock, 1, 100, queue);
    expect(await q.ack(b.receipt)).toBe(false);
    expect(await q.ack(d.receipt)).toBe(false);
    // Their retries are written (a real write on the file store) before they are back on the
    // wheel: settled() waits for that, then the backoff passes in virtual time.
    await q.settled();
    await advance(clock, 60, 100, queue);
    const again = await q.receive('t', { max: 10, visibilityMs: 100 });
    expect(again.map((m) => [m.id, m.attempts])).toEqual([
      ['b', 2],
      ['d', 2],
    ]);
    expect((await q.get('b'))?.lastError).toMatch(/visibility timeout/);
    expect(await q.get('a')).toMatchObject({ status: 'acked' });
    expect(await q.get('c')).toMatchObject({ status: 'cancelled' });
    expect(await q.get('e')).toMatchObject({ status: 'scheduled', attempts: 1 });
    // All of a take acked: its timeout never comes.
    expect(await q.ackMany(again.map((m) => m.receipt))).toEqual([true, true]);
    await advance(clock, 200, 100, queue);
    expect(await q.get('b')).toMatchObject({ status: 'acked', attempts: 2 });
  });

  it('moves a message to the dead letters after maxAttempts, and requeues it', async () => {
    const q = await open();
    const { id } = await q.schedule({
      topic: 'jobs',
      payload: 'p',
      maxAttempts: 2,
      backoff: { type: 'exponential', delayMs: 10, jitter: 0 },
    });
    await advance(clock, 1, 100, queue);
    const [one] = await q.receive('jobs');
    expect(await q.nack(one.receipt, { durable: true })).toBe(true);
    await advance(clock, 10, 100, queue);
    const [two] = await q.receive('jobs');
    expect(two.attempts).toBe(2);
    await q.nack(two.receipt);
    await settle();
    expect((await q.get(id))?.status).toBe('dead');
    expect((await q.deadLetters('jobs')).map((m) => m.id)).toEqual([id]);
    expect(await q.requeue(id)).toBe(true);
    await advance(clock, 1, 100, queue);
    const [again] = await q.receive('jobs');
    expect(again).toMatchObject({ id, attempts: 1, payload: 'p' });
    expect(await q.deadLetters('jobs')).toEqual([]);
  });

  it('nack with a delay redelivers after that delay', async () => {
    const q = await open();
    await q.schedule({ topic: 't', payload: 1 });
    await advance(clock, 1, 100, queue);
    const [m] = await q.receive('t');
    await q.nack(m.receipt, { delayMs: 500, durable: true });
    await advance(clock, 499, 100, queue);
    expect(await q.receive('t')).toEqual([]);
    await advance(clock, 1, 100, queue);
    expect(await q.receive('t')).toHaveLength(1);
  });

  it('long-polls: receive waits for a message to become ready', async () => {
    const q = await open();
    await q.schedule({ topic: 't', payload: 'soon', delayMs: 200 });
    const waiting = q.receive('t', { waitMs: 1000 });
    await advance(clock, 200, 100, queue);
    expect((await waiting).map((m) => m.payload)).toEqual(['soon']);
    const empty = q.receive('t', { waitMs: 300 });
    await advance(clock, 300, 100, queue);
    expect(await empty).toEqual([]);
  });

  it('consume() runs the handler, acks on success and retries on failure', async () => {
    const q = await open();
    for (let i = 0; i < 5; i++) {
      await q.schedule({ topic: 'c', payload: i, backoff: { type: 'fixed', delayMs: 10 } });
    }
    const seen: number[] = [];
    let failedOnce = false;
    const consumer = q.consume(
      'c',
      (m) => {
        if (m.payload === 3 && !failedOnce) {
          failedOnce = true;
          throw new Error('transient');
        }
        seen.push(m.payload as number);
      },
      { concurrency: 2 },
    );
    const originalEmit = process.emitWarning;
    process.emitWarning = () => {};
    try {
      // Real store I/O runs between the virtual-time steps; give it a bounded number of them.
      for (let step = 0; step < 400 && seen.length < 5; step++) {
        await advance(clock, 5, 5, queue);
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
    } finally {
      process.emitWarning = originalEmit;
    }
    await consumer.close();
    expect(seen.sort()).toEqual([0, 1, 2, 3, 4]);
    const stats = await q.stats();
    expect(stats.acked).toBe(5);
    expect(stats.nacked).toBe(1);
  });

  it('consume() returns before any handler runs, so a handler can close its own consumer', async () => {
    const q = await open();
    for (let i = 0; i < 3; i++) await q.schedule({ topic: 'own', payload: i });
    await advance(clock, 1, 1, queue);
    const errors: unknown[] = [];
    const seen: unknown[] = [];
    let returned = false;
    const consumer = q.consume(
      'own',
      (m) => {
        expect(returned).toBe(true);
        seen.push(m.payload);
        // The pattern worker.ts documents: close without awaiting, from the handler.
        if (seen.length === 3) void consumer.close();
      },
      { onError: (err) => errors.push(err) },
    );
    returned = true;
    for (let i = 0; i < 50 && seen.length < 3; i++) await settle();
    await consumer.close();
    expect(errors).toEqual([]);
    expect(seen).toEqual([0, 1, 2]);
    expect(await q.stats()).toMatchObject({ nacked: 0, acked: 3 });
  });

  it('scheduleMany: results in request order, dedup by id, due order kept', async () => {
    const q = await open();
    const first = await q.schedule({ topic: 'm', payload: 'old', id: 'dup', delayMs: 50 });
    const results = await q.scheduleMany([
      { topic: 'm', payload: 0, delayMs: 20 },
      { topic: 'm', payload: 'new', id: 'dup', delayMs: 5 },
      { topic: 'm', payload: 2, delayMs: 10 },
      { topic: 'm', payload: 3, delayMs: 10 },
      { topic: 'far', payload: 4, delayMs: 3_600_000 },
    ]);
    expect(results).toHaveLength(5);
    expect(results[1]).toEqual(first);
    expect(results[0].deliverAt).toBe(T0 + 20);
    expect(new Set(results.map((r) => r.id)).size).toBe(5);
    expect(results[1].id).toBe('dup');
    expect((await q.get(results[4].id))?.status).toBe('scheduled');
    await advance(clock, 60, 100, queue);
    const got = await q.receive('m', { max: 10 });
    expect(got.map((m) => m.payload)).toEqual([2, 3, 0, 'old']);
    expect(await q.stats()).toMatchObject({ scheduled: 5 });
  });

  it('scheduleMany checks every request before writing any', async () => {
    const q = await open();
    await expect(
      q.scheduleMany([
        { topic: 'x', payload: 1, id: 'fine' },
        { topic: 'x', payload: 2, delayMs: -Infinity },
      ]),
    ).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_DELAY',
      message: expect.stringMatching(/^messages\[1\]: /),
    });
    expect(await q.get('fine')).toBeUndefined();
    await expect(q.scheduleMany('nope' as never)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
    });
    expect(await q.scheduleMany([])).toEqual([]);
  });

  it('consume() takes sync, async and throwing handlers; close() waits for their acks', async () => {
    const q = await open();
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) {
      const { id } = await q.schedule({
        topic: 'h',
        payload: i,
        maxAttempts: 1,
      });
      ids.push(id);
    }
    const seen: number[] = [];
    const failed: string[] = [];
    const consumer = q.consume(
      'h',
      (m) => {
        const n = m.payload as number;
        seen.push(n);
        if (n % 3 === 0) return; // synchronous
        if (n % 3 === 1) return new Promise<void>((resolve) => setTimeout(resolve, 1));
        return Promise.reject(new TickwheelStateError('ERR_TICKWHEEL_CLOSED', 'quiet failure'));
      },
      { concurrency: 4, onError: (_err, context) => failed.push(context.id as string) },
    );
    for (let step = 0; step < 400 && seen.length < 30; step++) {
      await advance(clock, 1, 5, queue);
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    await consumer.close();
    expect(seen.sort((a, b) => a - b)).toEqual([...Array(30).keys()]);
    const statuses = await Promise.all(ids.map(async (id) => (await q.get(id))?.status));
    // maxAttempts 1: the failed ones are dead at once, the rest acked, all durable by now.
    expect(statuses.filter((s) => s === 'acked')).toHaveLength(20);
    expect(statuses.filter((s) => s === 'dead')).toHaveLength(10);
    expect(statuses.every((s, i) => s === (i % 3 === 2 ? 'dead' : 'acked'))).toBe(true);
    expect(failed.sort()).toEqual(ids.filter((_, i) => i % 3 === 2).sort());
  });

  it('stats() counts every topic exactly, near or far; dueHistogram covers the store', async () => {
    const q = await open();
    await q.scheduleMany([
      { topic: 'a', payload: 1, delayMs: 10 },
      { topic: 'a', payload: 2, delayMs: 10 },
      { topic: 'a', payload: 3, delayMs: 2 * 3_600_000 },
      { topic: 'b', payload: 4, delayMs: 3 * 86_400_000, id: 'b-far' },
      { topic: 'b', payload: 5, delayMs: 10, maxAttempts: 1 },
    ]);
    await advance(clock, 10, 50, queue);
    const [first] = await q.receive('a');
    const [doomed] = await q.receive('b');
    expect(await q.nack(doomed.receipt)).toBe(true); // one attempt allowed: dead
    let topics = (await q.stats()).topics;
    expect(topics.a).toEqual({ scheduled: 1, ready: 1, inflight: 1, dead: 0 });
    expect(topics.b).toEqual({ scheduled: 1, ready: 0, inflight: 0, dead: 1 });
    // < 1 min | < 1 h | < 1 day | later: only not-yet-due messages count
    expect(await q.dueHistogram([60_000, 3_600_000, 86_400_000])).toEqual([0, 0, 1, 1]);
    expect(await q.ack(first.receipt)).toBe(true);
    expect(await q.reschedule('b-far', { delayMs: 30_000 })).toBe(true);
    expect(await q.requeue(doomed.id, { delayMs: 5 * 3_600_000 })).toBe(true);
    topics = (await q.stats()).topics;
    expect(topics.a).toEqual({ scheduled: 1, ready: 1, inflight: 0, dead: 0 });
    expect(topics.b).toEqual({ scheduled: 2, ready: 0, inflight: 0, dead: 0 });
    expect(await q.dueHistogram([60_000, 3_600_000, 86_400_000])).toEqual([1, 0, 2, 0]);
  });

  it('round-trips byte payloads', async () => {
    const q = await open();
    await q.schedule({ topic: 'b', payload: new Uint8Array([0, 1, 2, 255]) });
    await advance(clock, 1, 100, queue);
    const [m] = await q.receive('b');
    expect(Buffer.isBuffer(m.payload)).toBe(true);
    expect([...(m.payload as Buffer)]).toEqual([0, 1, 2, 255]);
  });

  it('round-trips JSON payloads in any script and size, near and far, across a reopen', async () => {
    const q = await open({ maxPayloadBytes: 20_000 });
    const payloads: unknown[] = [
      '',
      0,
      null,
      'é',
      '€ and 😀 and 漢字',
      { nested: ['ü', { deep: '\u0000\u007f\u0080\u07ff\u0800\uffff' }] },
      'x'.repeat(5000), // longer than the payloads held as text until written
      '€'.repeat(6000), // 18,002 bytes: more bytes than characters
    ];
    const near = await q.scheduleMany(
      payloads.map((payload) => ({ topic: 'near', payload, delayMs: 100 })),
    );
    const far = await q.scheduleMany(
      payloads.map((payload) => ({ topic: 'far', payload, delayMs: 86_400_000 })),
    );
    expect(near.length + far.length).toBe(2 * payloads.length);
    for (let i = 0; i < payloads.length; i++) {
      const preview = await q.payloadPreview(far[i].id, 100_000);
      expect(preview?.preview).toBe(JSON.stringify(payloads[i]));
    }
    await advance(clock, 150, 50, queue);
    const got = await q.receive('near', { max: 100 });
    expect(got.map((m) => m.payload)).toEqual(payloads);
    if (!kind.durable) return;
    await q.close();
    queue = await kind.open(clock, { maxPayloadBytes: 20_000 });
    // Steps shorter than the horizon, so the loader keeps up as it would in real time.
    await advance(clock, 86_400_000, 1000, queue);
    const later = await queue.receive('far', { max: 100 });
    expect(later.map((m) => m.payload)).toEqual(payloads);
  });

  it('measures the payload limit in UTF-8 bytes, not characters', async () => {
    const q = await open({ maxPayloadBytes: 100 });
    // JSON of 32 euro signs: 2 quotes + 96 bytes = 98 bytes; 33 take 101.
    await expect(q.schedule({ topic: 't', payload: '€'.repeat(32) })).resolves.toBeDefined();
    await expect(q.schedule({ topic: 't', payload: '€'.repeat(33) })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_PAYLOAD_TOO_LARGE',
    });
  });

  it('rejects bad input with coded errors', async () => {
    const q = await open({ maxPayloadBytes: 100 });
    const bad: Array<[unknown, string]> = [
      [{ topic: '../etc', payload: 1 }, 'ERR_TICKWHEEL_INVALID_TOPIC'],
      [{ topic: '', payload: 1 }, 'ERR_TICKWHEEL_INVALID_TOPIC'],
      [{ topic: 't', payload: 1, id: 'has space' }, 'ERR_TICKWHEEL_INVALID_ID'],
      [{ topic: 't', payload: 1, id: '.' }, 'ERR_TICKWHEEL_INVALID_ID'],
      [{ topic: 't', payload: 1, id: '..' }, 'ERR_TICKWHEEL_INVALID_ID'],
      [{ topic: 't', payload: 1, delayMs: NaN }, 'ERR_TICKWHEEL_INVALID_DELAY'],
      [{ topic: 't', payload: 1, delayMs: 1, deliverAt: 5 }, 'ERR_TICKWHEEL_INVALID_MESSAGE'],
      [{ topic: 't', payload: 1, deliverAt: 1e20 }, 'ERR_TICKWHEEL_INVALID_DELAY'],
      [{ topic: 't', payload: 'x'.repeat(200) }, 'ERR_TICKWHEEL_PAYLOAD_TOO_LARGE'],
      [{ topic: 't', payload: 10n }, 'ERR_TICKWHEEL_INVALID_MESSAGE'],
      [{ topic: 't', payload: undefined }, 'ERR_TICKWHEEL_INVALID_MESSAGE'],
      [{ topic: 't', payload: 1, maxAttempts: 0 }, 'ERR_TICKWHEEL_INVALID_MESSAGE'],
      [
        { topic: 't', payload: 1, backoff: { type: 'linear', delayMs: 1 } },
        'ERR_TICKWHEEL_INVALID_MESSAGE',
      ],
      [null, 'ERR_TICKWHEEL_INVALID_MESSAGE'],
    ];
    for (const [request, code] of bad) {
      await expect(q.schedule(request as never)).rejects.toMatchObject({ code });
    }
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    await expect(q.schedule({ topic: 't', payload: deep })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
      message: 'payload must be JSON-serialisable or bytes: it is nested too deeply',
    });
    await expect(q.receive('t', { max: 0 })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    await expect(q.ack(42 as never)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
    });
    expect(await q.ack('not-a-receipt')).toBe(false);
    expect(await q.get('unknown')).toBeUndefined();
  });

  it('refuses a field a message does not have, as the HTTP API does (a typo is not a message due now)', async () => {
    const q = await open();
    await expect(q.schedule({ topic: 't', payload: 1, delay: 5_000 } as never)).rejects.toThrow(
      expect.objectContaining({
        code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
        message: expect.stringContaining('no field "delay"'),
      }),
    );
    await expect(
      q.scheduleMany([
        { topic: 't', payload: 1, delayMs: 5_000 },
        { topic: 't', payload: 2, delayMS: 5_000 } as never,
      ]),
    ).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
      message: expect.stringMatching(/^messages\[1\]: a message has no field "delayMS"/),
    });
    // Nothing of either call was scheduled; a field inherited from a prototype is not looked at.
    expect((await q.stats()).scheduled).toBe(0);
    const request = Object.assign(Object.create({ extra: 1 }) as object, {
      topic: 't',
      payload: 3,
    });
    expect((await q.schedule(request as never)).id).toEqual(expect.any(String));
  });

  it('keeps every acknowledged schedule across a close and reopen (file store)', async () => {
    const q = await open();
    if (!kind.durable) return;
    const ids: string[] = [];
    for (let i = 0; i < 30; i++)
      ids.push((await q.schedule({ topic: 'r', payload: i, delayMs: 100 + i * 200 })).id);
    await q.cancel(ids[5]);
    await advance(clock, 150, 100, queue);
    const [first] = await q.receive('r');
    await q.ack(first.receipt);
    await q.close();
    queue = await kind.open(clock);
    await advance(clock, 7000, 500, queue);
    const got = await queue.receive('r', { max: 100 });
    expect(got.map((m) => m.payload).sort((a, b) => (a as number) - (b as number))).toEqual(
      [...Array(30).keys()].filter((i) => i !== 0 && i !== 5),
    );
  });
});

describe('DelayQueue.open refuses bad options with a named error', () => {
  const scratch = useTempDirs('open');

  it('no options, or neither dir nor store', async () => {
    for (const options of [undefined, null, 'data']) {
      await expect(DelayQueue.open(options as never)).rejects.toMatchObject({
        name: 'TickwheelTypeError',
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
        message: expect.stringContaining("{ dir: './data' }"),
      });
    }
    await expect(DelayQueue.open({})).rejects.toMatchObject({
      name: 'TickwheelTypeError',
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
      message: expect.stringMatching(/needs dir or store/),
    });
  });

  it('a dir that is a file, or runs through one, keeping the system error as its cause', async () => {
    const file = join(scratch(), 'somefile');
    writeFileSync(file, 'not a directory');
    for (const dir of [file, join(file, 'data')]) {
      const err = await DelayQueue.open({ dir }).then(
        () => undefined,
        (failed: unknown) => failed,
      );
      expect(err).toBeInstanceOf(TickwheelError);
      expect(err).toMatchObject({
        name: 'TickwheelTypeError',
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
        message: expect.stringContaining(`dir must be a directory: ${dir}`),
        cause: { code: expect.stringMatching(/^(EEXIST|ENOTDIR)$/) },
      });
    }
    expect(readFileSync(file, 'utf8')).toBe('not a directory');
  });

  it('a store that is not a Store, before it is used', async () => {
    const dir = join(scratch(), 'unused');
    for (const store of [{}, null, 5, { close: async () => {} }]) {
      await expect(DelayQueue.open({ dir, store: store as never })).rejects.toMatchObject({
        name: 'TickwheelTypeError',
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
        message: expect.stringMatching(/^store must be a Store such as new MemoryStore\(\)/),
      });
    }
    await expect(DelayQueue.open({ store: {} as never })).rejects.toThrow(/lacks the methods/);
    expect(existsSync(dir)).toBe(false);
    const queue = await DelayQueue.open({ store: new MemoryStore() });
    await queue.close();
  });
});
