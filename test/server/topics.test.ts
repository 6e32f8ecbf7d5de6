/**
 * The topic routes (src/server/routes/topics.ts): list, read, pause, resume and rate-limit a
 * topic over HTTP, and every bad request answered with a 4xx and a JSON error body.
 */

import { describe, expect, it } from 'vitest';
import { verifyPush } from '../../src/protocol/push-signature.js';
import { startReceiver } from '../queue/push-receiver.js';
import { openServer } from './harness.js';

describe('topic routes', () => {
  it('pause and resume a topic; receive answers nothing while paused', async () => {
    const { call } = await openServer();
    expect((await call('POST', '/v1/topics/jobs/messages', { payload: 1 })).status).toBe(201);
    const paused = await call('POST', '/v1/topics/jobs/pause', {});
    expect(paused.status).toBe(200);
    expect(paused.body).toEqual({
      topic: 'jobs',
      paused: true,
      rateLimit: null,
      push: null,
      pending: 1,
      dead: 0,
    });
    // Schedules are still accepted; deliveries stop.
    expect((await call('POST', '/v1/topics/jobs/messages', { payload: 2 })).status).toBe(201);
    const none = await call('POST', '/v1/topics/jobs/receive', { max: 10, waitMs: 50 });
    expect(none.body.messages).toEqual([]);
    expect((await call('GET', '/v1/topics/jobs')).body).toMatchObject({ paused: true, pending: 2 });
    expect((await call('POST', '/v1/topics/jobs/resume', {})).body.paused).toBe(false);
    const got = await call('POST', '/v1/topics/jobs/receive', { max: 10 });
    expect(got.body.messages.map((m: { payload: unknown }) => m.payload)).toEqual([1, 2]);
  });

  it('PATCH sets and removes a rate limit; GET /v1/topics lists topics', async () => {
    const { call } = await openServer();
    const limited = await call('PATCH', '/v1/topics/slow', { rateLimit: { perSecond: 2 } });
    expect(limited.status).toBe(200);
    expect(limited.body.rateLimit).toEqual({ perSecond: 2, burst: 2 });
    await call('POST', '/v1/topics/other/messages', { payload: 'x' });
    for (let i = 0; i < 5; i++) await call('POST', '/v1/topics/slow/messages', { payload: i });
    const first = await call('POST', '/v1/topics/slow/receive', { max: 10 });
    expect(first.body.messages).toHaveLength(2);
    const list = await call('GET', '/v1/topics');
    expect(list.body.topics).toEqual([
      { topic: 'other', paused: false, rateLimit: null, push: null, pending: 1, dead: 0 },
      {
        topic: 'slow',
        paused: false,
        rateLimit: { perSecond: 2, burst: 2 },
        push: null,
        pending: 5,
        dead: 0,
      },
    ]);
    const removed = await call('PATCH', '/v1/topics/slow', { rateLimit: null });
    expect(removed.body.rateLimit).toBeNull();
    expect((await call('POST', '/v1/topics/slow/receive', { max: 10 })).body.messages).toHaveLength(
      3,
    );
  });

  it('GET /v1/topics answers a page at a time; GET /v1/stats names the largest topics', async () => {
    const { call } = await openServer();
    for (const [topic, n] of [
      ['a', 1],
      ['b', 3],
      ['c', 2],
    ] as const) {
      for (let i = 0; i < n; i++)
        await call('POST', `/v1/topics/${topic}/messages`, { payload: i });
    }
    const first = await call('GET', '/v1/topics?limit=2');
    expect(first.body.topics.map((t: { topic: string }) => t.topic)).toEqual(['a', 'b']);
    expect(first.body.cursor).toBe('b');
    const last = await call('GET', `/v1/topics?limit=2&cursor=${first.body.cursor}`);
    expect(last.body).toEqual({ topics: [expect.objectContaining({ topic: 'c', pending: 2 })] });

    const stats = await call('GET', '/v1/stats?topics=1');
    expect(stats.status).toBe(200);
    expect(Object.keys(stats.body.topics)).toEqual(['b']);
    expect(stats.body.topicCount).toBe(3);
    // Due now: scheduled until fired, then ready.
    const other = stats.body.otherTopics;
    expect(other).toMatchObject({ inflight: 0, dead: 0 });
    expect(other.scheduled + other.ready).toBe(3);

    for (const path of [
      '/v1/topics?limit=0',
      '/v1/topics?limit=1001',
      '/v1/topics?limit=x',
      '/v1/topics?cursor=' + 'x'.repeat(129),
      '/v1/topics?page=2',
      '/v1/stats?topics=1001',
      '/v1/stats?topics=-1',
    ]) {
      const refused = await call('GET', path);
      expect(refused.status, path).toBe(400);
      expect(refused.body.error, path).toMatchObject({
        code: expect.stringMatching(/^ERR_TICKWHEEL_/),
      });
    }
  });

  it('answers bad requests with a 4xx and a JSON error, changing nothing', async () => {
    const { call } = await openServer();
    const bad: Array<[string, string, unknown, number, string]> = [
      ['PATCH', '/v1/topics/jobs', { paused: 'yes' }, 400, 'ERR_TICKWHEEL_INVALID_REQUEST'],
      ['PATCH', '/v1/topics/jobs', { pasued: true }, 400, 'ERR_TICKWHEEL_INVALID_REQUEST'],
      [
        'PATCH',
        '/v1/topics/jobs',
        { rateLimit: { perSecond: 0 } },
        400,
        'ERR_TICKWHEEL_INVALID_REQUEST',
      ],
      [
        'PATCH',
        '/v1/topics/jobs',
        { rateLimit: { perSecond: 1, burst: 0.5 } },
        400,
        'ERR_TICKWHEEL_INVALID_REQUEST',
      ],
      ['PATCH', '/v1/topics/jobs', [], 400, 'ERR_TICKWHEEL_INVALID_REQUEST'],
      [
        'PATCH',
        '/v1/topics/jobs',
        { push: { url: 'http://x/', secret: 'short' } },
        400,
        'ERR_TICKWHEEL_INVALID_REQUEST',
      ],
      [
        'PATCH',
        '/v1/topics/jobs',
        { push: { url: 'gopher://x/', secret: 'a-secret-of-16-chars' } },
        400,
        'ERR_TICKWHEEL_INVALID_OPTION',
      ],
      [
        'PATCH',
        '/v1/topics/jobs',
        { push: { url: 'http://x/', secret: 'a-secret-of-16-chars', headers: { Host: 'y' } } },
        400,
        'ERR_TICKWHEEL_INVALID_OPTION',
      ],
      ['PATCH', '/v1/topics/jobs', 'paused=true', 415, 'ERR_TICKWHEEL_UNSUPPORTED_MEDIA_TYPE'],
      ['POST', '/v1/topics/jobs/pause', 'x', 415, 'ERR_TICKWHEEL_UNSUPPORTED_MEDIA_TYPE'],
      ['POST', '/v1/topics/bad%20topic/pause', {}, 400, 'ERR_TICKWHEEL_INVALID_REQUEST'],
      ['GET', '/v1/topics/bad%20topic', undefined, 400, 'ERR_TICKWHEEL_INVALID_REQUEST'],
    ];
    for (const [method, url, body, status, code] of bad) {
      const answer = await call(method, url, body);
      expect([method, url, answer.status, answer.body?.error?.code]).toEqual([
        method,
        url,
        status,
        code,
      ]);
      expect(typeof answer.body.error.message).toBe('string');
    }
    expect((await call('GET', '/v1/topics/jobs')).body).toMatchObject({
      paused: false,
      rateLimit: null,
      push: null,
    });
  });

  it('PATCH sets a push target: the server pushes to it, and never shows its secret', async () => {
    const receiver = await startReceiver(() => ({ status: 200 }));
    try {
      const { call } = await openServer({}, { push: { allow: ['127.0.0.1'] } });
      const secret = 'server-test-secret-0123456789';
      const set = await call('PATCH', '/v1/topics/hooks', {
        push: { url: receiver.url, secret, headers: { 'X-Env': 'test' }, concurrency: 2 },
      });
      expect(set.status).toBe(200);
      expect(set.body.push).toEqual({
        url: `${receiver.url}/`,
        method: 'POST',
        headerNames: ['x-env'],
        timeoutMs: 10_000,
        concurrency: 2,
      });
      const listed = await call('GET', '/v1/topics');
      expect(JSON.stringify(listed.body)).not.toContain(secret);
      expect(JSON.stringify(listed.body)).not.toContain('test');
      const scheduled = await call('POST', '/v1/topics/hooks/messages', { payload: { n: 1 } });
      expect(scheduled.status).toBe(201);
      await receiver.waitFor(1);
      const request = receiver.requests[0];
      expect(request.headers['x-env']).toBe('test');
      expect(verifyPush(request, { secret })).toMatchObject({ id: scheduled.body.id, attempt: 1 });
      const removed = await call('PATCH', '/v1/topics/hooks', { push: null });
      expect(removed.body.push).toBeNull();
    } finally {
      await receiver.close();
    }
  });
});
