/**
 * POST /v1/topics/:topic/stream (docs/http-api.md, "Stream"): deliveries on one open response,
 * never more than the window in flight; an ack, a nack or a visibility timeout frees a slot. The
 * client's consume() reads it: one request for a whole trickle of deliveries.
 */

import { describe, expect, it, vi } from 'vitest';
import { TickwheelClient } from '../../src/client/index.js';
import { DeliveryStreams, StreamWindow } from '../../src/server/routes/stream.js';
import { openServer } from './harness.js';
import { waitFor } from '../support/wait-for.js';

interface Delivery {
  id: string;
  receipt: string;
  payload: unknown;
}

/** Opens a stream over a real socket; its deliveries collect in `got` as lines come. */
async function openStream(port: number, topic: string, body: object) {
  const controller = new AbortController();
  const response = await fetch(`http://127.0.0.1:${port}/v1/topics/${topic}/stream`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: controller.signal,
  });
  const got: Delivery[] = [];
  let lines = 0;
  let ended = false;
  const reading = (async () => {
    const decoder = new TextDecoder();
    let text = '';
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        text += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = text.indexOf('\n')) !== -1) {
          got.push(...(JSON.parse(text.slice(0, end)) as { messages: Delivery[] }).messages);
          text = text.slice(end + 1);
          lines++;
        }
      }
    } catch {
      // Aborted by the test.
    }
    ended = true;
  })();
  return {
    response,
    got,
    lines: () => lines,
    ended: () => ended,
    close: async () => {
      controller.abort();
      await reading;
    },
  };
}

async function listening(queueOptions: Parameters<typeof openServer>[1] = {}) {
  const opened = await openServer({}, queueOptions);
  await opened.server.listen({ port: 0, host: '127.0.0.1' });
  const address = opened.server.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return { ...opened, port };
}

describe('POST /v1/topics/:topic/stream', () => {
  it('sends what becomes ready, at most `window` in flight; an ack or a nack frees a slot', async () => {
    const { call, port } = await listening();
    const stream = await openStream(port, 'jobs', { window: 2 });
    expect(stream.response.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    for (let i = 0; i < 5; i++) await call('POST', '/v1/topics/jobs/messages', { payload: i });
    await waitFor(() => stream.got.length === 2);
    // Nothing more while both are in flight (a receive on the side still finds the rest ready).
    const aside = await call('POST', '/v1/topics/jobs/receive', { max: 1 });
    expect(aside.body.messages).toHaveLength(1);
    expect(stream.got).toHaveLength(2);
    const acked = await call('POST', '/v1/ack', { receipts: [stream.got[0].receipt] });
    expect(acked.body.acked).toBe(1);
    await waitFor(() => stream.got.length === 3);
    await call('POST', '/v1/nack', { receipts: [stream.got[1].receipt], delayMs: 60_000 });
    await waitFor(() => stream.got.length === 4);
    const payloads = [...stream.got, ...aside.body.messages].map((m) => m.payload);
    expect(new Set(payloads)).toEqual(new Set([0, 1, 2, 3, 4]));
    await stream.close();
  });

  it('frees the slot of a delivery whose visibility timeout ran out, and sends it again', async () => {
    const { call, port } = await listening();
    const stream = await openStream(port, 'jobs', { window: 1, visibilityMs: 50 });
    await call('POST', '/v1/topics/jobs/messages', { id: 'only', payload: 'x' });
    await waitFor(() => stream.got.length === 2);
    expect(stream.got.map((m) => m.id)).toEqual(['only', 'only']);
    expect(stream.got[0].receipt).not.toBe(stream.got[1].receipt);
    await stream.close();
  });

  it("frees a slot by the queue's own visibility timeout when the stream names none", async () => {
    const { call, port } = await listening({ visibilityMs: 50 });
    const stream = await openStream(port, 'jobs', { window: 1 });
    await call('POST', '/v1/topics/jobs/messages', { id: 'only', payload: 'x' });
    // Not acked: delivered again once the queue's 50 ms run out, not after a 30 s the stream assumed.
    await waitFor(() => stream.got.length === 2, { timeoutMs: 10_000 });
    expect(stream.got.map((m) => m.id)).toEqual(['only', 'only']);
    await stream.close();
  });

  it('refuses a bad window with a 400 naming it', async () => {
    const { call } = await listening();
    for (const window of [0, 1001, 1.5, 'ten']) {
      const res = await call('POST', '/v1/topics/jobs/stream', { window });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('ERR_TICKWHEEL_INVALID_REQUEST');
      expect(res.body.error.message).toMatch(/window/);
    }
    expect((await call('POST', '/v1/topics/jobs/stream', {})).status).toBe(400);
  });

  it('closes without waiting out a take, and hands back what that take brings', async () => {
    const { server, queue, port } = await listening();
    const receive = queue.receive.bind(queue);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    // Every take of the stream waits until released: a server that waited for it never closes.
    const spy = vi.spyOn(queue, 'receive').mockImplementation(async (topic, options) => {
      await held;
      return receive(topic, { ...options, waitMs: 0 });
    });
    const stream = await openStream(port, 'jobs', { window: 5 });
    await waitFor(() => spy.mock.calls.length > 0);
    await queue.schedule({ topic: 'jobs', id: 'late', payload: 'x' });
    await server.close();
    await waitFor(() => stream.ended());
    release();
    spy.mockRestore();
    await waitFor(async () => (await queue.receive('jobs')).some((m) => m.id === 'late'));
    expect(stream.got).toEqual([]);
  });

  it('ends when the server closes', async () => {
    const { server, port } = await listening();
    const stream = await openStream(port, 'jobs', { window: 5 });
    await waitFor(() => stream.lines() === 1);
    await server.close();
    await waitFor(() => stream.ended());
  });
});

describe('DeliveryStreams', () => {
  it('forgets a delivery whose visibility ran out, so a long stream holds no receipts of old', () => {
    const streams = new DeliveryStreams();
    const slots = new StreamWindow();
    streams.add('a', slots, 100);
    streams.add('b', slots, 200);
    expect(streams.freeSlots(slots, 2, 150)).toBe(1);
    expect(streams.size).toBe(1);
    // A late ack of the expired one frees nothing; the other's frees its slot.
    streams.release(['a']);
    expect(streams.freeSlots(slots, 2, 150)).toBe(1);
    streams.release(['b']);
    expect(streams.freeSlots(slots, 2, 150)).toBe(2);
    expect(streams.size).toBe(0);
  });
});

describe("the client's consume() over the stream", () => {
  it('takes a trickle of deliveries on one request, and acks them in few', async () => {
    const { server, queue } = await openServer();
    await server.listen({ port: 0, host: '127.0.0.1' });
    const address = server.server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    const requests: string[] = [];
    const client = new TickwheelClient({
      url: `http://127.0.0.1:${port}`,
      fetch: (input, init) => {
        requests.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`);
        return fetch(input, init);
      },
    });
    const seen: number[] = [];
    const consumer = client.consume(
      'jobs',
      (message) => void seen.push(message.payload as number),
      {
        concurrency: 10,
      },
    );
    // 100 messages due one per ms.
    const start = Date.now() + 50;
    await queue.scheduleMany(
      Array.from({ length: 100 }, (_, i) => ({ topic: 'jobs', payload: i, deliverAt: start + i })),
    );
    await waitFor(() => seen.length === 100);
    await waitFor(async () => ((await queue.stats()).topics.jobs?.inflight ?? 0) === 0);
    await consumer.close();
    await client.close();
    expect([...seen].sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect(requests.filter((r) => r.endsWith('/stream'))).toEqual(['POST /v1/topics/jobs/stream']);
    expect(requests.filter((r) => r.endsWith('/receive'))).toEqual([]);
    // Acks made within 10 ms of each other share a request.
    expect(requests.filter((r) => r === 'POST /v1/ack').length).toBeLessThan(100);
  });

  it('opens its stream again after a refused connection (a restart) without reporting it', async () => {
    const { server, queue } = await openServer();
    await server.listen({ port: 0, host: '127.0.0.1' });
    const address = server.server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    let refusals = 2;
    const client = new TickwheelClient({
      url: `http://127.0.0.1:${port}`,
      retryDelayMs: 1,
      // The first openings meet a server not yet listening again, as fetch reports it.
      fetch: (input, init) => {
        if (String(input).endsWith('/stream') && refusals-- > 0) {
          const refused = Object.assign(new Error('connect ECONNREFUSED'), {
            code: 'ECONNREFUSED',
          });
          return Promise.reject(new TypeError('fetch failed', { cause: refused }));
        }
        return fetch(input, init);
      },
    });
    const errors: unknown[] = [];
    const seen: unknown[] = [];
    const consumer = client.consume('jobs', (message) => void seen.push(message.payload), {
      onError: (err) => void errors.push(err),
    });
    await queue.schedule({ topic: 'jobs', payload: 'after' });
    await waitFor(() => seen.length === 1);
    await consumer.close();
    await client.close();
    expect(refusals).toBeLessThan(0);
    expect(errors).toEqual([]);
  });
});
