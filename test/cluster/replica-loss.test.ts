/**
 * A queue with durability 'replicated' (what the default, 'auto', chooses there) through a primary failover that leaves a
 * shard without a replica (the killed primary is not started again): a real 3 + 3 Valkey
 * Cluster, one primary SIGKILLed, its replica promoted.
 *
 * Found by the cluster benchmark: node-redis's Cluster client sends WAIT and WAITAOF to every
 * primary (their command tips say all_shards) and answers the least count, so once one shard
 * had no replica every durability wait, on any partition, held every primary's connection for
 * its whole timeout and failed: the node stopped scheduling, firing and renewing leases, on
 * every shard, until a replica came back. The waits now go to the slot's own primary; a
 * primary without replicas fails schedules at once with ERR_TICKWHEEL_NOT_DURABLE, and its
 * partitions are owned and delivered as before.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import type { Queue } from '../../src/queue/api.js';
import { Valkey } from '../../src/valkey/connection.js';
import { metaKey } from '../../src/cluster/keys.js';
import { placeOf } from '../../src/partitioned/record.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { cli, installed, startCluster } from '../../scripts/valkey.mjs';
import { waitFor } from '../support/wait-for.js';

interface Server {
  port: number;
  binary: string;
  crash(): Promise<void>;
}

const PARTITIONS = 12;

describe.runIf(installed('valkey-server'))('a replicated queue through a primary failover', () => {
  let cluster: { urls: string[]; primaries(): Server[]; stop(): Promise<void> };
  let queue: Queue;
  let valkey: Valkey;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicas: 1 });
    // A replica is promoted only once it has synced with its primary.
    const until = Date.now() + 30_000;
    const synced = () =>
      cluster.primaries().every((p) => {
        const info = cli(p.binary, p.port, 'INFO', 'replication');
        return /slave0:.*state=online/.test(info);
      });
    while (!synced()) {
      if (Date.now() > until) throw new Error('the replicas did not sync');
      await sleep(200);
    }
    queue = await DelayQueue.open({
      redis: cluster.urls,
      queue: 'failover',
      partitions: PARTITIONS,
      leaseMs: 1_000,
      durability: 'replicated',
      onError: () => {},
    });
    valkey = await Valkey.connect(cluster.urls);
  }, 60_000);

  afterAll(async () => {
    await queue?.close();
    await valkey?.close();
    await cluster?.stop();
  });

  it('keeps scheduling and delivering on every shard; the shard left without a replica says NOT_DURABLE at once', async () => {
    const delivered = new Map<string, number>();
    const consumer = queue.consume('t', (m) => void delivered.set(m.id, Date.now()), {
      concurrency: 8,
    });
    // One id per partition and round, so that every partition is tried each time.
    const idsOf = (prefix: string) => {
      const ids = new Map<number, string>();
      for (let i = 0; ids.size < PARTITIONS; i++) {
        const { partition } = placeOf(`${prefix}${i}`, PARTITIONS);
        if (!ids.has(partition)) ids.set(partition, `${prefix}${i}`);
      }
      return [...ids.values()];
    };
    const before = await Promise.all(
      idsOf('a').map((id) => queue.schedule({ topic: 't', id, payload: 1 })),
    );
    expect(before).toHaveLength(PARTITIONS);

    const [victim] = cluster.primaries();
    await victim.crash();
    // The Cluster promotes the replica (cluster-node-timeout 2 s); then every partition must
    // answer again: a schedule resolves, or (the promoted primary has no replica) fails fast.
    const deadline = Date.now() + 30_000;
    let round = 0;
    let outcome: Array<{ id: string; ok: boolean; code?: string; ms: number }> = [];
    for (;;) {
      round++;
      outcome = await Promise.all(
        idsOf(`b${round}-`).map(async (id) => {
          const started = Date.now();
          try {
            await queue.schedule({ topic: 't', id, payload: 2 });
            return { id, ok: true, ms: Date.now() - started };
          } catch (err) {
            return {
              id,
              ok: false,
              code: (err as { code?: string }).code,
              ms: Date.now() - started,
            };
          }
        }),
      );
      const settled = outcome.every(
        (o) => o.ok || (o.code === 'ERR_TICKWHEEL_NOT_DURABLE' && o.ms < 2_000),
      );
      if (settled || Date.now() > deadline) break;
      await sleep(500);
    }
    const ok = outcome.filter((o) => o.ok);
    const notDurable = outcome.filter((o) => o.code === 'ERR_TICKWHEEL_NOT_DURABLE');
    expect(ok.length + notDurable.length).toBe(PARTITIONS);
    // Two shards of three still have a replica: their partitions take schedules.
    expect(ok.length).toBeGreaterThan(0);
    // The shard without a replica refuses durability, quickly (no 5 s wait on anything).
    expect(notDurable.length).toBeGreaterThan(0);
    for (const o of notDurable) expect(o.ms).toBeLessThan(2_000);
    // Each refusal is on a partition whose primary has no replica now; each success on one
    // that has.
    for (const o of outcome) {
      const { partition } = placeOf(o.id, PARTITIONS);
      const { count: replicas } = await valkey.replicas(metaKey('failover', partition));
      expect(replicas).toBe(o.ok ? 1 : 0);
    }

    // Everything acknowledged is delivered, on every shard, the promoted one included.
    const wanted = [...before.map((b) => b.id), ...ok.map((o) => o.id)];
    await waitFor(() => wanted.every((id) => delivered.has(id)), { timeoutMs: 30_000 });
    await consumer.close();
  }, 90_000);
});
