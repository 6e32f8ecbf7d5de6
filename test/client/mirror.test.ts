import { fileURLToPath } from 'node:url';
import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  TickwheelClient,
  type ClientConsumeOptions,
  type QueueOperations,
} from '../../src/client/index.js';
import { DelayQueue, MemoryStore, type ConsumeOptions, type Queue } from '../../src/delay-queue.js';
import type { ListOptions } from '../../src/protocol/model.js';
import { createServer } from '../../src/server/index.js';
import { typeErrors } from '../support/type-errors.js';

/**
 * The operations `tickwheel/client` shares with `tickwheel/queue`: the QueueOperations
 * interface, which `Queue` extends and `TickwheelClient` implements, so that a method missing
 * or different on either side does not compile. This list is what the interface must hold.
 */
const SHARED = [
  'schedule',
  'scheduleMany',
  'cancel',
  'reschedule',
  'rescheduleTo',
  'get',
  'receive',
  'ack',
  'ackMany',
  'nack',
  'nackMany',
  'consume',
  'list',
  'deadLetters',
  'requeue',
  'stats',
  'close',
] as const;

type Shared = (typeof SHARED)[number];

/** The client's error is the queue's: the same class name, code and message. */
function expectSameError(client: unknown, queue: unknown, what?: string): void {
  const { name, code, message } = queue as Error & { code: string };
  expect(client, what).toMatchObject({ name, code, message });
}

describe('the client mirrors the embedded queue', () => {
  it('both implement QueueOperations, which holds every shared operation (the type checker)', () => {
    // The assertions below are types: compiling this file (and the sources it imports, where
    // `implements` holds) is the test.
    expect(typeErrors(fileURLToPath(import.meta.url))).toEqual([]);
    expectTypeOf<keyof QueueOperations>().toEqualTypeOf<Shared>();
    expectTypeOf<TickwheelClient>().toExtend<QueueOperations>();
    expectTypeOf<DelayQueue>().toExtend<Queue>();
    expectTypeOf<Queue>().toExtend<QueueOperations>();
    // Every embedded consume option is a client consume option, with a type the client accepts.
    expectTypeOf<ConsumeOptions>().toExtend<ClientConsumeOptions>();
  });

  it.each(SHARED)('both take the same leading arguments of %s', (name) => {
    // The type checker lets a method require an argument its interface makes optional:
    // Function.length (the arguments before the first one with a default) must agree, as the
    // client adds only an optional CallOptions at the end.
    const queueMethod = DelayQueue.prototype[name] as (...args: unknown[]) => unknown;
    const clientMethod = TickwheelClient.prototype[name] as (...args: unknown[]) => unknown;
    expect(clientMethod.length, name).toBe(queueMethod.length);
  });

  it('refuses payloads JSON would change silently with the same errors, before any request', async () => {
    const queue = await DelayQueue.open({ store: new MemoryStore() });
    const tw = new TickwheelClient({ url: 'http://127.0.0.1:1', retries: 0 });
    try {
      for (const payload of [new ArrayBuffer(8), new DataView(new ArrayBuffer(8)), new Set([1])]) {
        const errors = await Promise.all(
          [queue, tw].map((side) =>
            side.schedule({ topic: 't', payload }).then(
              () => undefined,
              (err: unknown) => err,
            ),
          ),
        );
        expect(errors[0]).toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_MESSAGE' });
        expectSameError(errors[1], errors[0]);
      }
      // Bytes as a Uint8Array or a Buffer, and plain JSON values, go through as ever.
      await queue.schedule({ topic: 't', payload: new Uint8Array([1, 2]) });
      await queue.schedule({ topic: 't', payload: Buffer.from('ab') });
      await queue.schedule({ topic: 't', payload: { at: new Date(0) } });
    } finally {
      await queue.close();
    }
  });

  it('refuses the same bad messages with the same errors, before any request', async () => {
    const queue = await DelayQueue.open({ store: new MemoryStore() });
    // Nothing listens there: an error that is not the queue's would be a network failure.
    const tw = new TickwheelClient({ url: 'http://127.0.0.1:1', retries: 0 });
    const bad: unknown[] = [
      { topic: 't', payload: 1, delay: 5 },
      { topic: 't', payload: 1, delayMs: 7e12 },
      { topic: 't', payload: 1, delayMs: '5' },
      { topic: 't', payload: 1, deliverAt: 'tomorrow' },
      { topic: 't', payload: 1, delayMs: 1, deliverAt: 2 },
      { topic: '', payload: 1 },
      { topic: 'a b', payload: 1 },
      { topic: 't', payload: 1, id: '' },
      { topic: 't', payload: 1, id: 'x'.repeat(201) },
      { topic: 't', payload: 1, maxAttempts: 0 },
      { topic: 't', payload: 1, maxAttempts: 1.5 },
      { topic: 't', payload: 1, backoff: { type: 'linear', delayMs: 1 } },
      { topic: 't', payload: 1, backoff: { type: 'fixed', delayMs: 1, extra: 1 } },
      { topic: 't', payload: 1, backoff: { type: 'fixed', delayMs: 1e16 } },
      { topic: 't', payload: 1, backoff: { type: 'fixed', delayMs: 1, maxDelayMs: 1e16 } },
      { topic: 't', payload: 1, trace: 'x' },
      { topic: 't', payload: 1, trace: null },
      { topic: 't', payload: 1, trace: { traceparent: 1 } },
      { topic: 't', payload: 1, trace: { traceparent: 'x', parent: 'y' } },
      { topic: 't' },
      { topic: 't', payload: () => 1 },
      'not a message',
    ];
    try {
      for (const message of bad) {
        const what = JSON.stringify(message) ?? String(message);
        const errors = await Promise.all(
          [queue, tw].map((side) =>
            side.schedule(message as never).then(
              () => undefined,
              (err: unknown) => err,
            ),
          ),
        );
        expect(errors[0], what).toMatchObject({ code: expect.stringMatching(/^ERR_TICKWHEEL_/) });
        expectSameError(errors[1], errors[0], what);
        // In a batch, the same error names the message's place.
        const many = await Promise.all(
          [queue, tw].map((side) =>
            side.scheduleMany([{ topic: 't', payload: 0 }, message as never]).then(
              () => undefined,
              (err: unknown) => err,
            ),
          ),
        );
        expect((many[0] as Error).message, what).toMatch(/^messages\[1\]/);
        expectSameError(many[1], many[0], what);
      }
    } finally {
      await tw.close();
      await queue.close();
    }
  });

  it('the server refuses, with a 4xx, each message the queue refuses, and takes what it takes', async () => {
    const queue = await DelayQueue.open({ store: new MemoryStore() });
    const server = await createServer({ queue, logLevel: 'silent' });
    await server.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(server.server.address() as { port: number }).port}`;
    const messages: Record<string, unknown>[] = [
      { payload: 1, delay: 5 },
      { payload: 1, maxAttempts: 1.5 },
      { payload: 1, backoff: { type: 'fixed', delayMs: 1, extra: 1 } },
      { payload: 1, backoff: { type: 'fixed', delayMs: 1e16 } },
      { payload: 1, trace: 'x' },
      { payload: 1, trace: { traceparent: 'x', parent: 'y' } },
      // Taken by both: a malformed trace is dropped, a due time in the past is now.
      { payload: 1, trace: { traceparent: 'not a traceparent', tracestate: '=' } },
      { payload: 1, trace: {} },
      {
        payload: 1,
        trace: { traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01${'x'.repeat(600)}` },
      },
      { payload: 1, delayMs: -1 },
      { payload: 1, backoff: { type: 'exponential', delayMs: 0, jitter: 1, maxDelayMs: 0 } },
    ];
    try {
      for (const message of messages) {
        const what = JSON.stringify(message);
        const embedded = await queue.schedule({ topic: 't', ...message } as never).then(
          () => 'taken',
          (err: { code: string }) => err.code,
        );
        const res = await fetch(`${url}/v1/topics/t/messages`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: what,
        });
        expect(res.status === 201 ? 'taken' : res.status, what).toBe(
          embedded === 'taken' ? 'taken' : 400,
        );
      }
    } finally {
      await server.close();
      await queue.close();
    }
  });

  it('refuses the same bad list options with the same errors, before any request', async () => {
    const queue = await DelayQueue.open({ store: new MemoryStore() });
    // Nothing listens there: an error that is not the queue's would be a network failure.
    const tw = new TickwheelClient({ url: 'http://127.0.0.1:1', retries: 0 });
    const otherTopics = await (async () => {
      await queue.schedule({ topic: 'other', payload: 1, delayMs: 60_000 });
      await queue.schedule({ topic: 'other', payload: 2, delayMs: 60_000 });
      return (await queue.list({ topic: 'other', limit: 1 })).cursor as string;
    })();
    try {
      for (const options of [
        { topic: '' },
        { topic: 't', limit: 0 },
        { topic: 't', limit: 1001 },
        { topic: 't', limit: 2.5 },
        { topic: 't', from: -1 },
        { topic: 't', from: Number.NaN },
        { topic: 't', from: 10, until: 5 },
        { topic: 't', cursor: 'not a cursor' },
        { topic: 't', cursor: otherTopics },
        { topic: 't', after: 'x' },
      ] as ListOptions[]) {
        const errors = await Promise.all(
          [queue, tw].map((side) =>
            side.list(options).then(
              () => undefined,
              (err: unknown) => err,
            ),
          ),
        );
        expect(errors[0], JSON.stringify(options)).toMatchObject({ code: expect.any(String) });
        expectSameError(errors[1], errors[0], JSON.stringify(options));
      }
    } finally {
      await tw.close();
      await queue.close();
    }
  });

  it('refuses the same bad consume options with the same errors', async () => {
    const queue = await DelayQueue.open({ store: new MemoryStore() });
    const tw = new TickwheelClient({ url: 'http://127.0.0.1:1' });
    try {
      for (const options of [
        { concurrency: 0 },
        { concurrency: 2.5 },
        { concurrency: 1001 },
        { visibilityMs: 0 },
        { visibilityMs: Number.NaN },
      ]) {
        const errors = [queue, tw].map((side) => {
          try {
            return side.consume('t', () => {}, options);
          } catch (err) {
            return err;
          }
        });
        expect(errors[0]).toMatchObject({ name: 'TickwheelRangeError' });
        expectSameError(errors[1], errors[0]);
      }
    } finally {
      await tw.close();
      await queue.close();
    }
  });
});
