/**
 * GET /v1/events through the client (`client.events()`): a real server on a socket, Server-Sent
 * Events over fetch. The stream carries the queue's events as they happen, filtered on the
 * server; breaking out of the loop or aborting closes the request; the server closing ends the
 * stream, and does not wait for it; a token server refuses a stream without the token.
 */

import { request as httpRequest } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { TickwheelClient } from '../../src/client/index.js';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import type { QueueEvent } from '../../src/queue/events.js';
import { createServer, type TickwheelServer } from '../../src/server/index.js';
import { bareServer } from '../support/bare-server.js';
import { waitFor } from '../support/wait-for.js';

const open: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of open.splice(0).reverse()) await close();
});

async function start(token?: string) {
  const queue = await DelayQueue.open({ store: new MemoryStore() });
  const server: TickwheelServer = await createServer({
    queue,
    logLevel: 'silent',
    ...(token === undefined ? {} : { token }),
  });
  await server.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(server.server.address() as { port: number }).port}`;
  open.push(() => queue.close());
  open.push(() => server.close());
  const client = new TickwheelClient({ url, ...(token === undefined ? {} : { token }) });
  open.push(() => client.close());
  return { queue, server, client };
}

/** Waits until the server's queue has a listener (the stream is open). */
async function listening(queue: DelayQueue): Promise<void> {
  await waitFor(() => queue.events.active);
}

describe('client.events()', () => {
  it('streams the events of a topic, filtered by type, as they happen', async () => {
    const { queue, client } = await start();
    const got: QueueEvent[] = [];
    const reading = (async () => {
      for await (const event of client.events({ topic: 'mail', types: ['scheduled', 'acked'] })) {
        got.push(event);
        if (event.type === 'acked') break; // closes the request
      }
    })();
    await listening(queue);
    await client.schedule({ topic: 'other', payload: 0 });
    const { id } = await client.schedule({ topic: 'mail', payload: { to: 'a@b.c' } });
    const [message] = await client.receive('mail', { waitMs: 2_000 });
    await client.ack(message.receipt);
    await reading;
    expect(got.map((e) => [e.type, e.id, e.topic])).toEqual([
      ['scheduled', id, 'mail'],
      ['acked', id, 'mail'],
    ]);
    expect(got[1]).toMatchObject({
      attempts: 1,
      at: expect.any(Number),
      deliverAt: expect.any(Number),
    });
    // Breaking out closed the stream on the server too.
    await waitFor(() => !queue.events.active);
  });

  it('ends when its signal aborts, and when the server closes (without holding the close up)', async () => {
    const { queue, server, client } = await start();
    const controller = new AbortController();
    const seen: QueueEvent[] = [];
    const aborted = (async () => {
      for await (const event of client.events({ signal: controller.signal })) seen.push(event);
      return seen;
    })();
    await listening(queue);
    await queue.schedule({ topic: 't', payload: 1 });
    await waitFor(() => seen.length > 0);
    controller.abort();
    expect((await aborted).map((e) => e.type)).toEqual(['scheduled']);
    // The server noticed: its watcher is gone.
    await waitFor(() => !queue.events.active);

    const ended = (async () => {
      for await (const _ of client.events()) void _;
      return 'ended';
    })();
    await listening(queue);
    const closing = Date.now();
    await server.close();
    expect(await ended).toBe('ended');
    // Streams are ended at once: the close does not wait for a stream to go away.
    expect(Date.now() - closing).toBeLessThan(10_000);
  });

  it('a reader that stops reading is cut off: the server still closes promptly', async () => {
    const { queue, server } = await start();
    const port = (server.server.address() as { port: number }).port;
    const stalled = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, path: '/v1/events' }, (res) => {
        res.pause(); // reads nothing from here on
        resolve(res);
      });
      req.on('error', reject);
      req.end();
    });
    await listening(queue);
    // Far more than the socket buffers hold, and than the stream's own buffer of 10,000.
    for (let i = 0; i < 6; i++) {
      await queue.scheduleMany(
        Array.from({ length: 5_000 }, (_, j) => ({
          topic: 'flood',
          payload: 'x'.repeat(200),
          id: `f${i}-${j}`,
        })),
      );
    }
    const closing = Date.now();
    await server.close();
    expect(Date.now() - closing).toBeLessThan(10_000);
    stalled.destroy();
  }, 60_000);

  it('needs the token on a token server, and refuses bad filters with 400', async () => {
    const { client } = await start('events-token');
    const anonymous = new TickwheelClient({ url: (client as unknown as { url: string }).url });
    open.push(() => anonymous.close());
    await expect(anonymous.events().next()).rejects.toMatchObject({
      status: 401,
      code: 'ERR_TICKWHEEL_UNAUTHORIZED',
    });
    expect(() => client.events({ types: ['nope' as never] })).toThrow(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
    );
    const raw = await fetch(`${(client as unknown as { url: string }).url}/v1/events?types=nope`, {
      headers: { authorization: 'Bearer events-token' },
    });
    expect(raw.status).toBe(400);
    expect(((await raw.json()) as { error: { code: string } }).error.code).toBe(
      'ERR_TICKWHEEL_INVALID_REQUEST',
    );
  });

  it('takes a silent stream for dead after idleTimeoutMs; keep-alives keep it open', async () => {
    // A bare server on a socket: one that goes silent after the headers (a host gone without a
    // FIN), one that never answers, and one that sends only keep-alives, then an event, then ends.
    const closed: string[] = [];
    const server = await bareServer((req, res) => {
      req.on('close', () => closed.push(req.url ?? ''));
      if (req.url?.startsWith('/v1/events?topic=never')) return;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': tickwheel events\n\n');
      if (req.url?.startsWith('/v1/events?topic=silent')) return;
      const event = (id: string) =>
        `event: acked\ndata: ${JSON.stringify({ type: 'acked', id, topic: 't', at: 1 })}\n\n`;
      if (req.url?.startsWith('/v1/events?topic=slow')) res.write(event('m-0'));
      let beats = 0;
      const beat = setInterval(() => {
        if (++beats < 15) {
          res.write(': keep-alive\n\n');
          return;
        }
        clearInterval(beat);
        res.end(event('m-1'));
      }, 100);
    });
    open.push(() => server.close());
    const client = new TickwheelClient({ url: server.url });
    open.push(() => client.close());
    const drain = async (topic: string, handleMs = 0) => {
      const seen: string[] = [];
      for await (const event of client.events({ topic, idleTimeoutMs: 700 })) {
        seen.push(event.id);
        if (handleMs > 0) await new Promise((r) => setTimeout(r, handleMs));
      }
      return seen;
    };

    const started = Date.now();
    await expect(drain('silent')).rejects.toMatchObject({
      name: 'TickwheelNetworkError',
      code: 'ERR_TICKWHEEL_TIMEOUT',
      message: expect.stringMatching(/nothing came for 700 ms/),
    });
    await expect(drain('never')).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_TIMEOUT' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_300);
    // 15 keep-alives 100 ms apart: 1.5 s in all, twice the idle timeout, and not taken for dead.
    expect(await drain('quiet')).toEqual(['m-1']);
    // A reader slower than the idle timeout (1 s on each event) is not taken for a dead stream:
    // silence counts only while it waits for bytes.
    expect(await drain('slow', 1_000)).toEqual(['m-0', 'm-1']);
    // The dead streams' requests were closed, not left open.
    await waitFor(() => closed.length >= 4);
    expect(closed.map((url) => url.replace(/^.*topic=/, '')).sort()).toEqual([
      'never',
      'quiet',
      'silent',
      'slow',
    ]);
  });

  it('refuses an idleTimeoutMs that is not a positive number', () => {
    const client = new TickwheelClient({ url: 'http://127.0.0.1:9' });
    open.push(() => client.close());
    for (const idleTimeoutMs of [0, -1, Number.NaN, '5' as unknown as number]) {
      expect(() => client.events({ idleTimeoutMs })).toThrow(
        expect.objectContaining({
          name: 'TickwheelTypeError',
          code: 'ERR_TICKWHEEL_INVALID_OPTION',
        }),
      );
    }
    expect(() => client.events({ idleTimeoutMs: Infinity })).not.toThrow();
  });
});
