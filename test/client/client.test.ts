import { createServer as createTcpServer, type Server, type Socket } from 'node:net';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  MAX_BATCH,
  MAX_RECEIPT_LENGTH,
  TickwheelClient,
  TickwheelHttpError,
  TickwheelNetworkError,
  type ReceivedMessage,
} from '../../src/client/index.js';
import { AbortError, TickwheelError } from '../../src/errors.js';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import { createServer, type TickwheelServer } from '../../src/server/index.js';
import { sleep, waitFor } from '../support/wait-for.js';

let server: TickwheelServer;
let queue: DelayQueue;
let url: string;
const closers: Array<() => Promise<unknown>> = [];

beforeEach(async () => {
  queue = await DelayQueue.open({ store: new MemoryStore() });
  server = await createServer({ queue, logLevel: 'silent', maxWaitMs: 2000 });
  await server.listen({ port: 0, host: '127.0.0.1' });
  url = `http://127.0.0.1:${(server.server.address() as { port: number }).port}`;
});

afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
  await server.close();
  await queue.close();
});

function client(options: ConstructorParameters<typeof TickwheelClient>[0] = {}): TickwheelClient {
  const made = new TickwheelClient({ url, ...options });
  closers.push(() => made.close());
  return made;
}

/** A port nothing listens on. */
async function deadPort(): Promise<number> {
  const probe: Server = createTcpServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** A fetch that counts calls and fails the first `failures` with a network error. */
function flakyFetch(failures: number, code: string): { fetch: typeof fetch; calls: () => number } {
  let calls = 0;
  return {
    calls: () => calls,
    fetch: async (input, init) => {
      calls++;
      if (calls <= failures) {
        throw new TypeError('fetch failed', { cause: Object.assign(new Error(code), { code }) });
      }
      return fetch(input, init);
    },
  };
}

describe('TickwheelClient mirrors the embedded API', () => {
  it('schedule, get, reschedule, cancel', async () => {
    const tw = client();
    const { id, deliverAt } = await tw.schedule({ topic: 't', payload: { a: 1 }, delayMs: 60_000 });
    expect(await tw.get(id)).toEqual({
      id,
      topic: 't',
      status: 'scheduled',
      deliverAt,
      attempts: 0,
    });
    expect(await tw.reschedule(id, { delayMs: 120_000 })).toBe(true);
    expect((await tw.get(id))?.deliverAt).toBeGreaterThan(deliverAt);
    const at = Date.now() + 300_000;
    expect(await tw.rescheduleTo(id, { deliverAt: at + 0.7 })).toBe(at);
    expect((await tw.get(id))?.deliverAt).toBe(at);
    expect(await tw.cancel(id)).toBe(true);
    expect(await tw.cancel(id)).toBe(false);
    expect(await tw.reschedule(id, { delayMs: 1 })).toBe(false);
    expect(await tw.rescheduleTo(id, { delayMs: 1 })).toBeUndefined();
    expect(await tw.get('never-seen')).toBeUndefined();
  });

  it('deduplicates by id like the embedded queue', async () => {
    const tw = client();
    const first = await tw.schedule({ topic: 't', payload: 1, id: 'same', delayMs: 60_000 });
    const second = await tw.schedule({ topic: 't', payload: 2, id: 'same', delayMs: 5 });
    expect(second).toEqual(first);
  });

  it('receive, ack, nack; byte payloads come back as Buffers', async () => {
    const tw = client();
    await tw.schedule({ topic: 'r', payload: Buffer.from([1, 2, 3]) });
    await tw.schedule({ topic: 'r', payload: 'text' });
    const messages = await tw.receive('r', { max: 10, waitMs: 1000 });
    const all =
      messages.length === 2
        ? messages
        : [...messages, ...(await tw.receive('r', { waitMs: 1000 }))];
    expect(all.map((m) => m.payload)).toEqual([Buffer.from([1, 2, 3]), 'text']);
    expect(await tw.ack(all[0].receipt)).toBe(true);
    expect(await tw.ack(all[0].receipt)).toBe(false);
    expect(await tw.nack(all[1].receipt, { delayMs: 0 })).toBe(true);
    const again = await tw.receive('r', { waitMs: 1000 });
    expect(again[0]).toMatchObject({ payload: 'text', attempts: 2 });
    expect(await tw.ackMany([again[0].receipt, 'bogus'])).toEqual([true, false]);
  });

  it('scheduleMany returns results in order; dead letters can be listed and requeued', async () => {
    const tw = client();
    const results = await tw.scheduleMany([
      { topic: 'd', payload: 1, id: 'one', maxAttempts: 1 },
      { topic: 'd', payload: 2, id: 'two', delayMs: 60_000 },
    ]);
    expect(results.map((r) => r.id)).toEqual(['one', 'two']);
    const [message] = await tw.receive('d', { waitMs: 1000 });
    expect(await tw.nack(message.receipt)).toBe(true);
    expect(await tw.deadLetters('d')).toMatchObject([{ id: 'one', status: 'dead' }]);
    expect(await tw.requeue('one')).toBe(true);
    expect(await tw.requeue('one')).toBe(false);
    expect(await tw.requeue('nope')).toBe(false);
  });

  it("refuses a bad message before sending, and throws TickwheelHttpError with the server's code for what only it checks", async () => {
    let calls = 0;
    const tw = client({ fetch: (input, init) => (calls++, fetch(input, init)) });
    await expect(tw.schedule({ topic: '../etc', payload: 1 })).rejects.toMatchObject({
      name: 'TickwheelTypeError',
      code: 'ERR_TICKWHEEL_INVALID_TOPIC',
    });
    await expect(
      tw.schedule({ topic: 't', payload: 1, delayMs: 1, deliverAt: 1 }),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_MESSAGE' });
    expect(calls).toBe(0);
    // The payload's size is the server's to judge.
    const err = await tw
      .schedule({ topic: 't', payload: 'x'.repeat(2 << 20) })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TickwheelHttpError);
    expect(err).toMatchObject({ status: 413 });
    await expect(tw.scheduleMany('nope' as never)).rejects.toMatchObject({
      name: 'TickwheelTypeError',
      code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
    });
  });

  it('a partly failed batch says which messages were scheduled', async () => {
    await server.close();
    await queue.close();
    queue = await DelayQueue.open({ store: new MemoryStore(), maxPayloadBytes: 20 });
    server = await createServer({ queue, logLevel: 'silent' });
    await server.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(server.server.address() as { port: number }).port}`;
    const err = (await client()
      .scheduleMany([
        { topic: 't', payload: 'ok', id: 'ok' },
        { topic: 't', payload: 'x'.repeat(50), id: 'big' },
      ])
      .catch((e: unknown) => e)) as TickwheelHttpError;
    expect(err.status).toBe(413);
    expect((err.body as { results: unknown[] }).results[0]).toEqual({
      id: 'ok',
      deliverAt: expect.any(Number),
    });
  });

  it('sends the token', async () => {
    await server.close();
    server = await createServer({ queue, logLevel: 'silent', token: 'abc' });
    await server.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(server.server.address() as { port: number }).port}`;
    await expect(client().stats()).rejects.toMatchObject({ status: 401 });
    expect(await client({ token: 'abc' }).stats()).toHaveProperty('scheduled');
  });

  it('refuses a missing topic or id instead of sending "undefined"', async () => {
    const tw = client();
    await expect(tw.schedule({ payload: 1 } as never)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_TOPIC',
    });
    await expect(tw.cancel(undefined as never)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_ID',
    });
    await expect(tw.get('')).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_ID' });
    expect(() => tw.consume(undefined as never, () => {})).toThrow(/topic/);
    expect((await tw.stats()).scheduled).toBe(0);
  });

  it('refuses the ids . and .., which URL normalisation would send to another path', async () => {
    let calls = 0;
    const tw = client({ fetch: (input, init) => (calls++, fetch(input, init)) });
    for (const id of ['.', '..']) {
      const refusal = { name: 'TickwheelTypeError', code: 'ERR_TICKWHEEL_INVALID_ID' };
      await expect(tw.get(id)).rejects.toMatchObject(refusal);
      await expect(tw.cancel(id)).rejects.toMatchObject(refusal);
      await expect(tw.reschedule(id, { delayMs: 1 })).rejects.toMatchObject(refusal);
      await expect(tw.requeue(id)).rejects.toMatchObject(refusal);
    }
    for (const id of ['.', '..']) {
      await expect(tw.schedule({ topic: 't', id, payload: 1 })).rejects.toMatchObject({
        name: 'TickwheelTypeError',
        code: 'ERR_TICKWHEEL_INVALID_ID',
      });
    }
    expect(calls).toBe(0);
    expect((await tw.stats()).scheduled).toBe(0);
  });

  it('topicList pages by name and stats names the largest topics, as the embedded queue', async () => {
    const tw = client();
    const far = Date.now() + 3_600_000;
    for (const [topic, n] of [
      ['a', 1],
      ['b', 3],
      ['c', 2],
    ] as const) {
      for (let i = 0; i < n; i++) await tw.schedule({ topic, payload: i, deliverAt: far });
    }
    const first = await tw.topicList({ limit: 2 });
    expect(first.topics.map((t) => t.topic)).toEqual(['a', 'b']);
    const last = await tw.topicList({ limit: 2, cursor: first.cursor });
    expect(last).toEqual({ topics: [expect.objectContaining({ topic: 'c', pending: 2 })] });
    const stats = await tw.stats({ topics: 2 });
    expect(Object.keys(stats.topics).sort()).toEqual(['b', 'c']);
    expect(stats).toMatchObject({ topicCount: 3, otherTopics: { scheduled: 1 } });
    // Checked before sending, as the embedded queue checks them.
    await expect(tw.topicList({ limit: 0 })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    await expect(tw.stats({ topics: 1001 })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
  });

  it('checks its options', () => {
    expect(() => new TickwheelClient({ url: 'not a url' })).toThrow(/absolute http/);
    const refusal = {
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
      message: expect.stringContaining('http:// or https://'),
    };
    for (const url of ['localhost:47210', '127.0.0.1:47210', 'ftp://127.0.0.1/', 'file:///tmp/s']) {
      expect(() => new TickwheelClient({ url }), url).toThrow(expect.objectContaining(refusal));
    }
    expect(() => new TickwheelClient({ url: 'localhost:47210' })).toThrow(
      'http://localhost:47210 if that was meant',
    );
    expect(new TickwheelClient({ url: 'HTTPS://example.com' }).url).toBe('HTTPS://example.com');
    expect(() => new TickwheelClient('http://127.0.0.1:47210' as never)).toThrow(
      expect.objectContaining({
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
        message: expect.stringContaining('pass { url: "http://127.0.0.1:47210" }'),
      }),
    );
    expect(() => new TickwheelClient(null as never)).toThrow(/must be an object/);
    expect(() => new TickwheelClient({ timeoutMs: 0 })).toThrow(/timeoutMs/);
    expect(() => new TickwheelClient({ retries: -1 })).toThrow(/retries/);
    expect(() => new TickwheelClient({ token: 'two words' })).toThrow(/token/);
    expect(() => client().consume('t', 'nope' as never)).toThrow(/handler/);
    expect(() => client().consume('t', () => {}, { concurrency: 0 })).toThrow(/concurrency/);
  });
});

describe('the names and results of DelayQueue', () => {
  /** A fetch that counts the requests it sends. */
  function counting(): { fetch: typeof fetch; calls: () => number } {
    let calls = 0;
    return {
      calls: () => calls,
      fetch: (input, init) => {
        calls++;
        return fetch(input, init);
      },
    };
  }

  it('scheduleMany takes and returns what DelayQueue.scheduleMany does', async () => {
    const requests = [
      { topic: 'm', payload: { n: 1 }, id: 'many-1', delayMs: 60_000 },
      { topic: 'm', payload: Buffer.from([7]), id: 'many-2', deliverAt: Date.now() + 90_000 },
      { topic: 'm', payload: 'three', delayMs: 30_000 },
    ];
    const results = await client().scheduleMany(requests);
    expect(results).toHaveLength(3);
    expect(results.map((result) => Object.keys(result).sort())).toEqual(
      Array(3).fill(['deliverAt', 'id']),
    );
    expect(results.map((result) => result.id).slice(0, 2)).toEqual(['many-1', 'many-2']);
    expect(results[1].deliverAt).toBe(requests[1].deliverAt);
    for (const result of results) {
      expect(await queue.get(result.id)).toMatchObject({
        status: 'scheduled',
        deliverAt: result.deliverAt,
      });
    }
    const embedded = await DelayQueue.open({ store: new MemoryStore() });
    closers.push(() => embedded.close());
    const local = await embedded.scheduleMany(requests.map((r) => ({ ...r, id: `local-${r.id}` })));
    expect(local.map((result) => Object.keys(result).sort())).toEqual(
      results.map((result) => Object.keys(result).sort()),
    );
  });

  it('scheduleMany: [] resolves to [] with no request; too many or a bad one is a named error', async () => {
    const { fetch: spy, calls } = counting();
    const tw = client({ fetch: spy });
    expect(await tw.scheduleMany([])).toEqual([]);
    const many = Array.from({ length: MAX_BATCH + 1 }, () => ({ topic: 't', payload: 1 }));
    await expect(tw.scheduleMany(many)).rejects.toMatchObject({
      name: 'TickwheelRangeError',
      code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
    });
    await expect(tw.scheduleMany([{ topic: 't', payload: 1 }, null as never])).rejects.toThrow(
      /^messages\[1\]: a message must be an object/,
    );
    expect(calls()).toBe(0);
    // The embedded queue answers the same inputs the same way.
    expect(await queue.scheduleMany([])).toEqual([]);
    await expect(queue.scheduleMany([{ topic: 't', payload: 1 }, null as never])).rejects.toThrow(
      /^messages\[1\]: a message must be an object/,
    );
  });

  it('ackMany and nackMany: results[i] for receipts[i], like the embedded queue', async () => {
    const tw = client();
    await tw.scheduleMany(
      Array.from({ length: 4 }, (_, i) => ({ topic: 'k', payload: i, id: `k-${i}` })),
    );
    let received: ReceivedMessage[] = [];
    while (received.length < 4) {
      received = [...received, ...(await tw.receive('k', { max: 4, waitMs: 1000 }))];
    }
    const [a, b, c, d] = received;
    expect(await tw.ackMany([a.receipt, 'bogus', b.receipt])).toEqual([true, false, true]);
    expect(await tw.ackMany([a.receipt])).toEqual([false]);
    const started = Date.now();
    expect(await tw.nackMany([c.receipt, a.receipt, d.receipt], { delayMs: 60_000 })).toEqual([
      true,
      false,
      true,
    ]);
    for (const message of [c, d]) {
      const info = await tw.get(message.id);
      expect(info?.status).toBe('scheduled');
      expect(info!.deliverAt).toBeGreaterThanOrEqual(started + 59_000);
    }
    expect(await tw.nackMany([c.receipt])).toEqual([false]);
  });

  it('ack, ackMany, nack and nackMany send durable when given, and check it', async () => {
    const bodies: unknown[] = [];
    const tw = client({
      fetch: (input, init) => {
        if (typeof init?.body === 'string') bodies.push(JSON.parse(init.body));
        return fetch(input, init);
      },
    });
    await tw.scheduleMany([0, 1, 2].map((i) => ({ topic: 'dk', payload: i })));
    let received: ReceivedMessage[] = [];
    while (received.length < 3) {
      received = [...received, ...(await tw.receive('dk', { max: 3, waitMs: 1000 }))];
    }
    const [a, b, c] = received;
    bodies.length = 0;
    expect(await tw.ack(a.receipt, { durable: true })).toBe(true);
    expect(await tw.ackMany([b.receipt], { durable: false })).toEqual([true]);
    expect(await tw.nack(c.receipt, { delayMs: 0, durable: true })).toBe(true);
    expect(bodies).toEqual([
      { receipts: [a.receipt], durable: true },
      { receipts: [b.receipt], durable: false },
      { receipts: [c.receipt], delayMs: 0, durable: true },
    ]);
    for (const call of [
      () => tw.ack('r', { durable: 'yes' as never }),
      () => tw.nackMany(['r'], { durable: 1 as never }),
    ]) {
      await expect(call()).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
    }
  });

  it('ackMany and nackMany check their input as the embedded queue does', async () => {
    const { fetch: spy, calls } = counting();
    const tw = client({ fetch: spy });
    expect(await tw.ackMany([])).toEqual([]);
    expect(await tw.nackMany([])).toEqual([]);
    // No server knows these: false, as the embedded queue answers, not a 400 for the batch.
    const unknowable = ['', 'x'.repeat(MAX_RECEIPT_LENGTH + 1)];
    expect(await tw.ackMany(unknowable)).toEqual([false, false]);
    expect(await queue.ackMany(unknowable)).toEqual([false, false]);
    expect(await tw.nack('')).toBe(false);
    expect(calls()).toBe(0);
    expect(await tw.ackMany(['', 'bogus'])).toEqual([false, false]);
    expect(calls()).toBe(1);

    for (const side of [tw, queue]) {
      await expect(side.ackMany('r' as never)).rejects.toMatchObject({
        name: 'TickwheelTypeError',
        code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
      });
      await expect(side.nackMany(['r', 5] as never)).rejects.toMatchObject({
        name: 'TickwheelTypeError',
        code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
        message: expect.stringContaining('receipts[1]'),
      });
      await expect(side.nackMany(['r'], { delayMs: -5 })).rejects.toMatchObject({
        name: 'TickwheelRangeError',
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
      });
      await expect(side.nackMany(['r'], null as never)).rejects.toMatchObject({
        name: 'TickwheelTypeError',
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
      });
    }
    await expect(tw.nack('r', { delayMs: Number.NaN })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    expect(calls()).toBe(1);
  });

  it('refuses a body JSON cannot hold with a named error, as the embedded queue does', async () => {
    const { fetch: spy, calls } = counting();
    const tw = client({ fetch: spy });
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    const { id } = await tw.schedule({ topic: 'j', payload: 1, delayMs: 60_000 });
    const sent = calls();

    // Messages: the code (and message) the embedded queue gives for the same input.
    const inputs: Array<[string, (side: TickwheelClient | DelayQueue) => Promise<unknown>]> = [
      ['bigint payload', (side) => side.schedule({ topic: 'j', payload: 1n })],
      ['nested bigint', (side) => side.schedule({ topic: 'j', payload: { n: [2n] } })],
      ['cyclic payload', (side) => side.schedule({ topic: 'j', payload: cycle })],
      ['bigint delay', (side) => side.schedule({ topic: 'j', payload: 1, delayMs: 5n as never })],
      [
        'batch',
        (side) =>
          side.scheduleMany([
            { topic: 'j', payload: 1 },
            { topic: 'j', payload: 1n },
          ]),
      ],
      ['reschedule', (side) => side.reschedule(id, { delayMs: 5n as never })],
      ['requeue', (side) => side.requeue(id, { delayMs: 5n as never })],
      // Values JSON would change without a word: not finite (null), or left out.
      ['NaN delay', (side) => side.schedule({ topic: 'j', payload: 1, delayMs: Number.NaN })],
      [
        'infinite deliverAt',
        (side) => side.schedule({ topic: 'j', payload: 1, deliverAt: Infinity }),
      ],
      [
        'NaN maxAttempts',
        (side) => side.schedule({ topic: 'j', payload: 1, maxAttempts: Number.NaN }),
      ],
      [
        'infinite backoff',
        (side) =>
          side.schedule({ topic: 'j', payload: 1, backoff: { type: 'fixed', delayMs: Infinity } }),
      ],
      [
        'bytes, NaN delay',
        (side) => side.schedule({ topic: 'j', payload: Buffer.from('x'), delayMs: Number.NaN }),
      ],
      ['function payload', (side) => side.schedule({ topic: 'j', payload: () => 1 })],
      ['symbol payload', (side) => side.schedule({ topic: 'j', payload: Symbol('s') })],
      ['undefined payload', (side) => side.schedule({ topic: 'j', payload: undefined })],
      ['no payload', (side) => side.schedule({ topic: 'j' } as never)],
      [
        'batch, function payload',
        (side) =>
          side.scheduleMany([
            { topic: 'j', payload: 1 },
            { topic: 'j', payload: () => 1 },
          ]),
      ],
      ['reschedule NaN', (side) => side.reschedule(id, { delayMs: Number.NaN })],
      ['rescheduleTo Infinity', (side) => side.rescheduleTo(id, { deliverAt: -Infinity })],
      ['requeue Infinity', (side) => side.requeue(id, { delayMs: Infinity })],
      ['receive NaN max', (side) => side.receive('j', { max: Number.NaN })],
      ['receive bigint max', (side) => side.receive('j', { max: 1n as never })],
      ['receive infinite visibility', (side) => side.receive('j', { visibilityMs: Infinity })],
      ['receive NaN maxBytes', (side) => side.receive('j', { maxBytes: Number.NaN })],
      ['receive unknown option', (side) => side.receive('j', { wait: 5 } as never)],
    ];
    for (const [what, call] of inputs) {
      const embedded = await call(queue).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(embedded, what).toBeInstanceOf(TickwheelError);
      const { name, code, message } = embedded as TickwheelError;
      await expect(call(tw), what).rejects.toMatchObject({ name, code, message });
    }
    await expect(tw.receive('j', { waitMs: Number.NaN })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
      message: expect.stringMatching(/^waitMs must be a number/),
    });
    await expect(tw.schedule({ topic: 'j', payload: 1n })).rejects.toMatchObject({
      name: 'TickwheelTypeError',
      code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
      message: expect.stringContaining('BigInt'),
    });
    await expect(
      tw.scheduleMany([
        { topic: 'j', payload: 1 },
        { topic: 'j', payload: cycle },
      ]),
    ).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
      message: expect.stringMatching(/^messages\[1\]: payload must be JSON-serialisable/),
    });
    // A field the embedded queue does not read is still refused, not sent.
    await expect(tw.schedule({ topic: 'j', payload: 1, extra: 1n } as never)).rejects.toMatchObject(
      {
        name: 'TickwheelTypeError',
        code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
      },
    );

    // Options and settings: ERR_TICKWHEEL_INVALID_OPTION, as the embedded queue's checks give.
    const options: Array<[string, () => Promise<unknown>]> = [
      ['configureTopic', () => tw.configureTopic('j', { rateLimit: { perSecond: 1n as never } })],
      ['putSchedule', () => tw.putSchedule('s', { topic: 'j', everyMs: 60_000, payload: 1n })],
      ['updateSchedule', () => tw.updateSchedule('s', { payload: cycle })],
    ];
    for (const [what, call] of options) {
      await expect(call(), what).rejects.toMatchObject({
        name: 'TickwheelTypeError',
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
      });
    }
    await expect(
      queue.putSchedule('s', { topic: 'j', everyMs: 60_000, payload: 1n }),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
    expect(calls()).toBe(sent);
  });
});

describe('consume options', () => {
  it('refuses a bad option at once with a named error', () => {
    const tw = client();
    const cases: Array<[unknown, string, string]> = [
      [{ visibilityMs: 0 }, 'TickwheelRangeError', 'visibilityMs'],
      [{ visibilityMs: 43_200_001 }, 'TickwheelRangeError', 'visibilityMs'],
      [{ visibilityMs: '5s' }, 'TickwheelRangeError', 'visibilityMs'],
      [{ concurrency: 0 }, 'TickwheelRangeError', 'concurrency'],
      [{ concurrency: 1.5 }, 'TickwheelRangeError', 'concurrency'],
      [{ waitMs: 0 }, 'TickwheelRangeError', 'waitMs'],
      [{ waitMs: Number.POSITIVE_INFINITY }, 'TickwheelRangeError', 'waitMs'],
      [{ onError: 'log' }, 'TickwheelTypeError', 'onError'],
      [null, 'TickwheelTypeError', 'consume options'],
      [5, 'TickwheelTypeError', 'consume options'],
    ];
    for (const [options, name, says] of cases) {
      let thrown: unknown;
      try {
        tw.consume('t', () => {}, options as never);
      } catch (err) {
        thrown = err;
      }
      expect(thrown, JSON.stringify(options)).toMatchObject({
        name,
        code: expect.stringMatching(/^ERR_TICKWHEEL_INVALID_(OPTION|CALLBACK)$/),
        message: expect.stringContaining(says),
      });
    }
  });

  it('onError gets the error and { topic, id, attempts }', async () => {
    const tw = client();
    const { id } = await tw.schedule({
      topic: 'oe',
      payload: 1,
      backoff: { type: 'fixed', delayMs: 10 },
    });
    const reports: Array<[unknown, unknown]> = [];
    await new Promise<void>((resolve) => {
      tw.consume(
        'oe',
        (message) => {
          if (message.attempts === 1) throw new Error('first try fails');
          resolve();
        },
        { waitMs: 500, onError: (err, context) => reports.push([err, context]) },
      );
    });
    await tw.close();
    expect(reports).toHaveLength(1);
    expect((reports[0][0] as Error).message).toBe('first try fails');
    expect(reports[0][1]).toEqual({ topic: 'oe', id, attempts: 1 });
  });

  it('onError gets { topic } alone when receiving fails, and may throw', async () => {
    const port = await deadPort();
    const contexts: unknown[] = [];
    const tw = client({ url: `http://127.0.0.1:${port}`, retries: 0 });
    const consumer = tw.consume('down', () => {}, {
      onError: (_err, context) => {
        contexts.push(context);
        if (contexts.length === 1) throw new Error('onError itself fails');
      },
    });
    const warned = new Promise<unknown>((resolve) => process.once('warning', resolve));
    await waitFor(() => contexts.length >= 2);
    await consumer.close();
    expect(contexts[0]).toEqual({ topic: 'down' });
    expect(((await warned) as Error).message).toBe('onError itself fails');
  });

  it('by default is a process warning naming the topic, the message and the attempt, as embedded', async () => {
    const tw = client();
    const { id } = await tw.schedule({ topic: 'dw', payload: 1, maxAttempts: 1 });
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const consumer = tw.consume(
        'dw',
        () => {
          throw new TypeError('no such mailbox');
        },
        { waitMs: 500 },
      );
      await waitFor(() => warnings.some((w) => w.name === 'TickwheelConsumerWarning'));
      await consumer.close();
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.map((w) => [w.name, w.message])).toContainEqual([
      'TickwheelConsumerWarning',
      `consumer of topic dw, message ${id}, attempt 1: TypeError: no such mailbox`,
    ]);
  });

  it('visibilityMs is the visibility timeout of each delivery', async () => {
    const tw = client();
    await tw.schedule({ topic: 'vis', payload: 1, id: 'vis-1' });
    const attempts: number[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    await new Promise<void>((resolve) => {
      tw.consume(
        'vis',
        async (message) => {
          attempts.push(message.attempts);
          if (message.attempts === 1) return held; // holds the first delivery past its timeout
          resolve();
        },
        { concurrency: 2, visibilityMs: 200, waitMs: 500 },
      );
    });
    release();
    await tw.close();
    expect(attempts).toEqual([1, 2]);
  });
});

describe('network errors, timeouts and retries', () => {
  it('retries a refused connection for any request, then reports a network error', async () => {
    const port = await deadPort();
    const started = performance.now();
    const tw = client({ url: `http://127.0.0.1:${port}`, retries: 2, retryDelayMs: 20 });
    const err = await tw.schedule({ topic: 't', payload: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TickwheelNetworkError);
    expect(err).toMatchObject({ code: 'ERR_TICKWHEEL_NETWORK' });
    expect((err as Error).message).toContain('ECONNREFUSED');
    expect(performance.now() - started).toBeGreaterThanOrEqual(55); // 20 + 40 ms of backoff
  });

  it('retries a reset connection only when repeating is safe', async () => {
    const unsafe = flakyFetch(1, 'ECONNRESET');
    const receiving = client({ fetch: unsafe.fetch, retryDelayMs: 1 }).receive('t');
    await expect(receiving).rejects.toBeInstanceOf(TickwheelNetworkError);
    await expect(receiving).rejects.toMatchObject({ outcome: 'unknown', id: undefined });
    expect(unsafe.calls()).toBe(1);

    const withId = flakyFetch(2, 'ECONNRESET');
    const result = await client({ fetch: withId.fetch, retryDelayMs: 1 }).schedule({
      topic: 't',
      payload: 1,
      id: 'idempotent',
    });
    expect(result.id).toBe('idempotent');
    expect(withId.calls()).toBe(3);

    const read = flakyFetch(1, 'UND_ERR_SOCKET');
    expect(await client({ fetch: read.fetch, retryDelayMs: 1 }).get('idempotent')).toBeDefined();
    expect(read.calls()).toBe(2);

    const ack = flakyFetch(1, 'ECONNRESET');
    await expect(client({ fetch: ack.fetch, retryDelayMs: 1 }).ack('r')).rejects.toBeInstanceOf(
      TickwheelNetworkError,
    );
    expect(ack.calls()).toBe(1);
  });

  it('never retries an error answer from the server', async () => {
    let calls = 0;
    const counting: typeof fetch = (input, init) => {
      calls++;
      return fetch(input, init);
    };
    await expect(client({ fetch: counting }).stats({ timeoutMs: 1000 })).resolves.toBeDefined();
    calls = 0;
    await expect(client({ fetch: counting }).get('a b')).rejects.toMatchObject({ status: 400 });
    expect(calls).toBe(1);
  });

  it('times out with ERR_TICKWHEEL_TIMEOUT; a long poll gets its wait on top', async () => {
    const sockets = new Set<Socket>();
    const hanging = createTcpServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
    closers.push(async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => hanging.close(resolve));
    });
    const port = (hanging.address() as { port: number }).port;
    const tw = client({ url: `http://127.0.0.1:${port}`, timeoutMs: 100, retries: 0 });
    const started = performance.now();
    await expect(tw.stats()).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_TIMEOUT' });
    // The server never answers: only the 100 ms timeout ends the call, long before the test's.
    expect(performance.now() - started).toBeLessThan(30_000);

    const polling = client({ timeoutMs: 100 });
    const poll = await polling.receive('quiet', { waitMs: 300 });
    expect(poll).toEqual([]);
  });

  it("refuses a call's timeoutMs that is not a usable time, sending nothing", async () => {
    let calls = 0;
    const counting: typeof fetch = (input, init) => {
      calls++;
      return fetch(input, init);
    };
    const tw = client({ fetch: counting });
    for (const timeoutMs of [0, -1, Number.NaN, 2 ** 31, Infinity, '5' as unknown as number]) {
      await expect(tw.stats({ timeoutMs }), String(timeoutMs)).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
        message: expect.stringMatching(/timeoutMs/),
      });
      await expect(tw.receive('quiet', {}, { timeoutMs })).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
      });
    }
    expect(calls).toBe(0);
    // The largest time and a long poll on top of it: capped at the timer's limit, not 1 ms.
    await expect(tw.receive('quiet', { waitMs: 50 }, { timeoutMs: 2 ** 31 - 1 })).resolves.toEqual(
      [],
    );
  });

  it('stops on an abort signal', async () => {
    const controller = new AbortController();
    const served = vi.spyOn(queue, 'receive');
    const poll = client().receive('quiet', { waitMs: 1500 }, { signal: controller.signal });
    // Aborted while the server holds the long poll, which would otherwise answer [].
    await waitFor(() => served.mock.calls.length > 0);
    controller.abort();
    await expect(poll).rejects.toBeInstanceOf(AbortError);
  });

  it('answers from something that is not tickwheel become ERR_TICKWHEEL_HTTP', async () => {
    const fake: typeof fetch = async () =>
      new Response('<html>bad gateway</html>', {
        status: 502,
        headers: { 'content-type': 'text/html' },
      });
    await expect(client({ fetch: fake }).stats()).rejects.toMatchObject({
      status: 502,
      code: 'ERR_TICKWHEEL_HTTP',
    });
  });
});

describe('consume', () => {
  it('runs up to `concurrency` handlers at once and acks each', async () => {
    const tw = client();
    const total = 40;
    await tw.scheduleMany(Array.from({ length: total }, (_, i) => ({ topic: 'c', payload: i })));
    let running = 0;
    let most = 0;
    const done: number[] = [];
    await new Promise<void>((resolve) => {
      tw.consume(
        'c',
        async (message) => {
          running++;
          most = Math.max(most, running);
          // Held until `concurrency` handlers run at once (or the rest of the messages do).
          await waitFor(() => running >= 5 || done.length + running === total);
          running--;
          done.push(message.payload as number);
          if (done.length === total) resolve();
        },
        { concurrency: 5, waitMs: 500 },
      );
    });
    await tw.close();
    expect(most).toBe(5);
    expect(done.sort((a, b) => a - b)).toEqual(Array.from({ length: total }, (_, i) => i));
    const stats = await tw.stats();
    expect(stats.acked).toBe(total);
  });

  it('with prefetch, the stream holds concurrency + prefetch in flight, the handlers at most concurrency', async () => {
    const tw = client();
    const total = 30;
    await tw.scheduleMany(Array.from({ length: total }, (_, i) => ({ topic: 'pf', payload: i })));
    let running = 0;
    let most = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const done: number[] = [];
    const consumer = tw.consume(
      'pf',
      async (message) => {
        most = Math.max(most, ++running);
        await gate;
        running--;
        done.push(message.payload as number);
      },
      { concurrency: 2, prefetch: 6, waitMs: 500 },
    );
    // Two handlers run and six wait in the consumer: eight delivered, none acked yet.
    // (A window of concurrency alone would stop at 2; no window at all would send all 30.)
    await waitFor(async () => (await tw.stats()).delivered === 8);
    release();
    await waitFor(() => done.length === total);
    await consumer.close();
    expect(most).toBe(2);
    expect(done.sort((a, b) => a - b)).toEqual(Array.from({ length: total }, (_, i) => i));
  });

  it('nacks when the handler throws, reports the error, and gets the message again', async () => {
    const tw = client();
    await tw.schedule({
      topic: 'f',
      payload: 'x',
      backoff: { type: 'fixed', delayMs: 10 },
    });
    const errors: unknown[] = [];
    const attempts: number[] = [];
    await new Promise<void>((resolve) => {
      tw.consume(
        'f',
        (message: ReceivedMessage) => {
          attempts.push(message.attempts);
          if (message.attempts === 1) throw new Error('first try fails');
          resolve();
        },
        { waitMs: 500, onError: (err) => errors.push(err) },
      );
    });
    await tw.close();
    expect(attempts).toEqual([1, 2]);
    expect(errors).toHaveLength(1);
    expect((errors[0] as Error).message).toBe('first try fails');
  });

  it('close() waits for running handlers and their acks', async () => {
    const tw = client();
    await tw.schedule({ topic: 'w', payload: 1, id: 'slow' });
    let finished = false;
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const consumer = tw.consume(
      'w',
      async () => {
        started();
        // A handler still running when close() is called.
        await sleep(100);
        finished = true;
      },
      { waitMs: 500 },
    );
    await running;
    await consumer.close();
    expect(finished).toBe(true);
    expect((await tw.get('slow'))?.status).toBe('acked');
  });

  it('keeps polling through server errors, reporting them', async () => {
    const port = await deadPort();
    const errors: unknown[] = [];
    const tw = client({ url: `http://127.0.0.1:${port}`, retries: 0 });
    const consumer = tw.consume('x', () => {}, { onError: (err) => errors.push(err) });
    await waitFor(() => errors.length >= 2);
    await consumer.close();
    expect(errors[0]).toBeInstanceOf(TickwheelNetworkError);
  });
});
