import { describe, expect, it } from 'vitest';
import { openServer } from './harness.js';

const TOKEN = 's3cret-token_with.symbols~!';

describe('bearer token', () => {
  const routes: Array<[string, string, unknown?]> = [
    ['POST', '/v1/topics/t/messages', { payload: 1 }],
    ['POST', '/v1/messages:batch', { messages: [{ topic: 't', payload: 1 }] }],
    ['GET', '/v1/messages/m'],
    ['DELETE', '/v1/messages/m'],
    ['PATCH', '/v1/messages/m', { delayMs: 1 }],
    ['POST', '/v1/topics/t/receive', {}],
    ['POST', '/v1/ack', { receipts: ['r'] }],
    ['POST', '/v1/nack', { receipts: ['r'] }],
    ['GET', '/v1/topics/t/dead'],
    ['POST', '/v1/messages/m/requeue', {}],
    ['GET', '/v1/stats'],
  ];

  it.each(routes)(
    '%s %s needs it: 401 without, 401 wrong, served right',
    async (method, url, body) => {
      const { call, queue } = await openServer({ token: TOKEN });
      const missing = await call(method, url, body);
      expect(missing.status).toBe(401);
      expect(missing.body.error.code).toBe('ERR_TICKWHEEL_UNAUTHORIZED');
      expect(missing.headers['www-authenticate']).toContain('Bearer');

      for (const authorization of [
        `Bearer ${TOKEN}x`,
        `Bearer ${TOKEN.slice(0, -1)}`,
        'Bearer ',
        `Basic ${Buffer.from(`user:${TOKEN}`).toString('base64')}`,
        TOKEN,
      ]) {
        const wrong = await call(method, url, body, { authorization });
        expect(wrong.status, authorization).toBe(401);
        expect(wrong.body.error.code).toBe('ERR_TICKWHEEL_UNAUTHORIZED');
      }
      expect((await queue.stats()).scheduled).toBe(0);

      const right = await call(method, url, body, { authorization: `Bearer ${TOKEN}` });
      expect(right.status).not.toBe(401);
      expect(right.status).toBeLessThan(500);
    },
  );

  it('accepts the scheme in any case', async () => {
    const { call } = await openServer({ token: TOKEN });
    const res = await call('GET', '/v1/stats', undefined, { authorization: `bearer ${TOKEN}` });
    expect(res.status).toBe(200);
  });

  it('checks the token before the body: a bad body without a token is still 401', async () => {
    const { call } = await openServer({ token: TOKEN });
    const res = await call('POST', '/v1/topics/t/messages', '{not json', {
      'content-type': 'application/json',
    });
    expect(res.status).toBe(401);
  });

  it('leaves /healthz, /metrics and the dashboard open', async () => {
    const { call } = await openServer({ token: TOKEN });
    expect((await call('GET', '/healthz')).status).toBe(200);
    expect((await call('GET', '/metrics')).status).toBe(200);
    const page = await call('GET', '/');
    expect(page.status).toBe(200);
    expect(page.text).toContain('Authorization: Bearer');
  });

  it('without a token, /v1 is open', async () => {
    const { call } = await openServer();
    expect((await call('GET', '/v1/stats')).status).toBe(200);
  });
});
