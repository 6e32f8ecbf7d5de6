import { describe, expect, it, vi } from 'vitest';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import { createServer } from '../../src/server/index.js';
import { openServer } from './harness.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const tempDir = useTempDirs('server');

const JSON_TYPE = { 'content-type': 'application/json' };

describe('POST /v1/topics/:topic/messages', () => {
  it('answers 201 with the id and due time, once the queue has the message', async () => {
    const { call, queue } = await openServer();
    const before = Date.now();
    const res = await call('POST', '/v1/topics/emails/messages', {
      payload: { to: 'a@b.c' },
      delayMs: 60_000,
    });
    expect(res.status).toBe(201);
    expect(typeof res.body.id).toBe('string');
    expect(res.body.deliverAt).toBeGreaterThanOrEqual(before + 60_000 - 5);
    expect(await queue.get(res.body.id)).toMatchObject({ topic: 'emails', status: 'scheduled' });
  });

  it('schedules at an absolute time with deliverAt, and deduplicates by id', async () => {
    const { call } = await openServer();
    const deliverAt = Date.now() + 3_600_000;
    const first = await call('POST', '/v1/topics/t/messages', {
      payload: 1,
      deliverAt,
      id: 'job-1',
    });
    const again = await call('POST', '/v1/topics/t/messages', {
      payload: 2,
      delayMs: 5,
      id: 'job-1',
    });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ id: 'job-1', deliverAt });
    expect(again.body).toEqual({ id: 'job-1', deliverAt });
  });

  it.each([
    [
      'an unknown property (a typo must not mean "now")',
      { payload: 1, delay: 5000 },
      'unknown property "delay"',
    ],
    ['no payload', { delayMs: 5 }, 'payload'],
    ['both delayMs and deliverAt', { payload: 1, delayMs: 5, deliverAt: 5 }, 'not both'],
    ['a string delay', { payload: 1, delayMs: '5' }, 'delayMs'],
    ['a null delay', { payload: 1, delayMs: null }, 'delayMs'],
    ['a negative deliverAt', { payload: 1, deliverAt: -1 }, 'deliverAt'],
    ['a delay of 300 years', { payload: 1, delayMs: 300 * 365 * 86_400_000 }, 'delayMs'],
    ['maxAttempts 0', { payload: 1, maxAttempts: 0 }, 'maxAttempts'],
    ['a fractional maxAttempts', { payload: 1, maxAttempts: 1.5 }, 'maxAttempts'],
    ['an unknown backoff type', { payload: 1, backoff: { type: 'linear', delayMs: 5 } }, 'backoff'],
    ['a bad id', { payload: 1, id: 'a b' }, 'id'],
    ['an id of 201 characters', { payload: 1, id: 'x'.repeat(201) }, 'id'],
    ['the id .', { payload: 1, id: '.' }, "other than '.' and '..'"],
    ['the id ..', { payload: 1, id: '..' }, "other than '.' and '..'"],
    ['base64 that is not', { payload: '!!!', payloadEncoding: 'base64' }, 'base64'],
    ['an array body', [1, 2], 'object'],
  ])('refuses %s with 400 and a message naming the field', async (_what, body, word) => {
    const { call, queue } = await openServer();
    const res = await call('POST', '/v1/topics/t/messages', body);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toMatch(/^ERR_TICKWHEEL_INVALID/);
    expect(res.body.error.message).toContain(word);
    expect((await queue.stats()).scheduled).toBe(0);
  });

  it('never lets a dot-dot topic reach a route', async () => {
    const { call } = await openServer();
    const res = await call('POST', '/v1/topics/../messages', { payload: 1 });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('ERR_TICKWHEEL_NOT_FOUND');
  });

  it.each([
    ['an encoded slash', 'a%2Fb'],
    ['an encoded dot-dot-slash', '%2E%2E%2Fetc'],
    ['a leading dot', '.hidden'],
    ['a space', 'a%20b'],
    ['129 characters', 'x'.repeat(129)],
    ['a NUL', 'a%00'],
    ['unicode', '%C3%A9t%C3%A9'],
  ])('refuses a topic with %s', async (_what, topic) => {
    const { call } = await openServer();
    const res = await call('POST', `/v1/topics/${topic}/messages`, { payload: 1 });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('ERR_TICKWHEEL_INVALID_REQUEST');
  });

  it('accepts topics of 128 characters with . _ : -', async () => {
    const { call } = await openServer();
    const topic = `a.b_c:d-${'x'.repeat(120)}`;
    expect(topic.length).toBe(128);
    const res = await call('POST', `/v1/topics/${topic}/messages`, { payload: 1 });
    expect(res.status).toBe(201);
  });

  it('carries byte payloads as base64 both ways', async () => {
    const { call, queue } = await openServer();
    const bytes = Buffer.from([0, 1, 2, 250, 255]);
    await call('POST', '/v1/topics/bin/messages', {
      payload: bytes.toString('base64'),
      payloadEncoding: 'base64',
    });
    const [embedded] = await queue.receive('bin', { waitMs: 1000 });
    expect(Buffer.isBuffer(embedded.payload)).toBe(true);
    expect(embedded.payload).toEqual(bytes);
    await queue.nack(embedded.receipt, { delayMs: 0 });
    const res = await call('POST', '/v1/topics/bin/receive', { waitMs: 500 });
    expect(res.body.messages[0]).toMatchObject({
      payload: bytes.toString('base64'),
      payloadEncoding: 'base64',
    });
  });

  it("answers 413 for a payload over the queue's maxPayloadBytes", async () => {
    const { call } = await openServer({}, { maxPayloadBytes: 100 });
    const res = await call('POST', '/v1/topics/t/messages', { payload: 'x'.repeat(200) });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('ERR_TICKWHEEL_PAYLOAD_TOO_LARGE');
  });

  it('takes a payload up to the default maxPayloadBytes (1 MiB) with the default body limit', async () => {
    const { call } = await openServer();
    const fits = await call('POST', '/v1/topics/t/messages', { payload: 'x'.repeat(1048576 - 2) });
    expect(fits.status).toBe(201);
    // One byte over: told as the payload's limit, not the body's.
    const over = await call('POST', '/v1/topics/t/messages', { payload: 'x'.repeat(1048576 - 1) });
    expect(over.status).toBe(413);
    expect(over.body.error.code).toBe('ERR_TICKWHEEL_PAYLOAD_TOO_LARGE');
  });
});

describe('POST /v1/messages:batch', () => {
  it('schedules every message and answers 201 with the results in order', async () => {
    const { call, queue } = await openServer();
    const messages = Array.from({ length: 50 }, (_, i) => ({
      topic: i % 2 ? 'odd' : 'even',
      payload: { i },
      id: `b-${i}`,
      delayMs: 1000,
    }));
    const res = await call('POST', '/v1/messages:batch', { messages });
    expect(res.status).toBe(201);
    expect(res.body.results.map((r: { id: string }) => r.id)).toEqual(messages.map((m) => m.id));
    expect((await queue.get('b-7'))?.topic).toBe('odd');
  });

  it('refuses a batch with one bad message without scheduling any', async () => {
    const { call, queue } = await openServer();
    const messages = [
      { topic: 'ok', payload: 1 },
      { topic: 'ok', payload: 2, delayMs: 1, deliverAt: 1 },
    ];
    const res = await call('POST', '/v1/messages:batch', { messages });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toContain('messages/1');
    expect((await queue.stats()).scheduled).toBe(0);
    const badTopic = await call('POST', '/v1/messages:batch', {
      messages: [
        { topic: 'ok', payload: 1 },
        { topic: '../x', payload: 1 },
      ],
    });
    expect(badTopic.status).toBe(400);
    expect((await queue.stats()).scheduled).toBe(0);
  });

  it('refuses empty batches and batches over 10,000 messages', async () => {
    const { call } = await openServer({ bodyLimit: 4 * 1024 * 1024 });
    expect((await call('POST', '/v1/messages:batch', { messages: [] })).status).toBe(400);
    const messages = Array.from({ length: 10_001 }, () => ({ topic: 't', payload: 0 }));
    expect((await call('POST', '/v1/messages:batch', { messages })).status).toBe(400);
  });

  it('when the queue refuses some, says which: those have an error, the others are scheduled', async () => {
    const { call, queue } = await openServer({}, { maxPayloadBytes: 50 });
    const res = await call('POST', '/v1/messages:batch', {
      messages: [
        { topic: 't', payload: 'small', id: 'small' },
        { topic: 't', payload: 'x'.repeat(100), id: 'big' },
      ],
    });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('ERR_TICKWHEEL_PAYLOAD_TOO_LARGE');
    expect(res.body.results[0]).toMatchObject({ id: 'small' });
    expect(res.body.results[1].error.code).toBe('ERR_TICKWHEEL_PAYLOAD_TOO_LARGE');
    expect(await queue.get('small')).toBeDefined();
    expect(await queue.get('big')).toBeUndefined();
  });
});

describe('GET, DELETE, PATCH /v1/messages/:id', () => {
  it('GET shows the state; 404 for an unknown id', async () => {
    const { call } = await openServer();
    await call('POST', '/v1/topics/t/messages', { payload: 1, id: 'm', delayMs: 10_000 });
    const res = await call('GET', '/v1/messages/m');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: 'm', topic: 't', status: 'scheduled', attempts: 0 });
    const missing = await call('GET', '/v1/messages/nope');
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('ERR_TICKWHEEL_NOT_FOUND');
  });

  it('DELETE cancels once: 200 then 404 saying it is cancelled', async () => {
    const { call } = await openServer();
    await call('POST', '/v1/topics/t/messages', { payload: 1, id: 'm', delayMs: 10_000 });
    const first = await call('DELETE', '/v1/messages/m');
    expect(first).toMatchObject({ status: 200, body: { cancelled: true } });
    const second = await call('DELETE', '/v1/messages/m');
    expect(second.status).toBe(404);
    expect(second.body.error.message).toContain('cancelled');
    expect((await call('DELETE', '/v1/messages/never')).status).toBe(404);
  });

  it('PATCH moves a scheduled message; 409 in flight; 404 unknown; 400 without a time', async () => {
    const { call } = await openServer();
    await call('POST', '/v1/topics/t/messages', { payload: 1, id: 'm', delayMs: 10_000 });
    const deliverAt = Date.now() + 3_600_000;
    const moved = await call('PATCH', '/v1/messages/m', { deliverAt });
    expect(moved).toMatchObject({ status: 200, body: { rescheduled: true, deliverAt } });
    expect((await call('GET', '/v1/messages/m')).body.deliverAt).toBe(deliverAt);

    await call('PATCH', '/v1/messages/m', { delayMs: 0 });
    const received = await call('POST', '/v1/topics/t/receive', { waitMs: 1000 });
    expect(received.body.messages).toHaveLength(1);
    const inFlight = await call('PATCH', '/v1/messages/m', { delayMs: 5 });
    expect(inFlight.status).toBe(409);
    expect(inFlight.body.error.code).toBe('ERR_TICKWHEEL_CONFLICT');

    expect((await call('PATCH', '/v1/messages/nope', { delayMs: 5 })).status).toBe(404);
    const noTime = await call('PATCH', '/v1/messages/m', {});
    expect(noTime.status).toBe(400);
    expect(noTime.body.error.message).toContain('delayMs or deliverAt');
  });

  it('says why a reschedule moved nothing from one read of the message', async () => {
    const { call, queue } = await openServer();
    await call('POST', '/v1/topics/t/messages', { payload: 1, id: 'm', delayMs: 10_000 });
    const info = await queue.get('m');
    await queue.cancel('m');
    // The message is seen acked, then forgotten: a second read would tell another story.
    const get = vi
      .spyOn(queue, 'get')
      .mockResolvedValueOnce({ ...info!, status: 'acked' })
      .mockResolvedValueOnce(undefined);
    const refused = await call('PATCH', '/v1/messages/m', { delayMs: 5 });
    expect(refused.status).toBe(404);
    expect(refused.body.error.message).toBe('message m is acked, not pending');
    expect(get).toHaveBeenCalledTimes(1);
  });

  it('refuses ids the queue would refuse, and over-long ones, with 4xx', async () => {
    const { call } = await openServer();
    expect((await call('GET', '/v1/messages/a%20b')).status).toBe(400);
    const long = await call('GET', `/v1/messages/${'x'.repeat(300)}`);
    expect(long.status).toBeGreaterThanOrEqual(400);
    expect(long.status).toBeLessThan(500);
    expect(long.body.error.code).toBe('ERR_TICKWHEEL_INVALID_REQUEST');
  });
});

describe('POST /v1/topics/:topic/receive, /v1/ack, /v1/nack', () => {
  it('hands out ready messages with receipts; ack takes receipts in a batch', async () => {
    const { call } = await openServer();
    for (let i = 0; i < 3; i++) await call('POST', '/v1/topics/jobs/messages', { payload: i });
    // Due at once: ready within a few ms; a long poll per call waits out a busy machine.
    const messages: Array<{ payload: number; receipt: string }> = [];
    for (let tries = 0; tries < 50 && messages.length < 3; tries++) {
      const res = await call('POST', '/v1/topics/jobs/receive', { max: 10, waitMs: 200 });
      expect(res.status).toBe(200);
      messages.push(...res.body.messages);
    }
    const res = { body: { messages } };
    expect(res.body.messages.map((m: { payload: number }) => m.payload)).toEqual([0, 1, 2]);
    expect(res.body.messages[0]).toMatchObject({ topic: 'jobs', attempts: 1 });
    const receipts = res.body.messages.map((m: { receipt: string }) => m.receipt);
    const acked = await call('POST', '/v1/ack', { receipts: [...receipts, 'stale~x'] });
    expect(acked.body).toEqual({ acked: 3, results: [true, true, true, false] });
    const again = await call('POST', '/v1/ack', { receipts });
    expect(again.body.acked).toBe(0);
  });

  it('needs no body: an empty POST takes one message without waiting', async () => {
    const { call } = await openServer();
    const res = await call('POST', '/v1/topics/jobs/receive', '', JSON_TYPE);
    expect(res).toMatchObject({ status: 200, body: { messages: [] } });
  });

  it('long-polls: answers as soon as a message comes due', async () => {
    const { call, queue } = await openServer();
    const served = vi.spyOn(queue, 'receive');
    const started = performance.now();
    const polling = call('POST', '/v1/topics/jobs/receive', { waitMs: 20_000 });
    // Scheduled once the poll waits in the queue.
    await waitFor(() => served.mock.calls.some(([, options]) => (options?.waitMs ?? 0) > 0));
    await call('POST', '/v1/topics/jobs/messages', { payload: 'late', delayMs: 100 });
    const res = await polling;
    const answeredAt = Date.now();
    const [message] = res.body.messages as Array<{ payload: string; deliverAt: number }>;
    expect(res.body.messages).toHaveLength(1);
    expect(message.payload).toBe('late');
    expect(answeredAt).toBeGreaterThanOrEqual(message.deliverAt);
    // Long before its wait of 20 s ran out.
    expect(performance.now() - started).toBeLessThan(20_000);
  });

  it("caps waitMs at the server's maxWaitMs", async () => {
    const { call } = await openServer({ maxWaitMs: 100 });
    const started = performance.now();
    const res = await call('POST', '/v1/topics/jobs/receive', { waitMs: 60_000 });
    expect(res.body.messages).toEqual([]);
    // Far below the 60 s asked for (the test's own timeout).
    expect(performance.now() - started).toBeLessThan(30_000);
  });

  it('refuses max over 1000, negative waits and unknown options', async () => {
    const { call } = await openServer();
    for (const body of [
      { max: 1001 },
      { max: 0 },
      { waitMs: -1 },
      { visibilityMs: 0 },
      { wait: 1 },
    ]) {
      expect((await call('POST', '/v1/topics/jobs/receive', body)).status).toBe(400);
    }
  });

  it('redelivers after the visibility timeout, with attempts counted', async () => {
    const { call } = await openServer();
    await call('POST', '/v1/topics/jobs/messages', {
      payload: 1,
      backoff: { type: 'fixed', delayMs: 10 },
    });
    const first = await call('POST', '/v1/topics/jobs/receive', { visibilityMs: 50, waitMs: 1000 });
    expect(first.body.messages[0].attempts).toBe(1);
    const second = await call('POST', '/v1/topics/jobs/receive', { waitMs: 3000 });
    expect(second.body.messages[0].attempts).toBe(2);
  });

  it('nack gives deliveries back after delayMs; the last attempt goes to the dead letters', async () => {
    const { call } = await openServer();
    await call('POST', '/v1/topics/jobs/messages', { payload: 1, id: 'd', maxAttempts: 2 });
    const first = await call('POST', '/v1/topics/jobs/receive', { waitMs: 1000 });
    const nacked = await call('POST', '/v1/nack', {
      receipts: [first.body.messages[0].receipt],
      delayMs: 20,
    });
    expect(nacked.body).toEqual({ nacked: 1, results: [true] });
    const second = await call('POST', '/v1/topics/jobs/receive', { waitMs: 3000 });
    expect(second.body.messages[0].attempts).toBe(2);
    await call('POST', '/v1/nack', { receipts: [second.body.messages[0].receipt] });
    expect((await call('GET', '/v1/messages/d')).body.status).toBe('dead');

    const dead = await call('GET', '/v1/topics/jobs/dead');
    expect(dead.body.messages).toMatchObject([{ id: 'd', status: 'dead' }]);
    expect((await call('PATCH', '/v1/messages/d', { delayMs: 0 })).status).toBe(409);

    const requeued = await call('POST', '/v1/messages/d/requeue', { delayMs: 0 });
    expect(requeued).toMatchObject({ status: 200, body: { requeued: true } });
    const third = await call('POST', '/v1/topics/jobs/receive', { waitMs: 3000 });
    expect(third.body.messages[0]).toMatchObject({ id: 'd', attempts: 1 });
    expect((await call('POST', '/v1/messages/d/requeue', '', JSON_TYPE)).status).toBe(409);
    expect((await call('POST', '/v1/messages/nope/requeue', '', JSON_TYPE)).status).toBe(404);
  });

  it('checks the dead-letter limit', async () => {
    const { call } = await openServer();
    expect((await call('GET', '/v1/topics/jobs/dead?limit=10')).status).toBe(200);
    for (const limit of ['0', '10001', 'x', '-1', '1e3']) {
      expect((await call('GET', `/v1/topics/jobs/dead?limit=${limit}`)).status).toBe(400);
    }
  });

  it('refuses ack without receipts, with non-string receipts, or over 10,000', async () => {
    const { call } = await openServer({ bodyLimit: 4 * 1024 * 1024 });
    expect((await call('POST', '/v1/ack', {})).status).toBe(400);
    expect((await call('POST', '/v1/ack', { receipts: [] })).status).toBe(400);
    expect((await call('POST', '/v1/ack', { receipts: [1] })).status).toBe(400);
    expect((await call('POST', '/v1/ack', { receipts: ['x'.repeat(513)] })).status).toBe(400);
    const many = Array.from({ length: 10_001 }, (_, i) => `r${i}`);
    expect((await call('POST', '/v1/ack', { receipts: many })).status).toBe(400);
  });
});

describe('errors', () => {
  it('answers 413 with the API error format beyond the body limit', async () => {
    const { call } = await openServer({ bodyLimit: 2048 });
    const res = await call('POST', '/v1/topics/t/messages', { payload: 'x'.repeat(4096) });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('ERR_TICKWHEEL_BODY_TOO_LARGE');
  });

  it('refuses malformed JSON, empty JSON, prototype pollution and other media types', async () => {
    const { call } = await openServer();
    const url = '/v1/topics/t/messages';
    const cases: Array<[string, Record<string, string>, number]> = [
      ['{"payload": ', JSON_TYPE, 400],
      ['', JSON_TYPE, 400],
      ['{"payload": 1, "__proto__": {"admin": true}}', JSON_TYPE, 400],
      ['{"payload": 1, "constructor": {"prototype": {"admin": true}}}', JSON_TYPE, 400],
      ['payload=1', { 'content-type': 'application/x-www-form-urlencoded' }, 415],
      ['hello', { 'content-type': 'text/plain' }, 415],
    ];
    for (const [body, headers, status] of cases) {
      const res = await call('POST', url, body, headers);
      expect(res.status, body).toBe(status);
      expect(res.body.error.code, body).toMatch(/^ERR_TICKWHEEL_/);
    }
  });

  it('answers unknown routes and methods with 404 JSON', async () => {
    const { call } = await openServer();
    for (const [method, url] of [
      ['GET', '/nope'],
      ['GET', '/v1/nope'],
      ['PUT', '/v1/messages/x'],
      ['PUT', '/v1/topics/t/messages'],
      ['GET', '/v1/../etc/passwd'],
    ]) {
      const res = await call(method, url);
      expect(res.status, `${method} ${url}`).toBe(404);
      expect(res.body.error.code).toBe('ERR_TICKWHEEL_NOT_FOUND');
    }
  });

  it('answers malformed %-escapes with 400', async () => {
    const { call } = await openServer();
    const res = await call('GET', '/v1/messages/%zz');
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('ERR_TICKWHEEL_INVALID_REQUEST');
  });

  it('answers 503 once the queue is closed', async () => {
    const { call, queue } = await openServer();
    await queue.close();
    const res = await call('POST', '/v1/topics/t/messages', { payload: 1 });
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('ERR_TICKWHEEL_CLOSED');
  });

  it('answers 423 when the data directory is locked by another server', async () => {
    const dir = tempDir();
    const first = await createServer({ dir, fsync: 'never', logLevel: 'silent' });
    await expect(createServer({ dir, logLevel: 'silent' })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_LOCKED',
    });
    await first.close();
    // Closing the server closed the queue it opened: the directory is free again.
    const second = await createServer({ dir, logLevel: 'silent' });
    await second.close();
  });

  it('checks its options', async () => {
    const queue = await DelayQueue.open({ store: new MemoryStore() });
    try {
      await expect(createServer({})).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
      });
      await expect(createServer({ queue, bodyLimit: 10 })).rejects.toThrow(/bodyLimit/);
      await expect(createServer({ queue, token: 'has space' })).rejects.toThrow(/token/);
      await expect(createServer({ queue, token: '' })).rejects.toThrow(/token/);
      await expect(createServer({ queue, logLevel: 'loud' as 'info' })).rejects.toThrow(/logLevel/);
    } finally {
      await queue.close();
    }
  });
});

describe('operations', () => {
  it('GET /v1/stats reports the queue and the server', async () => {
    const { call } = await openServer();
    await call('POST', '/v1/topics/t/messages', { payload: 1, delayMs: 10_000 });
    const res = await call('GET', '/v1/stats');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      scheduled: 1,
      topics: { t: { scheduled: 1 } },
      server: { version: expect.any(String), maxWaitMs: 20_000 },
    });
  });

  it('GET /healthz is ok', async () => {
    const { call } = await openServer();
    expect(await call('GET', '/healthz')).toMatchObject({ status: 200, body: { status: 'ok' } });
  });

  it('GET /metrics has rates, pending by topic, lateness and fsync series', async () => {
    const { call } = await openServer();
    await call('POST', '/v1/topics/t/messages', { payload: 1 });
    await call('POST', '/v1/topics/later/messages', { payload: 1, delayMs: 10_000 });
    const got = await call('POST', '/v1/topics/t/receive', { waitMs: 1000 });
    await call('POST', '/v1/ack', { receipts: [got.body.messages[0].receipt] });
    const res = await call('GET', '/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toContain('text/plain');
    const text = res.text;
    expect(text).toMatch(/^tickwheel_messages_scheduled_total 2$/m);
    expect(text).toMatch(/^tickwheel_messages_fired_total 1$/m);
    expect(text).toMatch(/^tickwheel_messages_acked_total 1$/m);
    expect(text).toMatch(/^tickwheel_messages\{topic="later",state="scheduled"\} 1$/m);
    expect(text).toMatch(/^tickwheel_delivery_lateness_seconds_count 1$/m);
    expect(text).toMatch(/^tickwheel_fire_lateness_seconds\{quantile="0.99"\} /m);
    expect(text).toContain('tickwheel_store_fsync_seconds_total');
    expect(text).toMatch(
      /^tickwheel_http_requests_total\{method="POST",route="\/v1\/topics\/:topic\/messages",status="201"\} 2$/m,
    );
    expect(text).toContain('process_cpu_user_seconds_total');
    // Counters stay monotonic across scrapes.
    const again = (await call('GET', '/metrics')).text;
    expect(again).toMatch(/^tickwheel_messages_scheduled_total 2$/m);
  });

  it('GET / is the dashboard placeholder, linking stats and metrics', async () => {
    const { call } = await openServer();
    const res = await call('GET', '/');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    expect(res.text).toContain('dashboard is coming');
    expect(res.text).toContain('href="/v1/stats"');
    expect(res.text).toContain('href="/metrics"');
  });
});

describe('close()', () => {
  it('ends a long poll early, then closes the queue it opened', async () => {
    const dir = tempDir();
    const server = await createServer({ dir, fsync: 'never', logLevel: 'silent' });
    await server.listen({ port: 0, host: '127.0.0.1' });
    const { port } = server.server.address() as { port: number };
    const served = vi.spyOn(server.queue, 'receive');
    const started = performance.now();
    const poll = fetch(`http://127.0.0.1:${port}/v1/topics/t/receive`, {
      method: 'POST',
      headers: JSON_TYPE,
      body: JSON.stringify({ waitMs: 15_000 }),
    });
    // Closed once the poll waits in the queue.
    await waitFor(() => served.mock.calls.some(([, options]) => (options?.waitMs ?? 0) > 0));
    await server.close();
    const res = await poll;
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ messages: [] });
    // Long before its wait of 15 s ran out.
    expect(performance.now() - started).toBeLessThan(15_000);
    await expect(server.queue.schedule({ topic: 't', payload: 1 })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_CLOSED',
    });
  });
});

describe('createServer on a data directory', () => {
  it("opens with the directory's options in queueOptions, given to its store", async () => {
    const server = await createServer({
      dir: tempDir(),
      logLevel: 'silent',
      queueOptions: {
        horizonMs: 500,
        windowMs: 100,
        checkpointIntervalMs: 200,
        segmentBytes: 1 << 20,
        snapshotBytes: 1 << 20,
        listScanRecords: 100,
      },
    });
    try {
      await server.opened;
      const { queue } = server;
      const { id } = await queue.schedule({ topic: 't', payload: 1, delayMs: 60_000 });
      expect((await queue.get(id))?.status).toBe('scheduled');
    } finally {
      await server.close();
    }
  });
});
