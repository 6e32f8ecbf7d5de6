/**
 * Topic controls on a queue on Valkey (src/queue/topics.ts through src/partitioned/backend.ts): a
 * pause made on one node stops deliveries on every node, a rate limit is one token bucket for
 * all of them (tw_tokens), settings outlive the nodes, and stored settings that cannot be read
 * stop a node from opening rather than unpausing a topic. Real Valkey, real time: the bounds
 * checked are the limit's own (never more deliveries than the bucket allows), with slack only
 * in the direction that cannot hide a broken limit. A node's events report its own operations.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Valkey } from '../../src/valkey/connection.js';
import { pushKey, topicsKey } from '../../src/cluster/keys.js';
import { DelayQueue } from '../../src/delay-queue.js';
import type { QueueEvent } from '../../src/queue/events.js';
import { PUSH_HEADER, verifyPush } from '../../src/protocol/push-signature.js';
import { startReceiver } from '../queue/push-receiver.js';
import { waitFor } from '../support/wait-for.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startServer } from '../../scripts/valkey.mjs';

describe.runIf(installed('valkey-server'))('topic controls on Valkey', () => {
  let server: { url: string; stop(): Promise<void> };
  const queues: DelayQueue[] = [];
  let run = 0;

  beforeAll(async () => {
    server = await startServer({ binary: 'valkey-server' });
  }, 30_000);

  afterAll(async () => {
    for (const queue of queues) await queue.close().catch(() => {});
    await server?.stop();
  });

  async function open(queue: string): Promise<DelayQueue> {
    const node = await DelayQueue.open({
      redis: server.url,
      queue,
      partitions: 4,
      windowMs: 1_000,
      leaseMs: 1_000,
      durability: 'async',
      // The test's push receivers are on loopback.
      push: { allow: ['127.0.0.1'] },
      onError: () => {},
    });
    queues.push(node);
    return node;
  }

  async function scheduleNow(queue: DelayQueue, topic: string, n: number): Promise<void> {
    await queue.scheduleMany(
      Array.from({ length: n }, (_, i) => ({ topic, payload: i, id: `${topic}-${i}` })),
    );
  }

  it('a pause made on one node stops every node; a resume starts them again', async () => {
    const name = `pause-${run++}`;
    const a = await open(name);
    const b = await open(name);
    expect(await a.pause('jobs')).toMatchObject({ topic: 'jobs', paused: true });
    // b reads settings again at its next heartbeat (leaseMs / 4).
    await waitFor(async () => (await b.topicInfo('jobs')).paused);
    await scheduleNow(a, 'jobs', 3);
    expect(await b.receive('jobs', { max: 10, waitMs: 1_500 })).toEqual([]);
    expect(await a.receive('jobs', { max: 10 })).toEqual([]);
    expect((await b.topicInfo('jobs')).pending).toBe(3);
    // A long poll under way on b ends with the messages once a resumes the topic.
    // It waits in b's topic gate from the call on (the gate registers it before its first await).
    const polling = b.receive('jobs', { max: 10, waitMs: 8_000 });
    await a.resume('jobs');
    const got = await polling;
    expect(got.length).toBeGreaterThan(0);
    expect(got.length + (await b.receive('jobs', { max: 10, waitMs: 2_000 })).length).toBe(3);
  }, 30_000);

  it('a rate limit is one bucket for all nodes', async () => {
    const name = `rate-${run++}`;
    const a = await open(name);
    const b = await open(name);
    await a.configureTopic('jobs', { rateLimit: { perSecond: 5, burst: 5 } });
    await waitFor(async () => (await b.topicInfo('jobs')).rateLimit !== null);
    await scheduleNow(a, 'jobs', 60);
    const delivered: number[] = [];
    const started = Date.now();
    const consumers = [a, b].map((node) =>
      node.consume('jobs', () => void delivered.push(Date.now()), { concurrency: 8 }),
    );
    // The burst and two seconds of refill: the limit is not "nothing", and a bucket refilled
    // too fast (or not shared) would get there too early for the bound below.
    await waitFor(() => delivered.length >= 15, { timeoutMs: 20_000 });
    await Promise.all(consumers.map((consumer) => consumer.close()));
    const elapsedMs = Date.now() - started;
    // A bucket of 5, refilled at 5 a second: at most 5 + 5 * elapsed seconds, whichever node.
    expect(delivered.length).toBeLessThanOrEqual(5 + Math.ceil((5 * elapsedMs) / 1000));
  }, 30_000);

  it('settings outlive the nodes, and bad ones are refused as on the embedded queue', async () => {
    const name = `durable-${run++}`;
    const a = await open(name);
    await a.pause('jobs');
    await a.configureTopic('slow', { rateLimit: { perSecond: 0.5 } });
    await expect(a.configureTopic('jobs', { rateLimit: { perSecond: 0 } })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    await expect(a.configureTopic('jobs', { paused: 1 } as never)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    await a.close();
    const b = await open(name);
    expect((await b.topicList()).topics).toEqual([
      { topic: 'jobs', paused: true, rateLimit: null, push: null, pending: 0, dead: 0 },
      {
        topic: 'slow',
        paused: false,
        rateLimit: { perSecond: 0.5, burst: 1 },
        push: null,
        pending: 0,
        dead: 0,
      },
    ]);
  }, 30_000);

  it('a push target set on one node is pushed by every node, each message acked', async () => {
    const name = `push-${run++}`;
    const target = await startReceiver((_request, index) =>
      // Every fifth first attempt fails: retried through the backoff, by whichever node.
      index % 5 === 0 ? { status: 500, body: 'try again' } : { status: 200, delayMs: 5 },
    );
    try {
      const a = await open(name);
      const b = await open(name);
      const secret = 'cluster-push-secret-0123456789';
      await a.configureTopic('hooks', {
        push: { url: target.url, secret, concurrency: 4, timeoutMs: 2_000 },
      });
      // Kept apart from the other settings, which nodes before push delivery read strictly.
      const valkey = await Valkey.connect(server.url, 5_000);
      try {
        const settings = (await valkey.command(topicsKey(name), [
          'HGETALL',
          topicsKey(name),
        ])) as Record<string, string>;
        expect(Object.keys(settings ?? {})).toEqual([]);
        const targets = (await valkey.command(pushKey(name), ['HGETALL', pushKey(name)])) as Record<
          string,
          string
        >;
        expect(Object.keys(targets)).toEqual(['hooks']);
      } finally {
        await valkey.close();
      }
      // b reads settings again at its next heartbeat and starts pushing too.
      await waitFor(async () => (await b.topicInfo('hooks')).push !== null);
      expect((await b.topicInfo('hooks')).push).toMatchObject({ url: `${target.url}/` });
      const ids = Array.from({ length: 40 }, (_, i) => `m${i}`);
      await a.scheduleMany(
        ids.map((id, i) => ({
          topic: 'hooks',
          id,
          payload: i,
          backoff: { type: 'fixed' as const, delayMs: 100 },
        })),
      );
      await waitFor(async () => (await a.topicInfo('hooks')).pending === 0, { timeoutMs: 20_000 });
      const succeeded = target.requests.filter((_r, index) => index % 5 !== 0);
      expect(new Set(succeeded.map((r) => r.headers[PUSH_HEADER.id]))).toEqual(new Set(ids));
      for (const request of target.requests)
        expect(() => verifyPush(request, { secret })).not.toThrow();
      // Both nodes pushed (their own counts).
      const pushedBy = await Promise.all(
        [a, b].map(async (node) => {
          const push = (await node.stats()).push;
          return push.hooks?.succeeded ?? 0;
        }),
      );
      expect(pushedBy[0] + pushedBy[1]).toBe(succeeded.length);
      expect(pushedBy.every((n) => n > 0)).toBe(true);
      await b.configureTopic('hooks', { push: null });
      await waitFor(async () => (await a.topicInfo('hooks')).push === null);
      await a.schedule({ topic: 'hooks', id: 'pulled', payload: 'x' });
      expect((await a.receive('hooks', { waitMs: 2_000 })).map((m) => m.id)).toEqual(['pulled']);
    } finally {
      await target.close();
    }
  }, 40_000);

  it("a node's events: its schedules, its deliveries and their acks and nacks", async () => {
    const node = await open(`events-${run++}`);
    const seen: string[] = [];
    node.events.on('event', (event: QueueEvent) =>
      seen.push(`${event.type} ${event.id} ${event.topic}`),
    );
    await node.schedule({ topic: 'jobs', payload: 1, id: 'e1' });
    await node.scheduleMany([{ topic: 'jobs', payload: 2, id: 'e2' }]);
    const [first] = await node.receive('jobs', { waitMs: 5_000 });
    await node.nack(first.receipt, { delayMs: 60_000, reason: 'later' });
    const handled: string[] = [];
    const consumer = node.consume('jobs', (message) => void handled.push(message.id));
    await waitFor(() => seen.some((line) => line.startsWith('acked')));
    await consumer.close();
    // The consumer's ack is counted with the nack made by hand.
    expect(await node.stats()).toMatchObject({ acked: 1, nacked: 1 });
    expect(seen).toEqual([
      'scheduled e1 jobs',
      'scheduled e2 jobs',
      `delivered ${first.id} jobs`,
      `failed ${first.id} jobs`,
      `delivered ${handled[0]} jobs`,
      `acked ${handled[0]} jobs`,
    ]);
  }, 30_000);

  it("a node's events: a nack's last attempt is dead; visibility timeouts its owner handles; cancels", async () => {
    const node = await open(`events-${run++}`);
    const seen: string[] = [];
    const all: QueueEvent[] = [];
    node.events.on('event', (event: QueueEvent) => {
      all.push(event);
      seen.push(
        `${event.type} ${event.id} #${event.attempts}${event.reason === undefined ? '' : ` (${event.reason})`}`,
      );
    });
    const fast = { type: 'fixed', delayMs: 0 } as const;
    // Nacked on its only attempt: dead, not failed.
    await node.schedule({ topic: 'last', payload: 1, id: 'n1', maxAttempts: 1 });
    const [n1] = await node.receive('last', { waitMs: 5_000 });
    expect(await node.nack(n1.receipt, { reason: 'broken' })).toBe(true);
    // Never acked: its visibility runs out twice (failed, then dead), found by the owner (this
    // node owns every partition).
    await node.schedule({ topic: 'slow', payload: 2, id: 'v1', maxAttempts: 2, backoff: fast });
    expect(
      (await node.receive('slow', { waitMs: 5_000, visibilityMs: 300 })).map((m) => m.id),
    ).toEqual(['v1']);
    expect(
      (await node.receive('slow', { waitMs: 8_000, visibilityMs: 300 })).map((m) => m.id),
    ).toEqual(['v1']);
    await waitFor(() => seen.includes('dead v1 #2 (visibility timeout: not acknowledged in time)'));
    // Cancelled while scheduled.
    await node.schedule({ topic: 'later', payload: 3, id: 'c1', delayMs: 60_000 });
    expect(await node.cancel('c1')).toBe(true);
    expect(await node.cancel('c1')).toBe(false);
    expect(seen).toEqual([
      'scheduled n1 #0',
      'delivered n1 #1',
      'dead n1 #1 (broken)',
      'scheduled v1 #0',
      'delivered v1 #1',
      'failed v1 #1 (visibility timeout: not acknowledged in time)',
      'delivered v1 #2',
      'dead v1 #2 (visibility timeout: not acknowledged in time)',
      'scheduled c1 #0',
      'cancelled c1 #0',
    ]);
    // 'failed' carries the retry's due time, which the next delivery was for; 'dead' the last
    // delivery's; 'cancelled' the due time it had.
    const v1 = all.filter((e) => e.id === 'v1');
    expect(v1[2].deliverAt).toBeGreaterThanOrEqual(v1[1].deliverAt);
    expect(v1[3].deliverAt).toBe(v1[2].deliverAt);
    expect(v1[4].deliverAt).toBe(v1[3].deliverAt);
    const c1 = all.filter((e) => e.id === 'c1');
    expect(c1[1].deliverAt).toBe(c1[0].deliverAt);
    expect((await node.get('v1'))?.status).toBe('dead');
    expect(await node.stats()).toMatchObject({ expired: 2, dead: 2, cancelled: 1 });
  }, 40_000);

  it("a cancel's event is of the message it cancelled, not of one given its id right after", async () => {
    const node = await open(`events-${run++}`);
    const all: QueueEvent[] = [];
    node.events.on('event', (event: QueueEvent) => all.push(event));
    const first = await node.schedule({ topic: 'old', payload: 1, id: 'r1', delayMs: 60_000 });
    // The new message's schedule goes out right behind the cancel, on the same connection.
    const cancelling = node.cancel('r1');
    const second = node.schedule({ topic: 'new', payload: 2, id: 'r1', delayMs: 120_000 });
    expect(await cancelling).toBe(true);
    const made = await second;
    expect(made.deliverAt).toBeGreaterThan(first.deliverAt);
    expect(all.filter((event) => event.type === 'cancelled')).toEqual([
      expect.objectContaining({ id: 'r1', topic: 'old', deliverAt: first.deliverAt, attempts: 0 }),
    ]);
    expect(await node.get('r1')).toMatchObject({ status: 'scheduled', deliverAt: made.deliverAt });
  });

  it('stored settings that cannot be read stop a node from opening', async () => {
    const valkey = await Valkey.connect(server.url);
    try {
      for (const [field, value] of [
        ['jobs|paused', '"x"'],
        ['jobs|paused', 'garbage'],
        ['jobs|rateLimit', '{"perSecond":0}'],
        ['jobs|rateLimit', '[]'],
        ['jobs|colour', 'true'],
        ['bad topic|paused', 'true'],
      ]) {
        const name = `corrupt-${run++}`;
        await valkey.command(topicsKey(name), ['HSET', topicsKey(name), field, value]);
        await expect(open(name), `${field} = ${value}`).rejects.toMatchObject({
          code: 'ERR_TICKWHEEL_CORRUPT',
        });
      }
    } finally {
      await valkey.close();
    }
  }, 30_000);

  it('two nodes changing different settings of a topic at once both land', async () => {
    const name = `concurrent-${run++}`;
    const a = await open(name);
    const b = await open(name);
    // b has not seen a's limit when it pauses: each writes only the setting it changes.
    await Promise.all([a.configureTopic('jobs', { rateLimit: { perSecond: 3 } }), b.pause('jobs')]);
    const c = await open(name);
    expect(await c.topicInfo('jobs')).toMatchObject({
      paused: true,
      rateLimit: { perSecond: 3, burst: 3 },
    });
  }, 30_000);

  it('closing a node ends its receives waiting in the gate at once', async () => {
    const node = await open(`close-${run++}`);
    await node.pause('jobs');
    // Waiting in the gate from the call on; a minute, twice the test's time, unless ended.
    const waiting = node.receive('jobs', { waitMs: 60_000 });
    await node.close();
    expect(await waiting).toEqual([]);
  }, 30_000);
});
