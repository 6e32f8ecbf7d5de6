/**
 * Cluster nodes (src/partitioned/backend.ts, each under a DelayQueue) over a real Valkey Cluster of 3
 * primaries + 3 replicas:
 * the partitions are shared out among the nodes, a message scheduled through one node is
 * delivered to a consumer of another, on time and never early, and a node that closes hands its
 * partitions over at once.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import type { TopicPage } from '../../src/protocol/model.js';
import { createServer } from '../../src/server/index.js';
import { partitionsOf } from '../../src/partitioned/rendezvous.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startCluster } from '../../scripts/valkey.mjs';
import { nodeOf } from './checking.js';
import { waitFor } from '../support/wait-for.js';

const PARTITIONS = 16;

describe.runIf(installed('valkey-server'))('cluster nodes on a Valkey Cluster', () => {
  let cluster: { urls: string[]; stop(): Promise<void> };
  const nodes: DelayQueue[] = [];
  const errors: unknown[] = [];

  const open = async (nodeId: string) => {
    const node = await DelayQueue.open({
      redis: cluster.urls,
      queue: 'shop',
      partitions: PARTITIONS,
      windowMs: 1_000,
      horizonMs: 2_000,
      leaseMs: 1_000,
      durability: 'replicated',
      nodeId,
      onError: (err) => errors.push(err),
    });
    nodes.push(node);
    return node;
  };

  /** Waits until each live node owns exactly the partitions it wins among the live nodes. */
  async function settled(live: DelayQueue[], timeoutMs = 8_000) {
    const ids = live.map((n) => nodeOf(n).nodeId);
    const wanted = ids.map((id) => JSON.stringify(partitionsOf(id, PARTITIONS, ids)));
    return waitFor(
      () => {
        const owned = live.map((n) => nodeOf(n).ownedPartitions());
        if (owned.every((share, i) => JSON.stringify(share) === wanted[i])) return owned;
        throw new Error(`partitions not settled: ${JSON.stringify(owned)}`);
      },
      { timeoutMs, intervalMs: 50 },
    );
  }

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicas: 1 });
  }, 60_000);

  afterAll(async () => {
    for (const node of nodes) await node.close().catch(() => {});
    await cluster?.stop();
  });

  it('shares the partitions out, each to one node', async () => {
    const [a, b, c] = [await open('node-a'), await open('node-b'), await open('node-c')];
    const owned = await settled([a, b, c]);
    for (const share of owned) expect(share.length).toBeGreaterThan(0);
    expect({ members: nodeOf(a).members, partitions: nodeOf(a).settings.partitions }).toEqual({
      members: ['node-a', 'node-b', 'node-c'],
      partitions: PARTITIONS,
    });
  }, 30_000);

  it('delivers what one node scheduled to a consumer of another, when due and never before', async () => {
    const [a, b] = nodes;
    const start = Date.now();
    const sent = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        a.schedule({
          topic: 'invoice',
          id: `inv-${i}`,
          payload: { i },
          deliverAt: start + 800 + (i % 50) * 20,
        }),
      ),
    );
    const due = new Map(sent.map((r) => [r.id, r.deliverAt]));
    const seen = new Map<string, number>();
    while (seen.size < sent.length && Date.now() < start + 15_000) {
      const got = await b.receive('invoice', { max: 100, waitMs: 500 });
      const at = Date.now();
      for (const m of got) {
        expect(seen.has(m.id), `${m.id} twice`).toBe(false);
        seen.set(m.id, at);
        expect(m.payload).toEqual({ i: Number(m.id.slice(4)) });
        expect(await b.ack(m.receipt)).toBe(true);
      }
    }
    expect(seen.size).toBe(sent.length);
    let worst = 0;
    for (const [id, at] of seen) {
      const deliverAt = due.get(id) as number;
      expect(at, `${id} early`).toBeGreaterThanOrEqual(deliverAt);
      worst = Math.max(worst, at - deliverAt);
    }
    expect(worst).toBeLessThan(2_000);
    expect(await a.get('inv-0')).toMatchObject({
      id: 'inv-0',
      status: 'acked',
      attempts: 1,
    });
    expect((await nodeOf(b).inspector.counts()).totals.scheduled).toBe(0);
  }, 30_000);

  it('retries a nacked delivery on any node', async () => {
    const [a, b, c] = nodes;
    await a.schedule({ topic: 'mail', id: 'mail-1', payload: 'hi', maxAttempts: 3 });
    let [first] = await b.receive('mail', { waitMs: 5_000 });
    expect(first.attempts).toBe(1);
    expect(await b.nack(first.receipt, { delayMs: 100, reason: 'smtp down' })).toBe(true);
    expect(await c.get('mail-1')).toMatchObject({ lastError: 'smtp down', attempts: 1 });
    expect(await b.ack(first.receipt)).toBe(false);
    [first] = await c.receive('mail', { waitMs: 5_000 });
    expect(first).toMatchObject({ id: 'mail-1', attempts: 2 });
    expect(await c.ack(first.receipt)).toBe(true);
    expect(await c.ack('c99.1.nope')).toBe(false);
    await expect(c.ack(42 as never)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_MESSAGE',
    });
  }, 20_000);

  it('consumes with the same Worker as the embedded queue: each message once, handler failures retried', async () => {
    const [a, b] = nodes;
    const seen: string[] = [];
    const failed = new Set<string>();
    const errors: unknown[] = [];
    let consumer: { close(): Promise<void> } | undefined;
    const all = new Promise<void>((resolve) => {
      consumer = a.consume(
        'work',
        (m) => {
          // The first delivery of every tenth message fails: it comes back as attempt 2.
          if (Number(m.id.slice(5)) % 10 === 0 && !failed.has(m.id)) {
            failed.add(m.id);
            throw new Error('not yet');
          }
          seen.push(m.id);
          if (seen.length === 50) resolve();
        },
        { concurrency: 4, onError: (err: unknown) => errors.push(err) },
      );
    });
    await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        b.schedule({
          topic: 'work',
          id: `work-${i}`,
          payload: i,
          backoff: { type: 'fixed', delayMs: 20 },
        }),
      ),
    );
    await all;
    await consumer!.close();
    expect(new Set(seen).size).toBe(50);
    expect(failed.size).toBe(5);
    expect(errors).toHaveLength(5);
  }, 20_000);

  it('hands a closing node’s partitions to the others at once', async () => {
    const [a, b, c] = nodes;
    const before = Date.now();
    await c.close();
    await settled([a, b], 5_000);
    expect(Date.now() - before).toBeLessThan(5_000);
    // Still delivering: scheduled on b, received on a.
    await b.schedule({ topic: 'after', id: 'after-close', payload: 1, delayMs: 50 });
    const [m] = await a.receive('after', { waitMs: 5_000 });
    expect(m?.id).toBe('after-close');
    expect(errors).toEqual([]);
  }, 20_000);

  it('reads the partitions’ counts a few at a time, one read for any number of callers, and one topic’s alone', async () => {
    const node = await open('counting');
    const far = Date.now() + 3_600_000;
    const topics = Array.from({ length: 40 }, (_, i) => `tenant-${i}`);
    await node.scheduleMany(topics.map((topic) => ({ topic, payload: 1, deliverAt: far })));
    // Every read of one partition's counts, and how many were under way at once at most.
    const inspector = nodeOf(node).inspector as unknown as {
      driver: object;
      countsReads: { driver: object };
    };
    const driver = inspector.driver as { counts(p: number): Promise<Record<string, number>> };
    let running = 0;
    let most = 0;
    let reads = 0;
    inspector.driver = inspector.countsReads.driver = new Proxy(driver, {
      get(target, name, receiver) {
        if (name !== 'counts') return Reflect.get(target, name, receiver);
        return async (partition: number) => {
          running++;
          reads++;
          most = Math.max(most, running);
          try {
            return await driver.counts(partition);
          } finally {
            running--;
          }
        };
      },
    });
    try {
      const stats = await node.stats({ topics: 0 });
      expect(stats.topicCount).toBeGreaterThanOrEqual(40);
      expect(reads).toBe(PARTITIONS);
      expect(most).toBeLessThanOrEqual(4);
      // Many callers at once (a dashboard, /metrics, pollers of /v1/stats): one read runs, the
      // callers that came during it share the next one.
      reads = 0;
      const first = node.stats({ topics: 0 });
      const during = await Promise.all([
        ...Array.from({ length: 6 }, () => node.stats({ topics: 0 })),
        node.topicList({ limit: 1000 }),
        node.dueTimeline([60_000]),
      ]);
      expect((await first).topicCount).toBeGreaterThanOrEqual(40);
      for (const stats of during.slice(0, 6)) {
        expect((stats as { topicCount: number }).topicCount).toBeGreaterThanOrEqual(40);
      }
      const listed = (during[6] as TopicPage).topics.map((info) => info.topic);
      expect(listed).toEqual(expect.arrayContaining(topics));
      expect(during[7]).toMatchObject({ counts: [0, 40] });
      expect(reads).toBe(2 * PARTITIONS);
      expect(most).toBeLessThanOrEqual(4);
      // One topic's counts are read for that topic only.
      reads = 0;
      expect(await node.topicInfo('tenant-7')).toMatchObject({ pending: 1 });
      expect(await node.pause('tenant-8')).toMatchObject({ pending: 1, paused: true });
      expect(reads).toBe(0);
      // GET /healthz asks for no counts at all.
      const server = await createServer({ queue: node });
      try {
        const health = await server.inject({ method: 'GET', url: '/healthz' });
        expect(health.json()).toEqual({ status: 'ok' });
        expect(reads).toBe(0);
      } finally {
        await server.close();
      }
    } finally {
      inspector.driver = inspector.countsReads.driver = driver;
    }
  }, 20_000);
});
