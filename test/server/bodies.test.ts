/**
 * Request bodies as generic HTTP clients send them, and as attackers do: an empty body with a
 * JSON content-type where no body is needed, misspelled fields, `__proto__` keys, numbers JSON
 * text can hold but a double cannot, bodies that are not JSON, and headers trickled in slowly.
 */

import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createServer } from '../../src/server/index.js';
import { openServer } from './harness.js';

const JSON_TYPE = { 'content-type': 'application/json' };

describe('an empty body with content-type: application/json', () => {
  it('is fine where no body is needed: cancel, receive, requeue', async () => {
    const { call, queue } = await openServer();
    await queue.schedule({ topic: 't', payload: 1, id: 'a', delayMs: 60_000 });
    expect(await call('DELETE', '/v1/messages/a', '', JSON_TYPE)).toMatchObject({
      status: 200,
      body: { cancelled: true },
    });
    expect(await call('POST', '/v1/topics/t/receive', '', JSON_TYPE)).toMatchObject({
      status: 200,
      body: { messages: [] },
    });
    const requeue = await call('POST', '/v1/messages/a/requeue', '', JSON_TYPE);
    expect(requeue.status).toBe(409);
    expect(requeue.body.error.code).toBe('ERR_TICKWHEEL_CONFLICT');
  });

  it('is fine of any type where no body is needed', async () => {
    const { call, queue } = await openServer();
    await queue.schedule({ topic: 't', payload: 1, id: 'a', delayMs: 60_000 });
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    expect(await call('DELETE', '/v1/messages/a', '', form)).toMatchObject({ status: 200 });
    const patch = await call('PATCH', '/v1/messages/a', '', { 'content-type': 'text/plain' });
    expect(patch.status).toBe(400);
    expect(patch.body.error.message).toMatch(/delayMs|deliverAt/);
  });

  it('is whitespace-tolerant', async () => {
    const { call } = await openServer();
    expect((await call('POST', '/v1/topics/t/receive', ' \r\n', JSON_TYPE)).status).toBe(200);
  });

  it('still says what is missing where a body is needed', async () => {
    const { call } = await openServer();
    const res = await call('POST', '/v1/topics/t/messages', '', JSON_TYPE);
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/payload/);
    const patch = await call('PATCH', '/v1/messages/a', '', JSON_TYPE);
    expect(patch.status).toBe(400);
    expect(patch.body.error.message).toMatch(/delayMs|deliverAt/);
  });
});

describe('a misspelled or unknown field', () => {
  it.each([
    ['POST', '/v1/topics/t/messages', { paylod: 1 }, /unknown property "paylod".*payload/],
    [
      'POST',
      '/v1/topics/t/messages',
      { payload: 1, delay: 5 },
      /unknown property "delay".*delayMs/,
    ],
    ['POST', '/v1/topics/t/messages', { payload: 1, deliverat: 5 }, /"deliverat".*deliverAt/],
    [
      'POST',
      '/v1/messages:batch',
      {
        messages: [
          { topic: 't', payload: 1 },
          { topci: 't', payload: 1 },
        ],
      },
      /messages\/1.*unknown property "topci".*topic/,
    ],
    ['POST', '/v1/topics/t/receive', { wait: 10 }, /unknown property "wait".*waitMs/],
    ['POST', '/v1/ack', { receipt: ['r'] }, /unknown property "receipt".*receipts/],
    ['PATCH', '/v1/messages/a', { delay: 5 }, /unknown property "delay".*delayMs/],
    [
      'POST',
      '/v1/topics/t/messages',
      { payload: 1, backoff: { type: 'fixed', delay: 5 } },
      /backoff.*unknown property "delay"/,
    ],
  ])('%s %s %j is named in the error', async (method, url, body, pattern) => {
    const { call, queue } = await openServer();
    const res = await call(method, url, body);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('ERR_TICKWHEEL_INVALID_REQUEST');
    expect(res.body.error.message).toMatch(pattern);
    expect((await queue.stats()).scheduled).toBe(0);
  });

  it('names a missing field that has no look-alike', async () => {
    const { call } = await openServer();
    const res = await call('POST', '/v1/ack', {});
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/missing.*"receipts"|"receipts".*missing/);
  });

  it('does not guess for a name far from any field', async () => {
    const { call } = await openServer();
    const res = await call('POST', '/v1/topics/t/messages', { payload: 1, zzzzzzzz: 1 });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toContain('unknown property "zzzzzzzz"');
    expect(res.body.error.message).not.toContain('did you mean');
  });
});

describe('__proto__ and constructor.prototype keys', () => {
  it.each([
    ['at the top', '{"payload":1,"__proto__":{"polluted":true}}', 'body'],
    ['in a payload', '{"payload":{"a":{"__proto__":{"polluted":true}}}}', 'body/payload/a'],
    ['escaped', '{"payload":{"\\u005f_proto__":{"polluted":true}}}', 'body/payload'],
    [
      'as constructor.prototype',
      '{"payload":{"constructor":{"prototype":{"polluted":true}}}}',
      'body/payload',
    ],
    ['in an array', '{"payload":[1,{"__proto__":{"polluted":true}}]}', 'body/payload/1'],
  ])('are refused %s with a specific 400', async (_where, body, path) => {
    const { call, queue } = await openServer();
    const res = await call('POST', '/v1/topics/t/messages', body, JSON_TYPE);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('ERR_TICKWHEEL_INVALID_REQUEST');
    expect(res.body.error.message).not.toMatch(/not valid JSON/);
    expect(res.body.error.message).toContain(path);
    expect(res.body.error.message).toMatch(/__proto__|constructor/);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect((await queue.stats()).scheduled).toBe(0);
  });

  it('leaves ordinary keys that merely contain the words alone', async () => {
    const { call, queue } = await openServer();
    const payload = { proto: 1, constructor_name: 'x', constructor: 'a string', note: '__proto__' };
    const res = await call('POST', '/v1/topics/t/messages', { payload });
    expect(res.status).toBe(201);
    const [message] = await queue.receive('t', { waitMs: 1000 });
    expect(message.payload).toEqual(payload);
  });
});

describe('numbers a double cannot hold', () => {
  it.each([
    ['1e999 in a payload', '{"payload":[1e999]}', 'body/payload/0'],
    ['-1e999 deep in a payload', '{"payload":{"a":{"b":-1e999}}}', 'body/payload/a/b'],
    ['400 digits', `{"payload":{"n":${'9'.repeat(400)}}}`, 'body/payload/n'],
    ['a delayMs of 1e400', '{"payload":1,"delayMs":1e400}', 'body/delayMs'],
    ['a deliverAt of 1E+309', '{"payload":1,"deliverAt":1E+309}', 'body/deliverAt'],
  ])('are refused: %s', async (_what, body, path) => {
    const { call, queue } = await openServer();
    const res = await call('POST', '/v1/topics/t/messages', body, JSON_TYPE);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('ERR_TICKWHEEL_INVALID_REQUEST');
    expect(res.body.error.message).toContain(path);
    expect(res.body.error.message).toMatch(/too large|cannot be represented/);
    expect((await queue.stats()).scheduled).toBe(0);
  });

  it('keeps the error short for a value nested 100,000 deep', async () => {
    const { call } = await openServer();
    const depth = 100_000;
    const body = `{"payload":${'['.repeat(depth)}1e999${']'.repeat(depth)}}`;
    const res = await call('POST', '/v1/topics/t/messages', body, JSON_TYPE);
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/^body\/payload\/0\/0.*\.\.\..*0 is a number too large/);
    expect(res.text.length).toBeLessThan(1000);
  });

  it('keeps large but finite numbers as doubles', async () => {
    const { call, queue } = await openServer();
    const res = await call(
      'POST',
      '/v1/topics/t/messages',
      '{"payload":[1e308,-2.5e-300]}',
      JSON_TYPE,
    );
    expect(res.status).toBe(201);
    const [message] = await queue.receive('t', { waitMs: 1000 });
    expect(message.payload).toEqual([1e308, -2.5e-300]);
  });
});

describe('bodies that are not JSON', () => {
  it.each([
    ['text/plain', '{"payload":1}'],
    ['text/plain; charset=utf-8', 'hello'],
    ['application/xml', '<payload/>'],
    ['application/json; charset=utf-16', '{"payload":1}'],
    ['application/json; charset="ISO-8859-1"', '{"payload":1}'],
  ])('%s gets 415', async (type, body) => {
    const { call } = await openServer();
    for (const [method, url] of [
      ['POST', '/v1/topics/t/messages'],
      ['PATCH', '/v1/messages/a'],
    ]) {
      const res = await call(method, url, body, { 'content-type': type });
      expect(res.status, `${method} ${url}`).toBe(415);
      expect(res.body.error.code).toBe('ERR_TICKWHEEL_UNSUPPORTED_MEDIA_TYPE');
    }
  });

  it('JSON in UTF-8 is read, named any way; another charset is refused by name', async () => {
    const { call } = await openServer();
    for (const type of [
      'application/json; charset=utf-8',
      'application/json;charset="UTF-8"',
      'application/json; charset=utf8',
    ]) {
      const res = await call('POST', '/v1/topics/t/messages', '{"payload":"é"}', {
        'content-type': type,
      });
      expect(res.status, type).toBe(201);
    }
    const res = await call('POST', '/v1/topics/t/messages', '{"payload":1}', {
      'content-type': 'application/json; charset=utf-16le',
    });
    expect(res.body.error.message).toBe(
      'the body\'s charset "utf-16le" is not supported: send JSON in UTF-8',
    );
  });

  it('bytes that are not UTF-8 get 400, not U+FFFD in the payload', async () => {
    const { server, queue } = await openServer();
    const payload = Buffer.concat([
      Buffer.from('{"id":"bad","payload":"a'),
      Buffer.from([0xff, 0xfe, 0xc3]),
      Buffer.from('"}'),
    ]);
    const res = await server.inject({
      method: 'POST',
      url: '/v1/topics/t/messages',
      headers: JSON_TYPE,
      payload,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_REQUEST',
      message: 'the body is not valid UTF-8: send JSON in UTF-8',
      outcome: 'none',
    });
    expect(await queue.get('bad')).toBeUndefined();
  });

  it('malformed JSON gets 400 saying where', async () => {
    const { call } = await openServer();
    const res = await call('POST', '/v1/topics/t/messages', '{"payload": 1,}', JSON_TYPE);
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/not valid JSON/);
    expect(res.body.error.message).toMatch(/position|column|Unexpected|Expected/);
  });
});

describe('slow clients', () => {
  function trickle(port: number, interval: number): { socket: Socket; closed: Promise<number> } {
    const socket = connect(port, '127.0.0.1');
    const started = performance.now();
    socket.on('error', () => undefined);
    let sent = 0;
    const head = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ';
    const timer = setInterval(() => {
      if (socket.writable) socket.write(sent < head.length ? head[sent++] : 'a');
    }, interval);
    const closed = new Promise<number>((resolve) =>
      socket.on('close', () => {
        clearInterval(timer);
        resolve(performance.now() - started);
      }),
    );
    return { socket, closed };
  }

  it('uses the documented 30 s for headers and for the whole request', async () => {
    const { server } = await openServer();
    await server.listen({ port: 0, host: '127.0.0.1' });
    expect(server.server.requestTimeout).toBe(30_000);
    expect(server.server.headersTimeout).toBe(30_000);
  });

  it('cuts a client that trickles its headers at requestTimeoutMs', async () => {
    const { server } = await openServer({ requestTimeoutMs: 1000 });
    await server.listen({ port: 0, host: '127.0.0.1' });
    const { port } = server.server.address() as { port: number };
    const { closed } = trickle(port, 50);
    const elapsed = await closed;
    expect(elapsed).toBeGreaterThanOrEqual(900);
    expect(elapsed).toBeLessThan(4000);
  });

  it('checks requestTimeoutMs', async () => {
    await expect(createServer({ dir: '/nonexistent', requestTimeoutMs: 10 })).rejects.toThrow(
      /requestTimeoutMs/,
    );
  });
});
