/**
 * Where pushes may go (src/queue/push-guard.ts) and what comes back from them: a target at an
 * internal address is refused unless the queue allows it, when it is set and again at every
 * connection (a name that resolves elsewhere later, DNS rebinding, is caught there); a failed
 * answer's body never reaches a message's lastError, its dead letter or the stats. Against a
 * real receiver on 127.0.0.1 whose answers hold a secret.
 */

import type { LookupAddress } from 'node:dns';
import { describe, expect, it } from 'vitest';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import {
  PushGuard,
  PushNotAllowedError,
  checkPushOptions,
  internalKind,
} from '../../src/queue/push-guard.js';
import { PushAgents, PushSender } from '../../src/queue/push-sender.js';
import { startReceiver, type Receiver } from './push-receiver.js';
import { useClosing } from '../support/closing.js';
import { waitFor } from '../support/wait-for.js';

const SECRET = 'a-secret-of-some-length-0123456789';
/** What the receiver's answers hold: it must never come back out of the queue. */
const LEAK = 'internal-admin-token-5f2c9e';
const track = useClosing();

function leakyReceiver(status: number): Promise<Receiver> {
  return track(
    startReceiver(() => ({ status, body: `{"token":"${LEAK}","note":"internal service"}` })),
  );
}

const message = { id: 'm', topic: 't', payload: 1, deliverAt: 0, attempts: 1, receipt: 'r' };

function target(url: string) {
  return {
    url,
    method: 'POST' as const,
    headers: {},
    timeoutMs: 5000,
    concurrency: 1,
    secret: SECRET,
  };
}

describe('push targets at internal addresses', () => {
  it('are refused by default when set, by address or by a name that resolves to one', async () => {
    const receiver = await leakyReceiver(200);
    const queue = await track(DelayQueue.open({ store: new MemoryStore() }));
    const port = receiver.port;
    for (const url of [
      receiver.url,
      `http://localhost:${port}/`,
      `http://[::1]:${port}/`,
      `http://[::ffff:127.0.0.1]:${port}/`,
      `http://0.0.0.0:${port}/`,
      'http://169.254.169.254/latest/meta-data/',
      'http://10.1.2.3/',
      'http://[fd00::1]/',
    ]) {
      const attempt = queue.configureTopic('hooks', { push: { url, secret: SECRET } });
      await expect(attempt, url).rejects.toBeInstanceOf(PushNotAllowedError);
      await expect(attempt).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_PUSH_NOT_ALLOWED',
        message: expect.stringMatching(/push: \{ allow: \[.*--push-allow/) as string,
      });
    }
    expect((await queue.topicInfo('hooks')).push).toBeNull();
    await queue.schedule({ topic: 'hooks', id: 'x', payload: 1 });
    expect(receiver.requests).toHaveLength(0);
  });

  it('are pushed to when the queue allows them', async () => {
    const receiver = await leakyReceiver(200);
    const queue = await track(
      DelayQueue.open({ store: new MemoryStore(), push: { allow: ['127.0.0.0/8'] } }),
    );
    await queue.configureTopic('hooks', { push: { url: receiver.url, secret: SECRET } });
    await queue.schedule({ topic: 'hooks', id: 'a', payload: 1 });
    await waitFor(async () => (await queue.get('a'))?.status === 'acked');
    expect(receiver.requests).toHaveLength(1);
  });

  it('keep a failed answer to its status: the body is in no message, dead letter or stat', async () => {
    const receiver = await leakyReceiver(500);
    const queue = await track(
      DelayQueue.open({ store: new MemoryStore(), push: { allow: ['127.0.0.1'] } }),
    );
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', onWarning);
    try {
      await queue.configureTopic('hooks', { push: { url: receiver.url, secret: SECRET } });
      await queue.schedule({
        topic: 'hooks',
        id: 'm',
        payload: 1,
        maxAttempts: 2,
        backoff: { type: 'fixed', delayMs: 10 },
      });
      await waitFor(async () => (await queue.get('m'))?.status === 'dead');
    } finally {
      process.off('warning', onWarning);
    }
    expect(receiver.requests).toHaveLength(2);
    const info = await queue.get('m');
    expect(info?.lastError).toBe('PushError: HTTP 500 Internal Server Error');
    const everything = JSON.stringify([
      info,
      await queue.deadLetters('hooks'),
      await queue.stats(),
      await queue.topicList(),
      warnings,
    ]);
    expect(everything).toContain('HTTP 500 Internal Server Error');
    expect(everything).not.toContain(LEAK);
  });
});

describe('the check at connection (DNS rebinding)', () => {
  /** A resolver that answers a public address first, then the receiver's loopback one. */
  function rebinding(): { resolve: (host: string) => Promise<LookupAddress[]>; calls: string[] } {
    const calls: string[] = [];
    return {
      calls,
      resolve: async (host) => {
        calls.push(host);
        return [{ address: calls.length === 1 ? '93.184.215.14' : '127.0.0.1', family: 4 }];
      },
    };
  }

  it('refuses a connection to the private address a name resolves to by then', async () => {
    const resolver = rebinding();
    const guard = new PushGuard({}, resolver.resolve);
    await expect(guard.checkTarget('http://rebind.example/')).resolves.toBeUndefined();
    const looked = await new Promise<{ err: NodeJS.ErrnoException | null; found: unknown }>(
      (resolve) =>
        guard.lookup('rebind.example', { all: true }, (err, found) => resolve({ err, found })),
    );
    expect(looked.err).toBeInstanceOf(PushNotAllowedError);
    expect(looked.err).toMatchObject({ code: 'ERR_TICKWHEEL_PUSH_NOT_ALLOWED' });
    expect(resolver.calls).toEqual(['rebind.example', 'rebind.example']);
  });

  it('is the lookup the request connects with: no request reaches the receiver', async () => {
    const receiver = await leakyReceiver(200);
    const resolver = rebinding();
    const guard = new PushGuard({}, resolver.resolve);
    const url = `http://rebind.example:${receiver.port}/`;
    await guard.checkTarget(url);
    const agents = new PushAgents(4, guard);
    const sender = new PushSender(target(url), Date.now, guard, agents);
    try {
      await expect(sender.send(message)).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_PUSH_FAILED',
        message: expect.stringMatching(
          /^ERR_TICKWHEEL_PUSH_NOT_ALLOWED: .*rebind\.example \(127\.0\.0\.1\)/,
        ) as string,
      });
    } finally {
      agents.close();
    }
    expect(receiver.requests).toHaveLength(0);
    // The same name allowed by the queue: the lookup's address is the one connected to.
    const allowing = new PushGuard({ allow: ['rebind.example'] }, async () => [
      { address: '127.0.0.1', family: 4 },
    ]);
    const allowingAgents = new PushAgents(4, allowing);
    const allowed = new PushSender(target(url), Date.now, allowing, allowingAgents);
    try {
      await allowed.send(message);
    } finally {
      allowingAgents.close();
    }
    expect(receiver.requests).toHaveLength(1);
  });

  it('checks a literal address before each request (Node connects to one without a lookup)', async () => {
    const receiver = await leakyReceiver(200);
    const guard = new PushGuard();
    const agents = new PushAgents(4, guard);
    const sender = new PushSender(target(receiver.url), Date.now, guard, agents);
    try {
      await expect(sender.send(message)).rejects.toMatchObject({
        message: expect.stringMatching(
          /^ERR_TICKWHEEL_PUSH_NOT_ALLOWED: push target 127\.0\.0\.1 is a loopback address/,
        ) as string,
      });
    } finally {
      agents.close();
    }
    expect(receiver.requests).toHaveLength(0);
  });
});

describe('internal addresses', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.100.100.200', 'private (shared)'],
    ['169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
    ['fd00:ec2::254', 'unique-local'],
    ['fc00::1', 'unique-local'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['::ffff:127.0.0.1', 'loopback (IPv4 inside IPv6)'],
    ['::ffff:a00:1', 'private (IPv4 inside IPv6)'],
    ['64:ff9b::169.254.169.254', 'link-local (IPv4 inside IPv6)'],
    ['::127.0.0.1', 'IPv4-compatible'],
    ['64:ff9b::8.8.8.8', undefined],
    ['8.8.8.8', undefined],
    ['172.32.0.1', undefined],
    ['2606:4700:4700::1111', undefined],
    ['::ffff:8.8.8.8', undefined],
  ])('%s is %s', (address, kind) => {
    expect(internalKind(address)).toBe(kind);
  });

  it('are allowed by CIDR block, address or host name', () => {
    const guard = new PushGuard({ allow: ['10.1.0.0/16', '::1', 'Receiver.Internal'] });
    expect(() => guard.checkAddress('h', '10.1.200.3')).not.toThrow();
    expect(() => guard.checkAddress('h', '::ffff:10.1.0.1')).not.toThrow();
    expect(() => guard.checkAddress('h', '10.2.0.1')).toThrow(PushNotAllowedError);
    expect(() => guard.checkAddress('h', '::1')).not.toThrow();
    expect(() => guard.checkAddress('h', '127.0.0.1')).toThrow(PushNotAllowedError);
    expect(guard.allowsHost('receiver.internal')).toBe(true);
    expect(guard.allowsHost('other.internal')).toBe(false);
  });

  it('refuses a bad push option by name', () => {
    for (const bad of [
      5,
      { allow: 'x' },
      { allow: ['10.0.0.0/33'] },
      { allow: ['a b'] },
      { deny: [] },
    ]) {
      expect(() => checkPushOptions(bad), JSON.stringify(bad)).toThrow(
        expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
      );
    }
    expect(checkPushOptions({ allow: ['fd00::/8', '127.0.0.1', 'hooks.internal'] })).toEqual({
      allow: ['fd00::/8', '127.0.0.1', 'hooks.internal'],
    });
  });
});
