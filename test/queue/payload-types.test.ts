/**
 * Typed payloads: `DelayQueue<Payload>` and `TickwheelClient<Payload>` carry the payload's type
 * from schedule() to receive() and to the consume handler. The type assertions are checked by
 * the compiler: `npm run typecheck`, and the first test here, which compiles this file. The
 * `@ts-expect-error` lines fail it if a wrong payload compiles.
 */

import { readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { TickwheelClient } from '../../src/client/index.js';
import {
  DelayQueue,
  MemoryStore,
  type MessageHandler,
  type Queue,
  type QueueOperations,
  type ReceivedMessage,
  type ScheduleRequest,
} from '../../src/delay-queue.js';
import { useTempDirs } from '../support/temp-dir.js';
import { typeErrors } from '../support/type-errors.js';

const tempDir = useTempDirs('payload-types');

interface Order {
  orderId: number;
  sku: string;
}

/** Code written once for the embedded queue and the client, typed by its payload. */
async function placeOrder(queue: QueueOperations<Order>, order: Order): Promise<string> {
  const { id } = await queue.schedule({ topic: 'orders', payload: order, delayMs: 0 });
  return id;
}

/** Never called: each line must fail to compile. */
function wrongPayloads(queue: DelayQueue<Order>, client: TickwheelClient<Order>): void {
  // @ts-expect-error: a string is not an Order
  void queue.schedule({ topic: 'orders', payload: 'order 1' });
  // @ts-expect-error: an Order has a sku
  void queue.scheduleMany([{ topic: 'orders', payload: { orderId: 1 } }]);
  // @ts-expect-error: the handler of a queue of Orders gets Orders
  queue.consume('orders', (message: ReceivedMessage<{ invoice: string }>) => {
    void message;
  });
  // @ts-expect-error: the client is typed the same way
  void client.schedule({ topic: 'orders', payload: { orderId: '1', sku: 'a' } });
  // @ts-expect-error: a queue of Orders is not a queue of strings
  void placeString(queue);
}

async function placeString(queue: QueueOperations<string>): Promise<void> {
  await queue.schedule({ topic: 'names', payload: 'x' });
}

/**
 * The typed examples of the README and of docs/http-api.md, importing the sources instead of
 * the package, as .mts files (modules, so that top-level await compiles).
 */
function docExamples(): string[] {
  const dir = tempDir();
  const sources = fileURLToPath(new URL('../../src/', import.meta.url));
  return ['README.md', 'docs/http-api.md'].flatMap((doc) => {
    const text = readFileSync(new URL(`../../${doc}`, import.meta.url), 'utf8');
    return [...text.matchAll(/```ts\n([\s\S]*?)```/g)]
      .map((match) => match[1])
      .filter((code) => code.includes('<Email>'))
      .map((code, i) => {
        const file = join(dir, `${basename(doc, '.md')}-${i}.mts`);
        const local = code
          .replace("'tickwheel/queue'", `'${sources}delay-queue.js'`)
          .replace("'tickwheel/client'", `'${sources}client/index.js'`);
        writeFileSync(file, local);
        return file;
      });
  });
}

describe('typed payloads', () => {
  it('compile as this file and the docs say: the right payloads, and no wrong one', () => {
    const examples = docExamples();
    expect(examples).toHaveLength(2);
    expect(typeErrors(fileURLToPath(import.meta.url), ...examples)).toEqual([]);
  });

  it('flow from schedule() to the consume handler and to receive()', async () => {
    const queue = await DelayQueue.open<Order>({ store: new MemoryStore() });
    expectTypeOf(queue).toEqualTypeOf<DelayQueue<Order>>();
    try {
      await placeOrder(queue, { orderId: 1, sku: 'a' });
      const handled = new Promise<Order>((resolve) => {
        queue.consume('orders', (message) => {
          expectTypeOf(message).toEqualTypeOf<ReceivedMessage<Order>>();
          expectTypeOf(message.payload.sku).toEqualTypeOf<string>();
          resolve(message.payload);
        });
      });
      expect(await handled).toEqual({ orderId: 1, sku: 'a' });

      await placeOrder(queue, { orderId: 2, sku: 'b' });
      expectTypeOf(queue.receive).returns.resolves.toEqualTypeOf<ReceivedMessage<Order>[]>();
      expectTypeOf(wrongPayloads).toBeFunction();
    } finally {
      await queue.close();
    }
  });

  it('are unknown unless given, and a typed queue is still a Queue', async () => {
    const queue = await DelayQueue.open({ store: new MemoryStore() });
    await queue.close();
    expectTypeOf(queue).toEqualTypeOf<DelayQueue<unknown>>();
    expectTypeOf<ReceivedMessage>().toEqualTypeOf<ReceivedMessage<unknown>>();
    expectTypeOf<ScheduleRequest['payload']>().toEqualTypeOf<unknown>();
    expectTypeOf<MessageHandler>().parameter(0).toEqualTypeOf<ReceivedMessage<unknown>>();
    // What takes any queue (the server, the CLI) takes a typed one.
    expectTypeOf<DelayQueue<Order>>().toExtend<Queue>();
  });

  it('type the client the same way', () => {
    const client = new TickwheelClient<Order>({ url: 'http://127.0.0.1:1' });
    expectTypeOf(client).toExtend<QueueOperations<Order>>();
    expectTypeOf(client.receive).returns.resolves.toEqualTypeOf<ReceivedMessage<Order>[]>();
    expectTypeOf(client.consume).parameter(1).toEqualTypeOf<MessageHandler<Order>>();
    expectTypeOf(new TickwheelClient()).toEqualTypeOf<TickwheelClient<unknown>>();
  });
});
