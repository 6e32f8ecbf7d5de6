import { fileURLToPath } from 'node:url';
import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  TickwheelClient,
  type ClientConsumeOptions,
  type QueueOperations,
} from '../../src/client/index.js';
import { DelayQueue, MemoryStore, type ConsumeOptions, type Queue } from '../../src/delay-queue.js';
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
  'deadLetters',
  'requeue',
  'stats',
  'close',
] as const;

type Shared = (typeof SHARED)[number];

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
        expect(errors[1]).toMatchObject({
          name: (errors[0] as Error).name,
          code: (errors[0] as { code: string }).code,
          message: (errors[0] as Error).message,
        });
      }
    } finally {
      await tw.close();
      await queue.close();
    }
  });
});
