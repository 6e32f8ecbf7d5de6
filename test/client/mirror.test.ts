import { describe, expect, expectTypeOf, it } from 'vitest';
import { TickwheelClient, type ClientConsumeOptions } from '../../src/client/index.js';
import { DelayQueue, MemoryStore, type ConsumeOptions } from '../../src/delay-queue.js';

/**
 * The operations `tickwheel/client` shares with `tickwheel/queue`: a name added to one side must
 * be added to the other (and here), so the two cannot drift apart.
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

/** Public methods of a prototype chain, up to Object.prototype. */
function methods(prototype: object): Set<string> {
  const names = new Set<string>();
  for (let p = prototype; p !== Object.prototype; p = Object.getPrototypeOf(p) as object) {
    for (const name of Object.getOwnPropertyNames(p)) {
      const descriptor = Object.getOwnPropertyDescriptor(p, name);
      if (name !== 'constructor' && typeof descriptor?.value === 'function') names.add(name);
    }
  }
  return names;
}

describe('the client mirrors the embedded queue', () => {
  const embedded = methods(DelayQueue.prototype);
  const client = methods(TickwheelClient.prototype);

  it.each(SHARED)('both have %s, taking the same leading arguments', (name) => {
    expect(embedded.has(name), `DelayQueue.${name}`).toBe(true);
    expect(client.has(name), `TickwheelClient.${name}`).toBe(true);
    // Function.length counts the arguments before the first optional one: the client adds only
    // an optional CallOptions at the end, so the counts agree.
    const queueMethod = DelayQueue.prototype[name] as (...args: unknown[]) => unknown;
    const clientMethod = TickwheelClient.prototype[name] as (...args: unknown[]) => unknown;
    expect(clientMethod.length, name).toBe(queueMethod.length);
  });

  it('resolves to the same results (checked by the type checker)', () => {
    type Result<T extends Record<Shared, unknown>, K extends Shared> = T[K] extends (
      ...args: never[]
    ) => infer R
      ? Awaited<R>
      : never;
    expectTypeOf<Result<TickwheelClient, 'scheduleMany'>>().toEqualTypeOf<
      Result<DelayQueue, 'scheduleMany'>
    >();
    expectTypeOf<Result<TickwheelClient, 'ackMany'>>().toEqualTypeOf<
      Result<DelayQueue, 'ackMany'>
    >();
    expectTypeOf<Result<TickwheelClient, 'nackMany'>>().toEqualTypeOf<
      Result<DelayQueue, 'nackMany'>
    >();
    expectTypeOf<Result<TickwheelClient, 'receive'>>().toEqualTypeOf<
      Result<DelayQueue, 'receive'>
    >();
    expectTypeOf<Result<TickwheelClient, 'get'>>().toEqualTypeOf<Result<DelayQueue, 'get'>>();
    expectTypeOf<Parameters<TickwheelClient['scheduleMany']>[0]>().toEqualTypeOf<
      Parameters<DelayQueue['scheduleMany']>[0]
    >();
    expectTypeOf<Parameters<TickwheelClient['nackMany']>[1]>().toEqualTypeOf<
      Parameters<DelayQueue['nackMany']>[1]
    >();
    // Every embedded consume option is a client consume option, with a type the client accepts.
    expectTypeOf<ConsumeOptions>().toExtend<ClientConsumeOptions>();
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
