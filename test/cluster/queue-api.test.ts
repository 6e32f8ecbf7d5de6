/**
 * One API, three homes: the same calls, in the same order, on the embedded queue (file store),
 * on a queue on Valkey 8 and on one on Redis 7.0 (`DelayQueue.open({ redis })`, each a primary
 * with one replica; durability 'replicated', so WAIT on both), give the same results and, for
 * bad arguments, the same error codes and messages. Real time, short delays: a message is
 * never received before its due time on any.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayQueue, type Queue } from '../../src/delay-queue.js';
import type { ReceivedMessage } from '../../src/queue/types.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startReplicated } from '../../scripts/valkey.mjs';

type Backend = 'file' | 'valkey' | 'redis7';

describe.runIf(installed('valkey-server'))('the queue API, embedded and on Valkey', () => {
  let valkey: { primary: { url: string }; stop(): Promise<void> };
  /** Redis 7.0 (Debian's redis-server): functions, but no WAITAOF. */
  let redis: { primary: { url: string }; stop(): Promise<void> } | undefined;
  const dirs: string[] = [];
  const queues: Queue[] = [];
  let run = 0;

  beforeAll(async () => {
    valkey = await startReplicated({ replicas: 1 });
    if (installed('redis-server')) {
      redis = await startReplicated({ binary: 'redis-server', replicas: 1 });
    }
  }, 60_000);

  afterAll(async () => {
    for (const queue of queues) await queue.close().catch(() => {});
    await valkey?.stop();
    await redis?.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  async function open(backend: Backend): Promise<Queue> {
    let queue: Queue;
    if (backend === 'file') {
      const dir = mkdtempSync(join(tmpdir(), 'tickwheel-api-'));
      dirs.push(dir);
      queue = await DelayQueue.open({ dir, fsync: 'never', maxWaitMs: 10_000 });
    } else {
      const server = backend === 'redis7' ? redis : valkey;
      if (server === undefined)
        throw new Error('redis-server is not installed (.ci/run installs it)');
      queue = await DelayQueue.open({
        redis: server.primary.url,
        queue: `api-${run++}`,
        partitions: 8,
        windowMs: 1_000,
        horizonMs: 2_000,
        leaseMs: 1_000,
        maxWaitMs: 10_000,
        onError: () => {},
      });
    }
    queues.push(queue);
    return queue;
  }

  /** Receives until `count` messages of `topic` came, or fails after `ms`. */
  async function receiveAll(
    queue: Queue,
    topic: string,
    count: number,
    ms = 8_000,
  ): Promise<Array<ReceivedMessage & { at: number }>> {
    const got: Array<ReceivedMessage & { at: number }> = [];
    const until = Date.now() + ms;
    while (got.length < count && Date.now() < until) {
      const batch = await queue.receive(topic, { max: 100, waitMs: 500 });
      const at = Date.now();
      for (const message of batch) got.push({ ...message, at });
    }
    return got;
  }

  /** The error code and message of each call, or 'ok'. */
  async function outcomes(calls: Array<() => unknown>): Promise<string[]> {
    const out: string[] = [];
    for (const call of calls) {
      try {
        await call();
        out.push('ok');
      } catch (err) {
        out.push(`${(err as { code?: string }).code}: ${(err as Error).message}`);
      }
    }
    return out;
  }

  it('refuses the same bad arguments with the same codes and messages', async () => {
    const bad = (queue: Queue) => [
      () => queue.schedule({ topic: 'no spaces', payload: 1 }),
      () => queue.schedule({ topic: 't', payload: 1, delayMs: -5, deliverAt: 5 }),
      () => queue.schedule({ topic: 't', payload: 1, id: 'bad id!' }),
      () => queue.schedule({ topic: 't', payload: 1, maxAttempts: 0 }),
      () => queue.schedule({ topic: 't', payload: 'x'.repeat(2 << 20) }),
      () => queue.schedule(null as never),
      () =>
        queue.scheduleMany([
          { topic: 't', payload: 1 },
          { topic: '', payload: 2 },
        ]),
      () => queue.scheduleMany('nope' as never),
      () => queue.cancel(''),
      () => queue.get('has space'),
      () => queue.reschedule('abc', { delayMs: Number.NaN }),
      () => queue.receive('t', { max: 0 }),
      () => queue.receive('t', { max: 1001 }),
      () => queue.receive('t', { waitMs: 60_000 }),
      () => queue.receive('t', { visibilityMs: 0 }),
      () => queue.receive('bad topic'),
      () => queue.ack(42 as never),
      () => queue.nack('c1.1.x', { delayMs: -1 }),
      () => queue.nack('c1.1.x', { reason: 5 as never }),
      () => queue.ackMany([1 as never]),
      () => queue.deadLetters('t', 0),
      () => queue.consume('t', 'not a function' as never),
      () => queue.consume('t', () => {}, { concurrency: 0 }),
    ];
    const [file, shared] = [await open('file'), await open('valkey')];
    const a = await outcomes(bad(file));
    const b = await outcomes(bad(shared));
    expect(b).toEqual(a);
    expect(a.every((line) => line.startsWith('ERR_TICKWHEEL_'))).toBe(true);
    // Unknown receipts and ids are answers, not errors, on both.
    for (const queue of [file, shared]) {
      expect(await queue.ack('c1.1.unknown')).toBe(false);
      expect(await queue.ack('not-a-receipt')).toBe(false);
      expect(await queue.cancel('unknown-id')).toBe(false);
      expect(await queue.get('unknown-id')).toBeUndefined();
      expect(await queue.reschedule('unknown-id', { delayMs: 5 })).toBe(false);
      expect(await queue.requeue('unknown-id')).toBe(false);
    }
  }, 30_000);

  const names = { file: 'embedded (file store)', valkey: 'on Valkey', redis7: 'on Redis 7.0' };
  for (const backend of ['file', 'valkey', 'redis7'] as const) {
    describe(names[backend], () => {
      it('schedules, dedups by id, delivers on time and never early, in order of due time', async () => {
        const queue = await open(backend);
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
        expect(await queue.get('m-1')).toMatchObject({
          id: 'm-1',
          topic: 'mail',
          status: 'scheduled',
          deliverAt: start + 600,
          attempts: 0,
        });
        const got = await receiveAll(queue, 'mail', 3);
        expect(got.map((m) => m.payload)).toEqual([
          Buffer.from([1, 2, 3]),
          'text',
          { to: 'a@b.c' },
        ]);
        for (const message of got) {
          expect(message.at).toBeGreaterThanOrEqual(message.deliverAt);
          expect(message.attempts).toBe(1);
        }
        expect(await queue.get('m-1')).toMatchObject({ status: 'inflight', attempts: 1 });
        expect(await queue.ackMany(got.map((m) => m.receipt))).toEqual([true, true, true]);
        expect(await queue.ack(got[0].receipt)).toBe(false);
        // Both remember finished messages for a while.
        expect(await queue.get('m-1')).toEqual({
          id: 'm-1',
          topic: 'mail',
          status: 'acked',
          deliverAt: start + 600,
          attempts: 1,
        });
      }, 20_000);

      it('cancels and reschedules what is scheduled', async () => {
        const queue = await open(backend);
        const start = Date.now();
        await queue.schedule({ topic: 'job', id: 'gone', payload: 1, delayMs: 300 });
        await queue.schedule({ topic: 'job', id: 'moved', payload: 2, delayMs: 60_000 });
        expect(await queue.cancel('gone')).toBe(true);
        expect(await queue.cancel('gone')).toBe(false);
        expect(await queue.get('gone')).toMatchObject({ id: 'gone', status: 'cancelled' });
        // A finished id may be used again: a new message, which get() reports from then on.
        await queue.schedule({ topic: 'job', id: 'gone', payload: 3, delayMs: 60_000 });
        expect(await queue.get('gone')).toMatchObject({ status: 'scheduled', attempts: 0 });
        expect(await queue.cancel('gone')).toBe(true);
        const due = await queue.rescheduleTo('moved', { deliverAt: start + 500 });
        expect(due).toBe(start + 500);
        expect(await queue.get('moved')).toMatchObject({ deliverAt: start + 500 });
        const got = await receiveAll(queue, 'job', 1);
        expect(got.map((m) => m.id)).toEqual(['moved']);
        expect(got[0].at).toBeGreaterThanOrEqual(start + 500);
        // In flight: it cannot be moved, but it can be cancelled (its ack then fails).
        expect(await queue.reschedule('moved', { delayMs: 10 })).toBe(false);
        expect(await queue.cancel('moved')).toBe(true);
        expect(await queue.ack(got[0].receipt)).toBe(false);
        // Nothing else arrives: the cancelled one stays cancelled.
        expect(await queue.receive('job', { waitMs: 700 })).toEqual([]);
      }, 20_000);

      it('retries a nack after its delay, keeps the reason, buries at maxAttempts, requeues', async () => {
        const queue = await open(backend);
        await queue.schedule({ topic: 'pay', id: 'p-1', payload: 'x', maxAttempts: 2 });
        const [first] = await receiveAll(queue, 'pay', 1);
        const nackedAt = Date.now();
        expect(await queue.nack(first.receipt, { delayMs: 400, reason: 'card declined' })).toBe(
          true,
        );
        expect(await queue.get('p-1')).toMatchObject({
          status: 'scheduled',
          attempts: 1,
          lastError: 'card declined',
        });
        const [second] = await receiveAll(queue, 'pay', 1);
        expect(second.attempts).toBe(2);
        expect(second.at - nackedAt).toBeGreaterThanOrEqual(400);
        expect(await queue.nack(second.receipt, { reason: 'still declined' })).toBe(true);
        const dead = await queue.deadLetters('pay');
        expect(dead).toEqual([
          expect.objectContaining({ id: 'p-1', status: 'dead', lastError: 'still declined' }),
        ]);
        expect((await queue.stats()).topics).toMatchObject({
          pay: { scheduled: 0, ready: 0, inflight: 0, dead: 1 },
        });
        expect(await queue.payloadPreview('p-1')).toEqual({ preview: '"x"', truncated: false });
        expect(await queue.requeue('p-1')).toBe(true);
        expect(await queue.deadLetters('pay')).toEqual([]);
        const [third] = await receiveAll(queue, 'pay', 1);
        expect(third).toMatchObject({ id: 'p-1', attempts: 1 });
        expect(await queue.ack(third.receipt)).toBe(true);
      }, 20_000);

      it('consumes with a handler: acks what resolves, retries what throws', async () => {
        const queue = await open(backend);
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
        const until = Date.now() + 10_000;
        while (!seen.includes('w-2#2') && Date.now() < until) await sleep(50);
        await consumer.close();
        expect(seen.sort()).toEqual(['w-1#1', 'w-2#1', 'w-2#2']);
        expect(errors).toEqual(['flaky']);
        expect(await queue.get('w-1')).toMatchObject({ status: 'acked', attempts: 1 });
      }, 20_000);

      it('counts by topic, sorts what is scheduled by time until due, and ends long polls on close', async () => {
        const queue = await open(backend);
        await queue.scheduleMany([
          { topic: 'later', payload: 1, delayMs: 10 * 60_000 },
          { topic: 'later', payload: 2, delayMs: 3 * 3_600_000 },
          { topic: 'later', payload: 3, delayMs: 30 * 86_400_000 },
        ]);
        const stats = await queue.stats();
        expect(stats.topics).toMatchObject({ later: { scheduled: 3 } });
        expect(stats.scheduled).toBe(3);
        const histogram = await queue.dueHistogram([60_000, 3_600_000, 86_400_000]);
        expect(histogram).toEqual([0, 1, 1, 1]);
        const polling = queue.receive('nothing', { waitMs: 8_000 });
        await sleep(200);
        const closedAt = Date.now();
        await queue.close();
        expect(await polling).toEqual([]);
        expect(Date.now() - closedAt).toBeLessThan(5_000);
        await expect(queue.schedule({ topic: 'x', payload: 1 })).rejects.toMatchObject({
          code: 'ERR_TICKWHEEL_CLOSED',
        });
      }, 20_000);
    });
  }
});
