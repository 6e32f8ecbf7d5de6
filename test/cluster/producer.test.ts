/**
 * The producer side of a cluster node (src/partitioned/producer.ts) on real servers: group commit
 * (one function call per partition per event-loop turn), dedup, cancel, reschedule, get, bad
 * input refused before any write, and durability: a resolved schedule under 'replicated' or
 * 'fsynced' is on the replica when the promise resolves, and one that cannot reach a replica
 * says ERR_TICKWHEEL_NOT_DURABLE.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClusterValkey as Valkey } from '../../src/cluster/functions.js';
import { partitionPrefix } from '../../src/cluster/keys.js';
import type { Durability } from '../../src/cluster/durability.js';
import { Producer } from '../../src/partitioned/producer.js';
import { parseLocated, placeOf } from '../../src/partitioned/record.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startReplicated } from '../../scripts/valkey.mjs';
import { checking } from './checking.js';
import { valkeyDriver } from './with-valkey.js';

const PARTITIONS = 16;

interface Set {
  primary: { url: string; kill(): Promise<void> };
  replicas: Array<{ url: string; kill(): Promise<void> }>;
  stop(): Promise<void>;
}

describe.runIf(installed('valkey-server'))('cluster producer on Valkey with a replica', () => {
  let set: Set;
  let valkey: Valkey;
  let replica: Valkey;
  const producer = (durability: Durability, queue = 'orders', durabilityTimeoutMs = 5_000) =>
    checking(
      new Producer(valkeyDriver(valkey, queue, durability, durabilityTimeoutMs), {
        partitions: PARTITIONS,
        windowMs: 30_000,
        maxPayloadBytes: 1 << 20,
      }),
    );
  const fcalls = async () => {
    const stats = String(await valkey.command('x', ['INFO', 'commandstats']));
    return Number(/cmdstat_fcall:calls=(\d+)/.exec(stats)?.[1] ?? 0);
  };

  beforeAll(async () => {
    set = await startReplicated({ binary: 'valkey-server', replicas: 1 });
    valkey = await Valkey.connect(set.primary.url);
    await valkey.loadLibrary();
    replica = await Valkey.connect(set.replicas[0].url);
  }, 60_000);

  afterAll(async () => {
    await replica?.close().catch(() => {});
    await valkey?.close();
    await set?.stop();
  });

  it('shares one durability wait among the partitions of a primary', async () => {
    const waits = async () => {
      const stats = String(await valkey.command('x', ['INFO', 'commandstats']));
      return Number(/cmdstat_waitaof:calls=(\d+)/.exec(stats)?.[1] ?? 0);
    };
    const p = producer('fsynced', 'orders-shared');
    const before = await waits();
    // Every partition gets messages in one event-loop turn: 16 writes, then waits.
    await Promise.all(
      Array.from({ length: 160 }, (_, i) =>
        p.schedule({ topic: 'invoice', id: `s-${i}`, payload: { i }, delayMs: 60_000 }),
      ),
    );
    // Not one WAITAOF per partition batch (16): a wait covers every write answered before it
    // was sent, so the first one, and one more for what came meanwhile, at most.
    expect((await waits()) - before).toBeLessThanOrEqual(2);
  });

  it.each(['replicated', 'fsynced'] as const)(
    'with %s, every resolved schedule is already on the replica',
    async (durability) => {
      const p = producer(durability, `orders-${durability}`);
      const before = await fcalls();
      const results = await Promise.all(
        Array.from({ length: 1_000 }, (_, i) =>
          p.schedule({ topic: 'invoice', id: `m-${i}`, payload: { i }, delayMs: 60_000 + i }),
        ),
      );
      // Group commit: one call per partition for the whole turn, not one per message.
      expect((await fcalls()) - before).toBeLessThanOrEqual(PARTITIONS);
      for (const [i, { id }] of results.entries()) {
        const { partition, bucket } = placeOf(id, PARTITIONS);
        const key = `${partitionPrefix(`orders-${durability}`, partition)}id:${bucket}`;
        const state = await replica.command(key, ['HGET', key, id], true);
        expect(String(state)).toMatch(/^S\|w\d+\|\d+\|[\d.]+\|0\|invoice$/);
        expect(id).toBe(`m-${i}`);
      }
    },
  );

  it('answers a second schedule of a pending id with the first, and cancels and reschedules', async () => {
    const p = producer('replicated');
    const first = await p.schedule({ topic: 'invoice', id: 'dup', payload: 1, delayMs: 10_000 });
    const again = await p.schedule({ topic: 'invoice', id: 'dup', payload: 2, delayMs: 99_000 });
    expect(again).toEqual({ ...first, deduplicated: true });
    expect(await p.get('dup')).toMatchObject({
      id: 'dup',
      topic: 'invoice',
      status: 'scheduled',
      attempts: 0,
      deliverAt: first.deliverAt,
    });
    const later = Date.now() + 3_600_000;
    expect(await p.reschedule('dup', { deliverAt: later })).toBe(true);
    expect((await p.get('dup'))?.deliverAt).toBe(later);
    expect(await p.cancelGiving('dup')).toBeDefined();
    expect(await p.cancelGiving('dup')).toBeUndefined();
    expect(await p.get('dup')).toMatchObject({ status: 'cancelled' });
    expect(await p.reschedule('dup', { delayMs: 5 })).toBe(false);
  });

  it('makes an id when none is given, unique across calls', async () => {
    const p = producer('async');
    const ids = await Promise.all(
      Array.from({ length: 200 }, () => p.schedule({ topic: 't', payload: null })),
    );
    expect(new Set(ids.map((r) => r.id)).size).toBe(200);
  });

  it('gives a message without an id a located id: no id state, spread over the partitions', async () => {
    const queue = 'located';
    const p = producer('replicated', queue);
    const before = await fcalls();
    const deliverAt = Date.now() + 3_600_000;
    const results = await p.scheduleMany(
      Array.from({ length: 640 }, (_, i) => ({ topic: 'invoice', payload: { i }, deliverAt })),
    );
    // Runs of 128 to each partition in turn: five calls, on five partitions.
    expect((await fcalls()) - before).toBe(5);
    const partitions = new Set<number>();
    for (const { id } of results) {
      const located = parseLocated(id);
      expect(located, id).toBeDefined();
      partitions.add(located!.partition);
      expect(placeOf(id, PARTITIONS).partition).toBe(located!.partition);
    }
    expect(partitions.size).toBe(5);
    expect(new Set(results.map((r) => r.id)).size).toBe(640);
    // Nothing but the segments: not one id state was written, on the primary or the replica.
    for (const server of [valkey, replica]) {
      for (const partition of partitions) {
        const prefix = partitionPrefix(queue, partition);
        const keys = (await server.command(prefix, ['KEYS', `${prefix}id:*`], true)) as string[];
        expect(keys).toEqual([]);
      }
    }
    // Each is found by its id: get, the payload through a reschedule (its record copied with
    // its id written in), cancel.
    const { id } = results[7];
    expect(await p.get(id)).toMatchObject({ id, topic: 'invoice', status: 'scheduled', deliverAt });
    expect(await p.reschedule(id, { deliverAt: deliverAt + 1 })).toBe(true);
    expect(await p.get(id)).toMatchObject({ status: 'scheduled', deliverAt: deliverAt + 1 });
    expect(await p.cancelGiving(id)).toBeDefined();
    expect(await p.cancelGiving(id)).toBeUndefined();
    expect(await p.get(id)).toMatchObject({ status: 'cancelled' });
    // An id that looks located but names no message is simply not found.
    const forged = id.replace(/\.[^.]+$/, '.forged');
    expect(await p.get(forged)).toBeUndefined();
    expect(await p.cancelGiving(results[8].id.replace(/\.[^.]+$/, '.forged'))).toBeUndefined();
    expect(await p.get(results[8].id)).toMatchObject({ status: 'scheduled' });
    // Only the id made names the message: not one with a zero in front of its index, which
    // would otherwise move it under another name; nor an index past any bitmap (not an error).
    const alias = results[9].id.replace(/\.(\d+)\.([^.]+)$/, '.0$1.$2');
    expect(alias).not.toBe(results[9].id);
    expect(await p.get(alias)).toBeUndefined();
    expect(await p.reschedule(alias, { delayMs: 5 })).toBe(false);
    expect(await p.cancelGiving(alias)).toBeUndefined();
    expect(await p.get(results[9].id)).toMatchObject({ status: 'scheduled', deliverAt });
    const far = results[9].id.replace(/\.(\d+)\.([^.]+)$/, '.9999999999.$2');
    expect(await p.get(far)).toBeUndefined();
    expect(await p.cancelGiving(far)).toBeUndefined();
  });

  it('says ERR_TICKWHEEL_NOT_DURABLE when no replica acknowledges in time', async () => {
    await set.replicas[0].kill();
    const p = producer('replicated', 'orders', 300);
    await expect(
      p.schedule({ topic: 'invoice', id: 'lonely', payload: 1, delayMs: 1_000 }),
    ).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_NOT_DURABLE',
      // The id, and what a server with no replica at all needs.
      message: expect.stringMatching(/^lonely reached the primary.*durability 'auto'/),
    });
    // The write reached the primary: scheduling the same id again is a dedup hit.
    expect(await producer('async').get('lonely')).toMatchObject({ status: 'scheduled' });
  });
});
