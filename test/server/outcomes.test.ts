/**
 * Error answers say whether the request may have taken effect (docs/http-api.md, Retries):
 * `outcome: 'unknown'` with the id it was written under and `retry: 'same-id'` for a write that
 * failed after it reached the disk, `outcome: 'none'` for a refusal. The client SDK sends an id
 * it made for a message that has none, and its retry after an unknown outcome finds the first
 * message instead of making a second: one delivery.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import { TickwheelClient, TickwheelHttpError } from '../../src/client/index.js';
import { DelayQueue } from '../../src/delay-queue.js';
import { createServer, type TickwheelServer } from '../../src/server/index.js';
import { FileStore } from '../../src/store/file/file-store.js';
import { failingAfterWrite } from '../queue/failing-store.js';
import { T0, advance } from '../queue/harness.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('outcomes-http');

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A server on a file store whose next `add` is written and then reported failed. */
async function serve() {
  const dir = tempDir();
  const clock = new ManualClock(T0);
  const store = await FileStore.open({ dir, fsync: 'batch', windowMs: 500 });
  const { store: failing, fault } = failingAfterWrite(store);
  const queue = await DelayQueue.open({ store: failing, clock, horizonMs: 1000 });
  closers.push(() => queue.close());
  const server: TickwheelServer = await createServer({ queue, logLevel: 'silent' });
  await server.listen({ port: 0, host: '127.0.0.1' });
  closers.push(() => server.close());
  const url = `http://127.0.0.1:${(server.server.address() as { port: number }).port}`;
  return { url, queue, clock, fault };
}

async function post(url: string, body: unknown) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as { error: unknown } };
}

describe('error answers and their outcome', () => {
  it('a schedule written before its store failed: 503, outcome unknown, the id, retry same-id', async () => {
    const { url, fault } = await serve();
    fault.failing = 'add';
    const answer = await post(`${url}/v1/topics/t/messages`, { payload: 1, delayMs: 5_000 });
    expect(answer.status).toBe(503);
    const error = answer.body.error as Record<string, unknown>;
    expect(error).toMatchObject({
      code: 'ERR_TICKWHEEL_IO',
      outcome: 'unknown',
      retry: 'same-id',
    });
    expect(typeof error.id).toBe('string');
    expect(error.message).toContain(`repeating it with id ${error.id as string} is safe`);

    // Sent again with that id: the message written, not a second one.
    const again = await post(`${url}/v1/topics/t/messages`, {
      payload: 1,
      delayMs: 5_000,
      id: error.id,
    });
    expect(again).toMatchObject({ status: 201, body: { id: error.id } });
  });

  it('a refusal: outcome none', async () => {
    const { url } = await serve();
    const answer = await post(`${url}/v1/topics/t/messages`, { payload: 1, delayMs: -1, x: 1 });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatchObject({ outcome: 'none' });
    expect(answer.body.error).not.toHaveProperty('id');
  });
});

describe('the client SDK', () => {
  it('sends an id it made, and its retry after an unknown outcome makes no second message', async () => {
    const { url, queue, clock, fault } = await serve();
    const sent: Array<{ id?: string }> = [];
    const answers: number[] = [];
    const client = new TickwheelClient({
      url,
      retryDelayMs: 1,
      fetch: async (input, init) => {
        sent.push(JSON.parse(String(init?.body)) as { id?: string });
        const response = await fetch(input, init);
        answers.push(response.status);
        return response;
      },
    });
    closers.push(() => client.close());
    fault.failing = 'add';
    const result = await client.schedule({ topic: 't', payload: 'once', delayMs: 3_000 });

    expect(answers).toEqual([503, 201]);
    expect(sent).toHaveLength(2);
    expect(sent[0].id).toMatch(/^[0-9a-f-]{36}$/);
    expect(sent[1].id).toBe(sent[0].id);
    expect(result.id).toBe(sent[0].id);

    let delivered = 0;
    for (let step = 0; step < 10; step++) {
      await advance(clock, 1_000, 100, queue);
      for (const message of await queue.receive('t', { max: 10 })) {
        delivered++;
        await queue.ack(message.receipt);
      }
    }
    expect(delivered).toBe(1);
    expect(await queue.stats()).toMatchObject({ deduplicated: 1 });
  });

  it('a call that fails for good says the outcome and the id it made', async () => {
    const { url, fault } = await serve();
    const client = new TickwheelClient({ url, retries: 0 });
    closers.push(() => client.close());
    fault.failing = 'add';
    const err = await client
      .schedule({ topic: 't', payload: 1, delayMs: 3_000 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TickwheelHttpError);
    expect(err).toMatchObject({ status: 503, outcome: 'unknown', retry: 'same-id' });
    expect((err as TickwheelHttpError).id).toMatch(/^[0-9a-f-]{36}$/);
  });
});
