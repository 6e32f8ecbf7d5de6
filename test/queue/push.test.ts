/**
 * HTTP push delivery on the embedded queue (src/queue/push.ts, push-sender.ts) against a real
 * HTTP receiver on 127.0.0.1: signed requests, 2xx as ack, failures through the message's
 * backoff to a dead letter with the reason kept, timeouts, redirects, per-target concurrency,
 * pause, changes of the target, durability of the setting, and close() with requests under way.
 * The queue runs on the real clock (HTTP is real); waits are generous and only for outcomes.
 */

import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import { TickwheelError } from '../../src/errors.js';
import { PUSH_HEADER, verifyPush } from '../../src/protocol/push-signature.js';
import { Pushers } from '../../src/queue/push.js';
import { PushAgents, PushSender } from '../../src/queue/push-sender.js';
import { PushGuard } from '../../src/queue/push-guard.js';
import { startReceiver, type Receiver } from './push-receiver.js';
import { useTempDirs } from '../support/temp-dir.js';
import { useClosing } from '../support/closing.js';
import { waitFor } from '../support/wait-for.js';

const tempDir = useTempDirs('push');

const SECRET = 'a-secret-of-some-length-0123456789';
const track = useClosing();

/** The receivers of these tests are on loopback, which a queue allows only when told to. */
const LOOPBACK = { allow: ['127.0.0.0/8'] };

function memoryQueue(): Promise<DelayQueue> {
  return track(DelayQueue.open({ store: new MemoryStore(), push: LOOPBACK }));
}

function receiver(...args: Parameters<typeof startReceiver>): Promise<Receiver> {
  return track(startReceiver(...args));
}

async function statusOf(queue: DelayQueue, id: string): Promise<string | undefined> {
  return (await queue.get(id))?.status;
}

describe('push delivery (embedded queue, real receiver)', () => {
  it('POSTs each due message signed; a 2xx answer acks it', async () => {
    const target = await receiver();
    const queue = await memoryQueue();
    const info = await queue.configureTopic('hooks', {
      push: { url: `${target.url}/in?x=1`, secret: SECRET, headers: { Authorization: 'Bearer t' } },
    });
    // Read back without the secret and the headers' values.
    expect(info.push).toEqual({
      url: `${target.url}/in?x=1`,
      method: 'POST',
      headerNames: ['authorization'],
      timeoutMs: 10_000,
      concurrency: 10,
    });
    expect(JSON.stringify(info)).not.toContain(SECRET);
    expect(JSON.stringify(await queue.topicList())).not.toContain('Bearer');
    await queue.schedule({ topic: 'hooks', id: 'j1', payload: { n: 1, text: 'héllo' } });
    await queue.schedule({ topic: 'hooks', id: 'b1', payload: Buffer.from([0, 1, 2, 255]) });
    await queue.schedule({ topic: 'hooks', id: 'later', payload: 3, delayMs: 150 });
    await target.waitFor(3);
    const byId = new Map(target.requests.map((r) => [r.headers[PUSH_HEADER.id], r]));
    const json = byId.get('j1')!;
    expect(json.method).toBe('POST');
    expect(json.path).toBe('/in?x=1');
    expect(json.headers['content-type']).toBe('application/json');
    expect(json.headers.authorization).toBe('Bearer t');
    expect(JSON.parse(json.body.toString('utf8'))).toEqual({ n: 1, text: 'héllo' });
    expect(json.headers[PUSH_HEADER.attempt]).toBe('1');
    expect(verifyPush({ headers: json.headers, body: json.body }, { secret: SECRET })).toEqual({
      id: 'j1',
      topic: 'hooks',
      attempt: 1,
      deliverAt: expect.any(Number) as number,
      timestamp: expect.any(Number) as number,
    });
    const bytes = byId.get('b1')!;
    expect(bytes.headers['content-type']).toBe('application/octet-stream');
    expect([...bytes.body]).toEqual([0, 1, 2, 255]);
    expect(() => verifyPush(bytes, { secret: SECRET })).not.toThrow();
    // Never early: the delayed one arrived no sooner than it was due.
    const later = byId.get('later')!;
    expect(later.at).toBeGreaterThanOrEqual(Number(later.headers[PUSH_HEADER.deliverAt]));
    await waitFor(async () => (await statusOf(queue, 'later')) === 'acked');
    expect(await statusOf(queue, 'j1')).toBe('acked');
    const stats = (await queue.stats()).push;
    expect(stats.hooks).toMatchObject({ succeeded: 3, failed: 0, inFlight: 0 });
  });

  it('a failed answer is a failed attempt: backoff, then a dead letter with the reason', async () => {
    const target = await receiver(() => ({ status: 503, body: 'busy, come back later' }));
    const queue = await memoryQueue();
    await queue.configureTopic('hooks', { push: { url: target.url, secret: SECRET } });
    await queue.schedule({
      topic: 'hooks',
      id: 'm',
      payload: 'x',
      maxAttempts: 3,
      backoff: { type: 'fixed', delayMs: 100 },
    });
    await waitFor(async () => (await statusOf(queue, 'm')) === 'dead');
    expect(target.requests.map((r) => r.headers[PUSH_HEADER.attempt])).toEqual(['1', '2', '3']);
    // The backoff was kept between attempts.
    for (let i = 1; i < 3; i++) {
      expect(target.requests[i].at - target.requests[i - 1].at).toBeGreaterThanOrEqual(95);
    }
    const [dead] = await queue.deadLetters('hooks');
    expect(dead).toMatchObject({
      id: 'm',
      attempts: 3,
      lastError: 'PushError: HTTP 503 Service Unavailable',
    });
    const stats = (await queue.stats()).push;
    expect(stats.hooks).toMatchObject({ failed: 3, succeeded: 0 });
    expect(stats.hooks.lastError).toBe('PushError: HTTP 503 Service Unavailable');
  });

  it('a receiver that does not answer in time fails the attempt; the next one can succeed', async () => {
    const target = await receiver((_r, index) => (index === 0 ? 'hang' : { status: 204 }));
    const queue = await memoryQueue();
    // Long enough for the answered attempt to beat it on a loaded machine (CI runs files side
    // by side on 2 cores): only the hung one may time out.
    await queue.configureTopic('hooks', {
      push: { url: target.url, secret: SECRET, timeoutMs: 1000 },
    });
    await queue.schedule({
      topic: 'hooks',
      id: 'm',
      payload: 'x',
      backoff: { type: 'fixed', delayMs: 50 },
    });
    await waitFor(async () => (await statusOf(queue, 'm')) === 'acked');
    expect(target.requests).toHaveLength(2);
    expect(target.requests[1].at - target.requests[0].at).toBeGreaterThanOrEqual(1000);
    // The hung attempt's reason is what a message keeps (seen with one that dies of it).
    target.behaviour = () => 'hang';
    await queue.schedule({ topic: 'hooks', id: 'n', payload: 'y', maxAttempts: 1 });
    await waitFor(async () => (await statusOf(queue, 'n')) === 'dead');
    const dead = await queue.deadLetters('hooks');
    expect(dead.map((m) => m.lastError)).toEqual(['PushError: no answer within 1000 ms']);
  });

  it('a 101 Switching Protocols answer fails the attempt and holds no slot or close()', async () => {
    const target = await receiver(() => ({
      status: 101,
      headers: { upgrade: 'websocket', connection: 'upgrade' },
    }));
    const queue = await memoryQueue();
    await queue.configureTopic('hooks', {
      push: { url: target.url, secret: SECRET, concurrency: 1 },
    });
    await queue.schedule({ topic: 'hooks', id: 'm', payload: 'x', maxAttempts: 1 });
    await waitFor(async () => (await statusOf(queue, 'm')) === 'dead');
    const [dead] = await queue.deadLetters('hooks');
    expect(dead.lastError).toBe('PushError: HTTP 101 Switching Protocols');
    // Its slot is free: the next message is pushed (and fails the same way).
    await queue.schedule({ topic: 'hooks', id: 'n', payload: 'y', maxAttempts: 1 });
    await waitFor(async () => (await statusOf(queue, 'n')) === 'dead');
    expect((await queue.stats()).push.hooks).toMatchObject({ inFlight: 0, failed: 2 });
    await queue.close();
  });

  it('a receiver that cannot be reached fails the attempt with the network error', async () => {
    const gone = await startReceiver();
    const url = gone.url;
    await gone.close();
    const queue = await memoryQueue();
    await queue.configureTopic('hooks', { push: { url, secret: SECRET } });
    await queue.schedule({ topic: 'hooks', id: 'm', payload: 1, maxAttempts: 1 });
    await waitFor(async () => (await statusOf(queue, 'm')) === 'dead');
    const [dead] = await queue.deadLetters('hooks');
    expect(dead.lastError).toMatch(/^PushError: ECONNREFUSED/);
  });

  it('follows 307/308 to the same origin only; other redirects fail the attempt', async () => {
    const elsewhere = await receiver(() => ({ status: 200 }), 'localhost');
    const target = await receiver((request) => {
      if (request.path === '/start') return { status: 307, headers: { location: '/moved' } };
      if (request.path === '/moved') return { status: 200 };
      if (request.path === '/found') return { status: 302, headers: { location: '/moved' } };
      if (request.path === '/away') {
        return { status: 308, headers: { location: `${elsewhere.url}/stolen` } };
      }
      return { status: 404 };
    });
    const queue = await memoryQueue();
    const cases = [
      ['start', 'acked', undefined],
      ['found', 'dead', /^PushError: HTTP 302 Found: redirect not followed/],
      ['away', 'dead', /^PushError: HTTP 308 Permanent Redirect: redirect to another origin not/],
    ] as const;
    for (const [path, status, reason] of cases) {
      await queue.configureTopic(path, { push: { url: `${target.url}/${path}`, secret: SECRET } });
      await queue.schedule({ topic: path, id: path, payload: path, maxAttempts: 1 });
      await waitFor(async () => (await statusOf(queue, path)) === status);
      if (reason !== undefined) {
        expect((await queue.deadLetters(path))[0].lastError).toMatch(reason);
      }
    }
    // The followed redirect sent the same signed body.
    const moved = target.requests.find((r) => r.path === '/moved')!;
    expect(moved.headers[PUSH_HEADER.id]).toBe('start');
    expect(() => verifyPush(moved, { secret: SECRET })).not.toThrow();
    // Nothing reached the other host.
    expect(elsewhere.requests).toEqual([]);
  });

  it('holds at most the target concurrency of requests at once', async () => {
    const target = await receiver(() => ({ status: 200, delayMs: 40 }));
    const queue = await memoryQueue();
    await queue.configureTopic('hooks', {
      push: { url: target.url, secret: SECRET, concurrency: 3 },
    });
    await queue.scheduleMany(
      Array.from({ length: 24 }, (_, i) => ({ topic: 'hooks', id: `m${i}`, payload: i })),
    );
    await target.waitFor(24);
    await waitFor(async () => (await queue.topicInfo('hooks')).pending === 0);
    expect(target.maxInFlight()).toBe(3);
    expect(new Set(target.requests.map((r) => r.headers[PUSH_HEADER.id])).size).toBe(24);
  });

  it('holds at most push.maxConnections connections over all topics; a request past them fails saying so', async () => {
    const target = await receiver(() => 'hang');
    // Each topic's fault is kept: stats' lastError is overwritten by the next failure (a timeout).
    const reasons: string[] = [];
    const queue = await track(
      DelayQueue.open({
        store: new MemoryStore(),
        push: { ...LOOPBACK, maxConnections: 4 },
        onFault: (fault) => {
          if (fault.code === 'ERR_TICKWHEEL_PUSH_FAILED') reasons.push(fault.message);
        },
      }),
    );
    for (const topic of ['a', 'b']) {
      await queue.configureTopic(topic, {
        push: { url: `${target.url}/${topic}`, secret: SECRET, concurrency: 10, timeoutMs: 300 },
      });
      await queue.scheduleMany(
        Array.from({ length: 10 }, (_, i) => ({ topic, id: `${topic}${i}`, payload: i })),
      );
    }
    await waitFor(() =>
      reasons.some((reason) =>
        /no push connection free within 300 ms: all 4 \(push.maxConnections\)/.test(reason),
      ),
    );
    expect(target.maxInFlight()).toBe(4);
  });

  it('a run of target changes never has more than concurrency requests under way', async () => {
    const target = await receiver(() => 'hang');
    const queue = await memoryQueue();
    const push = (k: number) => ({
      url: target.url,
      secret: SECRET,
      concurrency: 2,
      headers: { 'x-version': String(k) },
    });
    await queue.configureTopic('hooks', { push: push(0) });
    await queue.scheduleMany(
      Array.from({ length: 20 }, (_, i) => ({ topic: 'hooks', id: `m${i}`, payload: i })),
    );
    await target.waitFor(2);
    Pushers.closeGraceMs = 300;
    try {
      for (let k = 1; k <= 5; k++) await queue.configureTopic('hooks', { push: push(k) });
      // The last target pushes once the first one's requests were abandoned after the grace.
      await waitFor(() => target.requests.some((r) => r.headers['x-version'] === '5'));
    } finally {
      Pushers.closeGraceMs = 5_000;
    }
    expect(target.maxInFlight()).toBe(2);
    // The targets in between never started.
    expect(new Set(target.requests.map((r) => r.headers['x-version']))).toEqual(
      new Set(['0', '5']),
    );
  });

  it('pause stops pushes; resume, a new target and removing it apply at once', async () => {
    const first = await receiver();
    const second = await receiver();
    const queue = await memoryQueue();
    await queue.configureTopic('hooks', { push: { url: first.url, secret: SECRET } });
    await queue.configureTopic('other', { push: { url: first.url, secret: SECRET } });
    await queue.pause('hooks');
    await queue.schedule({ topic: 'hooks', id: 'a', payload: 1 });
    // A message of another topic, due after it, is pushed; the paused one is not.
    await queue.schedule({ topic: 'other', id: 'later', payload: 0, delayMs: 50 });
    await first.waitFor(1);
    expect(first.requests.map((r) => r.headers[PUSH_HEADER.id])).toEqual(['later']);
    await queue.resume('hooks');
    await first.waitFor(2);
    expect(first.requests[1].headers[PUSH_HEADER.id]).toBe('a');
    await queue.configureTopic('hooks', {
      push: { url: second.url, secret: SECRET, method: 'PUT' },
    });
    await queue.schedule({ topic: 'hooks', id: 'b', payload: 2 });
    await second.waitFor(1);
    expect(second.requests[0]).toMatchObject({ method: 'PUT' });
    expect(second.requests[0].headers[PUSH_HEADER.id]).toBe('b');
    // Counted across the change of target; forgotten once the target is removed.
    await waitFor(async () => (await queue.stats()).push.hooks?.succeeded === 2);
    await queue.configureTopic('hooks', { push: null });
    expect((await queue.topicInfo('hooks')).push).toBeNull();
    await waitFor(async () => (await queue.stats()).push.hooks === undefined);
    expect((await queue.stats()).push.other).toMatchObject({ succeeded: 1 });
    await queue.schedule({ topic: 'hooks', id: 'c', payload: 3 });
    // Not pushed: a consumer takes it.
    expect((await queue.receive('hooks', { waitMs: 5_000 })).map((m) => m.id)).toEqual(['c']);
    expect(first.requests).toHaveLength(2);
    expect(second.requests).toHaveLength(1);
  });

  it('the target is durable; close() with a request under way ends at once and loses nothing', async () => {
    const dir = tempDir();
    const target = await receiver(() => 'hang');
    let queue = await DelayQueue.open({ dir, push: LOOPBACK });
    await queue.configureTopic('hooks', {
      push: { url: target.url, secret: SECRET, timeoutMs: 60_000 },
    });
    // The target (and its secret) is in push.json, readable by its owner only; topics.json (read
    // strictly by versions before push delivery) does not have it.
    expect(statSync(join(dir, 'push.json')).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(dir, 'push.json'), 'utf8')).toContain(SECRET);
    expect(readFileSync(join(dir, 'topics.json'), 'utf8')).not.toContain('push');
    await queue.schedule({ topic: 'hooks', id: 'm', payload: 'kept' });
    await target.waitFor(1);
    const started = Date.now();
    Pushers.closeGraceMs = 200;
    try {
      await queue.close();
    } finally {
      Pushers.closeGraceMs = 5_000;
    }
    // The grace, not the request's 60 s timeout.
    expect(Date.now() - started).toBeLessThan(5_000);
    target.behaviour = () => ({ status: 200 });
    queue = await track(DelayQueue.open({ dir, push: LOOPBACK }));
    expect((await queue.topicInfo('hooks')).push?.url).toBe(`${target.url}/`);
    // The abandoned attempt was nacked: the message comes back after its backoff and is pushed.
    await waitFor(async () => (await statusOf(queue, 'm')) === 'acked', { timeoutMs: 15_000 });
    expect(target.requests.map((r) => r.headers[PUSH_HEADER.attempt])).toEqual(['1', '2']);
    expect(target.requests[1].body.toString()).toBe('"kept"');
  });

  it('a change of target or a close lets requests under way finish: no attempt is lost', async () => {
    const target = await receiver(() => ({ status: 200, delayMs: 300 }));
    const queue = await memoryQueue();
    await queue.configureTopic('hooks', { push: { url: target.url, secret: SECRET } });
    await queue.schedule({ topic: 'hooks', id: 'a', payload: 1, maxAttempts: 1 });
    await target.waitFor(1);
    // Changed while the request runs: it finishes and acks; nothing is pushed twice.
    await queue.configureTopic('hooks', {
      push: { url: target.url, secret: 'a-new-secret-0123456789', concurrency: 2 },
    });
    await waitFor(async () => (await statusOf(queue, 'a')) === 'acked');
    await queue.schedule({ topic: 'hooks', id: 'b', payload: 2, maxAttempts: 1 });
    await target.waitFor(2);
    // A close with a request under way waits for its answer (within the grace): it is acked.
    const acked: string[] = [];
    const failed: string[] = [];
    queue.events.on('acked', (event: { id: string }) => acked.push(event.id));
    queue.events.on('failed', (event: { id: string }) => failed.push(event.id));
    await queue.close();
    expect(target.requests.map((r) => r.headers[PUSH_HEADER.id])).toEqual(['a', 'b']);
    expect(target.requests[1].headers[PUSH_HEADER.attempt]).toBe('1');
    expect(acked).toEqual(['b']);
    expect(failed).toEqual([]);
  });

  it('no listener warnings at high concurrency; a target may set its own User-Agent', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    try {
      const target = await receiver(() => ({ status: 200, delayMs: 30 }));
      const queue = await memoryQueue();
      await queue.configureTopic('hooks', {
        push: {
          url: target.url,
          secret: SECRET,
          concurrency: 40,
          headers: { 'User-Agent': 'billing-hooks/2', constructor: 'x' },
        },
      });
      await queue.scheduleMany(
        Array.from({ length: 80 }, (_, i) => ({ topic: 'hooks', id: `m${i}`, payload: i })),
      );
      await target.waitFor(80);
      await waitFor(async () => (await queue.topicInfo('hooks')).pending === 0);
      expect(target.maxInFlight()).toBeGreaterThan(10);
      expect(target.requests[0].headers['user-agent']).toBe('billing-hooks/2');
      expect(target.requests[0].headers.constructor).toBe('x');
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings).toEqual([]);
  });

  it('a request Node will not build fails its attempt, and nothing else', async () => {
    // Past the checks (a target read from an older store, say): no crash, no stray timer.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    onTestFinished(() => void vi.useRealTimers());
    const guard = new PushGuard(LOOPBACK);
    const agents = new PushAgents(1, guard);
    const sender = new PushSender(
      {
        url: 'http://127.0.0.1:9/',
        method: 'POST',
        headers: { 'x-note': 'price in €' },
        timeoutMs: 50,
        concurrency: 1,
        secret: SECRET,
      },
      Date.now,
      guard,
      agents,
    );
    const message = { id: 'm', topic: 't', payload: 1, deliverAt: 0, attempts: 1, receipt: 'r' };
    await expect(sender.send(message)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_PUSH_FAILED',
      message: expect.stringMatching(/^the request cannot be sent/) as string,
    });
    // No timer left to fire when the request's timeout would have come.
    expect(vi.getTimerCount()).toBe(0);
    agents.close();
  });

  it('refuses bad targets with named errors and stores nothing', async () => {
    const queue = await memoryQueue();
    const bad: Array<[unknown, RegExp]> = [
      [{ url: 'ftp://x/', secret: SECRET }, /http: or https:/],
      [{ url: 'not a url', secret: SECRET }, /not a URL/],
      [{ url: 'http://user:pw@x/', secret: SECRET }, /user name or password/],
      [{ url: 'http://x/' }, /push.secret must be a string of 16 to 512/],
      [{ url: 'http://x/', secret: 'short' }, /16 to 512 characters .* got 5 characters/],
      [{ url: 'http://x/', secret: SECRET, method: 'GET' }, /push.method must be one of/],
      [{ url: 'http://x/', secret: SECRET, timeoutMs: 0 }, /push.timeoutMs/],
      [{ url: 'http://x/', secret: SECRET, concurrency: 1.5 }, /push.concurrency/],
      [{ url: 'http://x/', secret: SECRET, headers: { Host: 'y' } }, /Host is set by/],
      [{ url: 'http://x/', secret: SECRET, headers: { 'tickwheel-id': 'y' } }, /is set by/],
      [{ url: 'http://x/', secret: SECRET, headers: { a: 'b\r\nc: d' } }, /no line breaks/],
      // Node sends Latin-1 only; the value is never quoted back (headers hold credentials).
      [{ url: 'http://x/', secret: SECRET, headers: { a: 'price in €' } }, /^(?!.*€).*Latin-1/],
      [{ url: 'http://x/', secret: SECRET, headers: { 'a b': 'c' } }, /not a header name/],
      [{ url: 'http://x/', secret: SECRET, extra: 1 }, /unknown field "extra" of push/],
      ['http://x/', /push must be an object/],
    ];
    for (const [push, message] of bad) {
      const attempt = queue.configureTopic('hooks', { push } as never);
      await expect(attempt).rejects.toThrow(message);
      await expect(attempt).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
    }
    expect((await queue.topicInfo('hooks')).push).toBeNull();
    expect(await queue.topicList()).toEqual({ topics: [] });
  });
});

describe('verifyPush', () => {
  async function signedRequest() {
    const target = await receiver();
    const queue = await memoryQueue();
    await queue.configureTopic('t', { push: { url: target.url, secret: SECRET } });
    await queue.schedule({ topic: 't', id: 'i', payload: { a: 1 } });
    await target.waitFor(1);
    return target.requests[0];
  }

  it('accepts the request as sent and refuses it changed, re-signed or replayed', async () => {
    const request = await signedRequest();
    const sentAt = Number(request.headers[PUSH_HEADER.timestamp]) * 1000;
    const clock = { now: () => sentAt + 1000 };
    expect(verifyPush(request, { secret: SECRET, ...clock }).id).toBe('i');
    // A secret being changed: either one is accepted.
    expect(verifyPush(request, { secret: ['another-secret-1234567', SECRET], ...clock }).id).toBe(
      'i',
    );
    // Fetch-style headers.
    const headers = new Headers(request.headers as Record<string, string>);
    expect(verifyPush({ headers, body: request.body }, { secret: SECRET, ...clock }).topic).toBe(
      't',
    );
    const refused: Array<
      [Parameters<typeof verifyPush>[0], Partial<Parameters<typeof verifyPush>[1]>, RegExp]
    > = [
      [{ ...request, body: Buffer.from('{"a":2}') }, {}, /does not match/],
      [{ ...request, body: Buffer.from('{ "a": 1 }') }, {}, /does not match/],
      [request, { secret: 'another-secret-1234567' }, /does not match/],
      [
        { ...request, headers: { ...request.headers, [PUSH_HEADER.id]: 'j' } },
        {},
        /does not match/,
      ],
      [
        { ...request, headers: { ...request.headers, [PUSH_HEADER.topic]: 'u' } },
        {},
        /does not match/,
      ],
      [
        { ...request, headers: { ...request.headers, [PUSH_HEADER.attempt]: '9' } },
        {},
        /does not match/,
      ],
      [
        { ...request, headers: { ...request.headers, [PUSH_HEADER.deliverAt]: '1' } },
        {},
        /does not match/,
      ],
      [request, { now: () => sentAt + 301_000 }, /more than 300 s from this clock/],
      [request, { now: () => sentAt - 301_000 }, /more than 300 s/],
      [request, { now: () => sentAt + 11_000, toleranceSeconds: 10 }, /more than 10 s/],
      [
        { ...request, headers: { ...request.headers, [PUSH_HEADER.signature]: undefined } },
        {},
        /headers are all needed/,
      ],
      [
        { ...request, headers: { ...request.headers, [PUSH_HEADER.timestamp]: '1e9' } },
        {},
        /not whole seconds/,
      ],
      [
        { ...request, headers: { ...request.headers, [PUSH_HEADER.signature]: 'v0=abc' } },
        {},
        /does not match/,
      ],
    ];
    for (const [given, options, message] of refused) {
      let thrown: unknown;
      try {
        verifyPush(given, { secret: SECRET, ...clock, ...options });
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(TickwheelError);
      expect(thrown).toMatchObject({
        code: 'ERR_TICKWHEEL_PUSH_SIGNATURE',
        name: 'PushSignatureError',
      });
      expect((thrown as Error).message).toMatch(message);
    }
    expect(() => verifyPush(request, { secret: [] })).toThrow(TypeError);
  });

  it('refuses arguments that cannot be a request or its options with a named error, not a 401', () => {
    const request = { headers: { [PUSH_HEADER.id]: 'i' }, body: '{}' };
    const bad: Array<[unknown, unknown, string, RegExp]> = [
      [request, {}, 'ERR_TICKWHEEL_INVALID_OPTION', /^verifyPush: options\.secret must be/],
      [request, undefined, 'ERR_TICKWHEEL_INVALID_OPTION', /^verifyPush: options must be/],
      [request, { secret: [''] }, 'ERR_TICKWHEEL_INVALID_OPTION', /options\.secret/],
      [request, { secret: SECRET, now: 5 }, 'ERR_TICKWHEEL_INVALID_CALLBACK', /options\.now/],
      [null, { secret: SECRET }, 'ERR_TICKWHEEL_INVALID_OPTION', /^verifyPush: request must be/],
      [undefined, { secret: SECRET }, 'ERR_TICKWHEEL_INVALID_OPTION', /request must be/],
      [{ body: '{}' }, { secret: SECRET }, 'ERR_TICKWHEEL_INVALID_OPTION', /without headers/],
      [
        { headers: request.headers, body: { parsed: true } },
        { secret: SECRET },
        'ERR_TICKWHEEL_INVALID_OPTION',
        /^verifyPush: request\.body must be the raw body/,
      ],
    ];
    for (const [given, options, code, message] of bad) {
      let thrown: unknown;
      try {
        verifyPush(given as never, options as never);
      } catch (err) {
        thrown = err;
      }
      expect(thrown, String(message)).toBeInstanceOf(TickwheelError);
      expect(thrown).toMatchObject({ name: 'TickwheelTypeError', code });
      expect((thrown as Error).message).toMatch(message);
    }
    expect(() => verifyPush(request, { secret: SECRET, toleranceSeconds: NaN })).toThrowError(
      expect.objectContaining({
        name: 'TickwheelRangeError',
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
      }),
    );
  });
});
