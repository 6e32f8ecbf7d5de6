/**
 * The client facing something that is not a tickwheel server (a proxy's HTML page, another
 * program's JSON, an answer without end) or a stream whose connection is cut: each call fails
 * with a named error, never passes a foreign answer off as a schedule made or a message found.
 */

import { afterEach, describe, expect, it } from 'vitest';
import {
  TickwheelClient,
  TickwheelHttpError,
  TickwheelNetworkError,
} from '../../src/client/index.js';
import { MAX_ANSWER_BYTES } from '../../src/protocol/limits.js';
import { bareServer } from '../support/bare-server.js';
import { waitFor } from '../support/wait-for.js';

const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function clientOf(handler: Parameters<typeof bareServer>[0]): Promise<TickwheelClient> {
  const server = await bareServer(handler);
  closers.push(() => server.close());
  const client = new TickwheelClient({ url: server.url, retries: 0 });
  closers.push(() => client.close());
  return client;
}

async function failure(call: () => Promise<unknown>): Promise<unknown> {
  try {
    await call();
  } catch (err) {
    return err;
  }
  throw new Error('the call did not fail');
}

function foreign(err: unknown): void {
  expect(err).toBeInstanceOf(TickwheelHttpError);
  expect((err as TickwheelHttpError).code).toBe('ERR_TICKWHEEL_HTTP');
  expect((err as Error).message).toMatch(/not a tickwheel server/);
}

describe('the client against answers that are not a tickwheel server', () => {
  it('refuses a 200 HTML page for every call', async () => {
    const client = await clientOf((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' }).end('<html>sign in</html>');
    });
    foreign(await failure(() => client.schedule({ topic: 't', payload: 1 })));
    foreign(await failure(() => client.scheduleMany([{ topic: 't', payload: 1 }])));
    foreign(await failure(() => client.get('x')));
    foreign(await failure(() => client.cancel('x')));
    foreign(await failure(() => client.receive('t')));
    foreign(await failure(() => client.ack('r1.1')));
    foreign(await failure(() => client.stats()));
  });

  it('refuses an empty 200 answer', async () => {
    const client = await clientOf((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end();
    });
    const err = await failure(() => client.schedule({ topic: 't', payload: 1 }));
    foreign(err);
    expect((err as Error).message).toMatch(/an empty answer/);
  });

  it("refuses another program's JSON where a call's answer has a known shape", async () => {
    const client = await clientOf((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
    foreign(await failure(() => client.schedule({ topic: 't', payload: 1 })));
    foreign(await failure(() => client.scheduleMany([{ topic: 't', payload: 1 }])));
    foreign(await failure(() => client.receive('t')));
    foreign(await failure(() => client.ackMany(['r1.1', 'r1.2'])));
  });

  it("refuses another program's 404 page rather than taking it for an unknown id", async () => {
    const client = await clientOf((_req, res) => {
      res.writeHead(404, { 'content-type': 'text/html' }).end('<html>not found</html>');
    });
    const calls: Array<() => Promise<unknown>> = [
      () => client.get('x'),
      () => client.cancel('x'),
      () => client.reschedule('x', { delayMs: 1000 }),
      () => client.rescheduleTo('x', { delayMs: 1000 }),
      () => client.requeue('x'),
      () => client.getSchedule('s'),
      () => client.updateSchedule('s', { everyMs: 1000 }),
      () => client.deleteSchedule('s'),
    ];
    for (const call of calls) {
      const err = await failure(call);
      foreign(err);
      expect((err as TickwheelHttpError).status).toBe(404);
    }
  });

  it("refuses another program's JSON 404 without a tickwheel error", async () => {
    const client = await clientOf((_req, res) => {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
    });
    foreign(await failure(() => client.get('x')));
    foreign(await failure(() => client.cancel('x')));
  });

  it("refuses another program's JSON for every call that reads or changes", async () => {
    const client = await clientOf((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"messages":5}');
    });
    const calls: Array<() => Promise<unknown>> = [
      () => client.get('x'),
      () => client.cancel('x'),
      () => client.reschedule('x', { delayMs: 1000 }),
      () => client.requeue('x'),
      () => client.list({ topic: 't' }),
      () => client.listAll({ topic: 't' }).next(),
      () => client.deadLetters('t'),
      () => client.stats(),
      () => client.health(),
      () => client.topicInfo('t'),
      () => client.topicList(),
      () => client.pause('t'),
      () => client.configureTopic('t', { rateLimit: null }),
      () => client.getSchedule('s'),
      () => client.listSchedules(),
      () => client.putSchedule('s', { topic: 't', everyMs: 1000 }),
      () => client.deleteSchedule('s'),
    ];
    for (const call of calls) foreign(await failure(call));
  });

  it('refuses a page whose entries are not messages', async () => {
    const client = await clientOf((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"messages":[1,2]}');
    });
    foreign(await failure(() => client.list({ topic: 't' })));
    foreign(await failure(() => client.deadLetters('t')));
  });

  it('stops reading an answer declared larger than MAX_ANSWER_BYTES', async () => {
    let cut = false;
    const client = await clientOf((req, res) => {
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': String(MAX_ANSWER_BYTES + 1),
      });
      res.write('{"id":"');
      req.socket.on('close', () => (cut = true));
    });
    const err = await failure(() => client.schedule({ topic: 't', payload: 1 }));
    expect(err).toBeInstanceOf(TickwheelHttpError);
    expect((err as Error).message).toMatch(/over \d+ bytes/);
    await waitFor(() => cut);
  });

  it('refuses a stream whose error answer declares more than MAX_ANSWER_BYTES, unread', async () => {
    let cut = false;
    const client = await clientOf((req, res) => {
      res.writeHead(500, { 'content-length': String(MAX_ANSWER_BYTES + 1) });
      res.write('<html>');
      req.socket.on('close', () => (cut = true));
    });
    const err = await failure(async () => {
      for await (const _event of client.events()) {
        // nothing comes
      }
    });
    foreign(err);
    expect((err as TickwheelHttpError).status).toBe(500);
    await waitFor(() => cut);
  });

  it('stops reading an answer that grows past MAX_ANSWER_BYTES without declaring its length', async () => {
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    let sent = 0;
    const client = await clientOf((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const more = () => {
        while (sent <= MAX_ANSWER_BYTES + chunk.length) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      res.on('error', () => {});
      more();
    });
    const err = await failure(() => client.get('x'));
    expect(err).toBeInstanceOf(TickwheelHttpError);
    expect((err as Error).message).toMatch(/over \d+ bytes/);
  });
});

describe('client streams whose connection is cut', () => {
  it('events() fails with ERR_TICKWHEEL_NETWORK', async () => {
    const client = await clientOf((req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': hello\n\n');
      setImmediate(() => req.socket.destroy());
    });
    const err = await failure(async () => {
      for await (const _event of client.events()) {
        // nothing comes
      }
    });
    expect(err).toBeInstanceOf(TickwheelNetworkError);
    expect((err as TickwheelNetworkError).code).toBe('ERR_TICKWHEEL_NETWORK');
    expect((err as Error).message).toMatch(/event stream/);
  });

  it('a streaming consume() reports ERR_TICKWHEEL_NETWORK to onError', async () => {
    const client = await clientOf((req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.write('{"messages":[]}\n');
      setImmediate(() => req.socket.destroy());
    });
    const errors: unknown[] = [];
    const consumer = client.consume('t', () => {}, { onError: (err) => errors.push(err) });
    await waitFor(() => errors.length > 0);
    await consumer.close();
    expect(errors[0]).toBeInstanceOf(TickwheelNetworkError);
    expect((errors[0] as TickwheelNetworkError).code).toBe('ERR_TICKWHEEL_NETWORK');
  });
});
