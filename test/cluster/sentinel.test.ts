/**
 * A queue on a Valkey primary with two replicas, found through three Sentinels
 * (`redis+sentinel://...`): it works as on any Valkey, and when the primary is killed with
 * SIGKILL, Sentinel promotes the replica and the queue carries on there: every schedule that
 * was acknowledged before the kill (durability 'replicated': WAIT 1) is delivered, none early,
 * and schedules after the failover work again within seconds.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSentinelUrl } from '../../src/valkey/urls.js';
import { DelayQueue, type Queue } from '../../src/delay-queue.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startSentinel } from '../../scripts/valkey.mjs';

describe('redis+sentinel:// URLs', () => {
  it('name the Sentinels, the monitored name and the data nodes’ credentials', () => {
    expect(parseSentinelUrl('redis+sentinel://10.0.0.1:26379,10.0.0.2:26380/orders')).toEqual({
      name: 'orders',
      sentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: '10.0.0.2', port: 26380 },
      ],
    });
    expect(parseSentinelUrl('redis+sentinel://app:s%40cret@sentinel-a/mymaster')).toEqual({
      name: 'mymaster',
      sentinels: [{ host: 'sentinel-a', port: 26379 }],
      username: 'app',
      password: 's@cret',
    });
    expect(parseSentinelUrl('redis://127.0.0.1:6379')).toBeUndefined();
    expect(() => parseSentinelUrl('redis+sentinel://host:99999/m')).toThrow(/host:port/);
  });

  it('a redis:// URL whose path is not a database number is refused, its password starred', async () => {
    for (const redis of ['redis://:hunter2@127.0.0.1:6379/abc', 'redis://127.0.0.1/0/x']) {
      const err = (await DelayQueue.open({ redis, queue: 'q' }).catch(
        (e: unknown) => e,
      )) as Error & {
        code?: string;
      };
      expect(err.code, redis).toBe('ERR_TICKWHEEL_INVALID_OPTION');
      expect(err.message).toMatch(/path must be a database number/);
      expect(err.message).not.toContain('hunter2');
    }
  });

  it('stand alone: another URL beside one is refused', async () => {
    await expect(
      DelayQueue.open({ redis: ['redis+sentinel://127.0.0.1:1/m', 'redis://127.0.0.1:2'] }),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
  });
});

describe.runIf(installed('valkey-server'))('a queue through Sentinel, across a failover', () => {
  let setup: {
    primary: { port: number; kill(): Promise<void> };
    sentinels: Array<{ port: number }>;
    primaryPort(): number;
    stop(): Promise<void>;
  };
  let queue: Queue;
  const errors: unknown[] = [];

  beforeAll(async () => {
    // Two replicas: after the failover one is left, for 'replicated' to wait on.
    setup = await startSentinel({ replicas: 2, sentinels: 3 });
    const hosts = setup.sentinels.map((s) => `127.0.0.1:${s.port}`).join(',');
    queue = await DelayQueue.open({
      redis: `redis+sentinel://${hosts}/master`,
      queue: 'watched',
      partitions: 8,
      windowMs: 1_000,
      horizonMs: 2_000,
      leaseMs: 1_000,
      durability: 'replicated',
      onError: (err) => errors.push(err),
    });
  }, 60_000);

  afterAll(async () => {
    await queue?.close().catch(() => {});
    await setup?.stop();
  });

  it('schedules and delivers through the primary Sentinel names', async () => {
    const { deliverAt } = await queue.schedule({ topic: 't', payload: 'one', delayMs: 200 });
    const [message] = await queue.receive('t', { waitMs: 8_000 });
    expect(Date.now()).toBeGreaterThanOrEqual(deliverAt);
    expect(message.payload).toBe('one');
    expect(await queue.ack(message.receipt)).toBe(true);
  }, 20_000);

  it('loses nothing acknowledged when the primary is killed, and carries on on the new one', async () => {
    const before = setup.primaryPort();
    const start = Date.now();
    const acknowledged = await queue.scheduleMany(
      Array.from({ length: 100 }, (_, i) => ({
        topic: 'failover',
        id: `f-${i}`,
        payload: { i },
        deliverAt: start + 3_000 + i * 20,
      })),
    );
    expect(acknowledged).toHaveLength(100);
    await setup.primary.kill();
    const killedAt = Date.now();
    // Sentinel notices (down after 1 s) and promotes the replica.
    while (setup.primaryPort() === before && Date.now() - killedAt < 20_000) await sleep(100);
    expect(setup.primaryPort()).not.toBe(before);

    // Schedules work again on the new primary (the first tries may fail while it changes).
    let after: { id: string; deliverAt: number } | undefined;
    while (after === undefined && Date.now() - killedAt < 30_000) {
      try {
        after = await queue.schedule({
          topic: 'failover',
          id: 'after',
          payload: 'x',
          delayMs: 100,
        });
      } catch {
        await sleep(200);
      }
    }
    expect(after).toBeDefined();
    const resumedIn = Date.now() - killedAt;

    const seen = new Map<string, number>();
    const until = Date.now() + 30_000;
    while (seen.size < 101 && Date.now() < until) {
      let batch: Awaited<ReturnType<Queue['receive']>> = [];
      try {
        batch = await queue.receive('failover', { max: 100, waitMs: 1_000 });
      } catch {
        await sleep(200);
      }
      for (const message of batch) {
        expect(Date.now()).toBeGreaterThanOrEqual(message.deliverAt);
        if (message.id !== 'after')
          expect(message.payload).toEqual({ i: Number(message.id.slice(2)) });
        seen.set(message.id, (seen.get(message.id) ?? 0) + 1);
        await queue.ack(message.receipt).catch(() => false);
      }
    }
    const missing = acknowledged.filter(({ id }) => !seen.has(id)).map(({ id }) => id);
    expect(missing).toEqual([]);
    expect(seen.has('after')).toBe(true);
    console.log(`sentinel failover: schedules resumed ${resumedIn} ms after the kill`);
  }, 90_000);
});
