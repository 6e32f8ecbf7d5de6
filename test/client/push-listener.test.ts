/**
 * pushListener (src/client/push-receiver.ts), the receiving end of push delivery, behind a real
 * node:http server: a queue pushing to it gets its handler's outcome (resolve: acked; throw:
 * retried), and requests that are not the queue's are refused with a JSON error before the
 * handler runs.
 */

import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { pushListener, signPush, type PushedMessage } from '../../src/client/index.js';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import { waitFor } from '../support/wait-for.js';

const SECRET = 'listener-test-secret-0123456789';
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

async function listen(listener: RequestListener): Promise<string> {
  const server: Server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

describe('pushListener', () => {
  it("takes a queue's pushes: resolve acks, throw retries; JSON and bytes payloads", async () => {
    const got: PushedMessage[] = [];
    let failures = 1;
    const url = await listen(
      pushListener({ secret: SECRET }, (message) => {
        if (message.id === 'flaky' && failures-- > 0) throw new Error('not yet');
        got.push(message);
      }),
    );
    // The listener is on loopback, which pushes reach only when allowed.
    const queue = await DelayQueue.open({
      store: new MemoryStore(),
      push: { allow: ['127.0.0.1'] },
    });
    cleanups.push(() => queue.close());
    await queue.configureTopic('in', { push: { url, secret: SECRET } });
    await queue.schedule({ topic: 'in', id: 'json', payload: { a: [1, 2] } });
    await queue.schedule({ topic: 'in', id: 'bytes', payload: Buffer.from('raw\u0000') });
    await queue.schedule({
      topic: 'in',
      id: 'flaky',
      payload: 'x',
      backoff: { type: 'fixed', delayMs: 20 },
    });
    await waitFor(() => got.length >= 3);
    const byId = new Map(got.map((m) => [m.id, m]));
    expect(byId.get('json')).toMatchObject({ topic: 'in', attempt: 1, payload: { a: [1, 2] } });
    expect(Buffer.isBuffer(byId.get('bytes')?.payload)).toBe(true);
    expect((byId.get('bytes')?.payload as Buffer).toString()).toBe('raw\u0000');
    expect(byId.get('flaky')).toMatchObject({ attempt: 2, payload: 'x' });
    // The listener has the message before its answer reaches the queue, which acks on it.
    await waitFor(async () => (await queue.get('flaky'))?.status === 'acked');
  });

  it('refuses what is not a signed push before the handler runs', async () => {
    let called = 0;
    const url = await listen(
      pushListener({ secret: SECRET, maxBytes: 1000 }, () => {
        called++;
      }),
    );
    const now = Math.floor(Date.now() / 1000);
    const body = '{"a":1}';
    const fields = { id: 'i', topic: 't', attempt: 1, deliverAt: 1_767_000_000_000 };
    const signed = (secret: string, text = body) => ({
      'tickwheel-id': 'i',
      'tickwheel-topic': 't',
      'tickwheel-attempt': '1',
      'tickwheel-deliver-at': '1767000000000',
      'tickwheel-timestamp': String(now),
      'tickwheel-signature': signPush(secret, now, fields, text),
      'content-type': 'application/json',
    });
    const cases: Array<[RequestInit, number, string]> = [
      [{ method: 'POST', body }, 401, 'ERR_TICKWHEEL_PUSH_SIGNATURE'],
      [
        { method: 'POST', body, headers: signed('another-secret-0123456789') },
        401,
        'ERR_TICKWHEEL_PUSH_SIGNATURE',
      ],
      [{ method: 'GET' }, 405, 'ERR_TICKWHEEL_INVALID_REQUEST'],
      [
        { method: 'POST', body: 'x'.repeat(2000), headers: signed(SECRET, 'x'.repeat(2000)) },
        413,
        'ERR_TICKWHEEL_BODY_TOO_LARGE',
      ],
      [
        { method: 'POST', body: '{bad', headers: signed(SECRET, '{bad') },
        400,
        'ERR_TICKWHEEL_INVALID_REQUEST',
      ],
    ];
    for (const [init, status, code] of cases) {
      const answer = await fetch(url, init);
      expect([init.method, answer.status]).toEqual([init.method, status]);
      expect(((await answer.json()) as { error: { code: string } }).error.code).toBe(code);
    }
    expect(called).toBe(0);
    // The same request signed with the secret is taken.
    const ok = await fetch(url, { method: 'POST', body, headers: signed(SECRET) });
    expect(ok.status).toBe(204);
    expect(called).toBe(1);
    expect(() => pushListener({ secret: '' }, () => {})).toThrow(TypeError);
  });

  it('refuses a timestamp verifyPush refuses (not 1 to 12 digits) before reading the body', async () => {
    const url = await listen(
      pushListener({ secret: SECRET, maxBytes: 10, now: () => 1_700_000_000_000 }, () => {}),
    );
    const fields = { id: 'i', topic: 't', attempt: 1, deliverAt: 1_700_000_000_000 };
    const body = 'x'.repeat(100);
    // 1.7e9 is the receiver's clock to the second, but not whole seconds as the header needs.
    const answer = await fetch(url, {
      method: 'POST',
      body,
      headers: {
        'tickwheel-id': 'i',
        'tickwheel-topic': 't',
        'tickwheel-attempt': '1',
        'tickwheel-deliver-at': '1700000000000',
        'tickwheel-timestamp': '1.7e9',
        'tickwheel-signature': signPush(SECRET, 1_700_000_000, fields, body),
      },
    });
    expect(answer.status).toBe(401);
    expect(answer.headers.get('connection')).toBe('close');
    expect(await answer.json()).toEqual({
      error: {
        code: 'ERR_TICKWHEEL_PUSH_SIGNATURE',
        message: 'tickwheel-timestamp is not whole seconds: 1.7e9',
      },
    });
  });

  it('takes maxBytes Infinity for no limit', () => {
    expect(typeof pushListener({ secret: SECRET, maxBytes: Infinity }, () => {})).toBe('function');
  });

  it('refuses bad options and a missing handler at once with a named error', () => {
    const handler = () => {};
    const bad: Array<[unknown, unknown, string, string]> = [
      [undefined, handler, 'TickwheelTypeError', 'ERR_TICKWHEEL_INVALID_OPTION'],
      [{}, handler, 'TickwheelTypeError', 'ERR_TICKWHEEL_INVALID_OPTION'],
      [{ secret: '' }, handler, 'TickwheelTypeError', 'ERR_TICKWHEEL_INVALID_OPTION'],
      [{ secret: SECRET }, undefined, 'TickwheelTypeError', 'ERR_TICKWHEEL_INVALID_CALLBACK'],
      [
        { secret: SECRET, maxBytes: -1 },
        handler,
        'TickwheelRangeError',
        'ERR_TICKWHEEL_INVALID_OPTION',
      ],
      [
        { secret: SECRET, toleranceSeconds: '5' },
        handler,
        'TickwheelRangeError',
        'ERR_TICKWHEEL_INVALID_OPTION',
      ],
      [
        { secret: SECRET, methods: 'POST' },
        handler,
        'TickwheelTypeError',
        'ERR_TICKWHEEL_INVALID_OPTION',
      ],
      [{ secret: SECRET, now: 5 }, handler, 'TickwheelTypeError', 'ERR_TICKWHEEL_INVALID_CALLBACK'],
    ];
    for (const [options, given, name, code] of bad) {
      expect(() => pushListener(options as never, given as never)).toThrowError(
        expect.objectContaining({ name, code, message: expect.stringMatching(/^pushListener: /) }),
      );
    }
  });
});
