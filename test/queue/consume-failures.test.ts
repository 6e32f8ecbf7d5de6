/**
 * consume() checks its options at once, reports every failure with where it happened, never
 * stops on its own, and the reason a message failed stays with its dead letter.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import { DelayQueue, MemoryStore, type ConsumeErrorContext } from '../../src/delay-queue.js';
import type { MessageState } from '../../src/queue/message.js';
import { T0, advance, fileKind, memoryKind, settle, type QueueKind } from './harness.js';

const open: Array<{ close(): Promise<void> }> = [];
const kinds: QueueKind[] = [];
afterEach(async () => {
  for (const thing of open.splice(0).reverse()) await thing.close().catch(() => undefined);
  for (const kind of kinds.splice(0)) kind.cleanup();
});

async function queueOf(kind: QueueKind, clock: ManualClock): Promise<DelayQueue> {
  const queue = await kind.open(clock);
  open.push(queue);
  return queue;
}

describe('consume() options', () => {
  it('are checked when consume is called, with coded errors', async () => {
    const kind = memoryKind();
    const queue = await queueOf(kind, new ManualClock(T0));
    const bad: Array<[unknown, string]> = [
      [{ visibilityMs: 0 }, 'visibilityMs'],
      [{ visibilityMs: Number.NaN }, 'visibilityMs'],
      [{ concurrency: 0 }, 'concurrency'],
      [{ concurrency: 1.5 }, 'concurrency'],
      [{ onError: 'log' }, 'onError'],
      [null, 'options'],
    ];
    for (const [options, named] of bad) {
      expect(() => queue.consume('jobs', () => {}, options as never)).toThrow(
        expect.objectContaining({
          code: expect.stringMatching(/^ERR_TICKWHEEL_INVALID_(OPTION|CALLBACK)$/),
          message: expect.stringContaining(named),
        }),
      );
    }
  });
});

describe.each([
  ['memory', memoryKind],
  ['file', fileKind],
] as const)('consume() failures (%s store)', (_name, makeKind) => {
  it('reports a failing handler with topic, id and attempt, retries, and keeps the reason with the dead letter', async () => {
    const kind = makeKind();
    kinds.push(kind);
    const clock = new ManualClock(T0);
    let queue = await queueOf(kind, clock);
    const { id } = await queue.schedule({
      topic: 'jobs',
      payload: 'p',
      maxAttempts: 2,
      backoff: { type: 'fixed', delayMs: 10 },
    });
    const seen: Array<{ message: string; context: ConsumeErrorContext }> = [];
    const consumer = queue.consume(
      'jobs',
      (message) => {
        throw new Error(`boom on attempt ${message.attempts}`);
      },
      { onError: (err, context) => seen.push({ message: (err as Error).message, context }) },
    );
    open.push(consumer);
    for (let i = 0; i < 500 && seen.length < 2; i++) {
      await advance(clock, 20, 10, queue);
      await new Promise((r) => setTimeout(r, 2)); // the nack's write is real I/O
    }
    await consumer.close();
    await queue.settled();
    expect(seen).toEqual([
      { message: 'boom on attempt 1', context: { topic: 'jobs', id, attempts: 1 } },
      { message: 'boom on attempt 2', context: { topic: 'jobs', id, attempts: 2 } },
    ]);
    const [dead] = await queue.deadLetters('jobs');
    expect(dead).toMatchObject({ id, status: 'dead', lastError: 'Error: boom on attempt 2' });
    expect(await queue.get(id)).toMatchObject({ lastError: 'Error: boom on attempt 2' });
    if (kind.durable) {
      // The reason is in the log: it survives a reopen (with a snapshot written at close).
      await queue.close();
      queue = await queueOf(kind, clock);
      expect(await queue.deadLetters('jobs')).toEqual([dead]);
    }
  });

  it('keeps a nack reason and a visibility timeout as lastError', async () => {
    const kind = makeKind();
    kinds.push(kind);
    const clock = new ManualClock(T0);
    const queue = await queueOf(kind, clock);
    const { id } = await queue.schedule({ topic: 'jobs', payload: 'p', maxAttempts: 3 });
    await advance(clock, 1, 1, queue);
    const [first] = await queue.receive('jobs', { visibilityMs: 50 });
    expect(await queue.nack(first.receipt, { reason: 'upstream said 503', delayMs: 0 })).toBe(true);
    expect(await queue.get(id)).toMatchObject({ lastError: 'upstream said 503' });
    await advance(clock, 1, 1, queue);
    await queue.receive('jobs', { visibilityMs: 50 });
    await advance(clock, 200, 10, queue); // not acked in time
    expect((await queue.get(id))?.lastError).toMatch(/visibility timeout/);
    await expect(queue.nack('x', { reason: 42 as never })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
  });
});

describe('a consumer whose receive fails', () => {
  it('reports the failure and carries on: the message is delivered once the store reads again', async () => {
    /**
     * A real MemoryStore that hands due messages over without their payloads (as the file store
     * does for messages read back from disk) and whose first payload reads fail.
     */
    class FlakyStore extends MemoryStore {
      failing = 2;
      override loadUntil(until: number, onDue: (message: MessageState) => void): Promise<void> {
        return super.loadUntil(until, (message) => onDue({ ...message, payload: undefined }));
      }
      override async payloadOf(message: MessageState): Promise<Uint8Array> {
        if (this.failing > 0) {
          this.failing--;
          throw Object.assign(new Error('EIO: simulated read failure'), { code: 'EIO' });
        }
        return super.payloadOf(message);
      }
    }
    const store = new FlakyStore();
    const clock = new ManualClock(T0);
    const queue = await DelayQueue.open({ store, clock, horizonMs: 1000 });
    open.push(queue);
    // A message whose payload the queue does not hold: received through store.payloadOf.
    await queue.schedule({ topic: 'jobs', payload: 'far', delayMs: 5000 });
    const errors: string[] = [];
    const handled: unknown[] = [];
    const consumer = queue.consume('jobs', (message) => void handled.push(message.payload), {
      onError: (err, context) => errors.push(`${context.topic}: ${(err as Error).message}`),
    });
    open.push(consumer);
    for (let i = 0; i < 200 && handled.length === 0; i++) {
      await advance(clock, 100, 50, queue);
      await new Promise((r) => setTimeout(r, 5)); // the loop's pause is on the real clock
    }
    expect(errors.length).toBeGreaterThan(0);
    expect(errors[0]).toBe('jobs: EIO: simulated read failure');
    expect(handled).toEqual(['far']);
    await settle();
  });
});

describe('the default onError', () => {
  it('is a process warning naming the topic, the message and the attempt', async () => {
    const clock = new ManualClock(T0);
    const queue = await DelayQueue.open({ store: new MemoryStore(), clock, horizonMs: 1000 });
    open.push(queue);
    const { id } = await queue.schedule({ topic: 'mail', payload: 1, maxAttempts: 1 });
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const consumer = queue.consume('mail', () => {
        throw new TypeError('no such mailbox');
      });
      open.push(consumer);
      for (let i = 0; i < 20 && warnings.length === 0; i++) {
        await advance(clock, 10, 10, queue);
        await new Promise((r) => setImmediate(r));
      }
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.map((w) => w.message)).toContain(
      `consumer of topic mail, message ${id}, attempt 1: TypeError: no such mailbox`,
    );
  });
});

describe('an onError that throws', () => {
  it('becomes a process warning, even a thrown non-Error, and the consumer carries on', async () => {
    const clock = new ManualClock(T0);
    const queue = await DelayQueue.open({ store: new MemoryStore(), clock, horizonMs: 1000 });
    open.push(queue);
    await queue.schedule({ topic: 'jobs', payload: 'bad', maxAttempts: 1 });
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    const handled: unknown[] = [];
    try {
      const consumer = queue.consume(
        'jobs',
        (message) => {
          handled.push(message.payload);
          if (message.payload === 'bad') throw new Error('handler fails');
        },
        {
          onError: () => {
            throw 42;
          },
        },
      );
      open.push(consumer);
      for (let i = 0; i < 20 && warnings.length === 0; i++) {
        await advance(clock, 10, 10, queue);
        await new Promise((r) => setImmediate(r));
      }
      await queue.schedule({ topic: 'jobs', payload: 'good' });
      for (let i = 0; i < 20 && handled.length < 2; i++) {
        await advance(clock, 10, 10, queue);
        await new Promise((r) => setImmediate(r));
      }
      await consumer.close();
    } finally {
      process.off('warning', onWarning);
    }
    expect(handled).toEqual(['bad', 'good']);
    expect(warnings.map((w) => w.message)).toContain('42');
  });
});

describe('closing a consumer', () => {
  it('does not end another long poll on its topic early', async () => {
    const clock = new ManualClock(T0);
    const queue = await DelayQueue.open({ store: new MemoryStore(), clock, horizonMs: 1000 });
    open.push(queue);
    const consumer = queue.consume('jobs', () => {});
    let answered: unknown[] | undefined;
    const poll = queue.receive('jobs', { waitMs: 5000 }).then((got) => (answered = got));
    await settle();
    await consumer.close();
    await settle();
    expect(answered).toBeUndefined(); // still waiting: 5 s of the queue's clock have not passed
    await queue.schedule({ topic: 'jobs', payload: 'late' });
    await poll;
    expect(answered).toMatchObject([{ payload: 'late' }]);
  });
});
