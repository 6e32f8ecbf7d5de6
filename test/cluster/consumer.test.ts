/**
 * The cluster consumer (src/partitioned/consumer.ts) on a real Valkey: a partition whose "ready"
 * notification was lost (as in a failover) is still found while other partitions, hinted by
 * their notifications, never run dry: every partition is asked at least every `rescanMs`. The
 * hinted partitions are asked at once, and a notification that comes while a take is under
 * way keeps its partition hinted. What it keeps per topic goes once it can decide nothing, so
 * topics named per order or tenant do not grow a node.
 */

import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { Consumer } from '../../src/partitioned/consumer.js';
import { partitionPrefix } from '../../src/cluster/keys.js';
import { encodeRecord, placeOf } from '../../src/partitioned/record.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed } from '../../scripts/valkey.mjs';
import { valkeyDriver, withValkey } from './with-valkey.js';

const QUEUE = 'hints';
const PARTITIONS = 2;

describe.runIf(installed('valkey-server'))('the cluster consumer', () => {
  const servers = withValkey();

  /** `count` fresh ids that live in `partition`. */
  function idsIn(partition: number, count: number, prefix: string): string[] {
    const out: string[] = [];
    for (let i = 0; out.length < count; i++) {
      const id = `${prefix}-${i}`;
      if (placeOf(id, PARTITIONS).partition === partition) out.push(id);
    }
    return out;
  }

  /** Puts a ready message straight into a partition's keys, as tw_fire leaves one. */
  async function ready(partition: number, id: string, index: number): Promise<void> {
    const { bucket } = placeOf(id, PARTITIONS);
    const prefix = partitionPrefix(QUEUE, partition);
    const key = (suffix: string) => `${prefix}${suffix}`;
    const record = encodeRecord(
      {
        id,
        topic: 't',
        maxAttempts: 3,
        backoff: undefined,
        payloadKind: 1,
        payload: Buffer.from('"x"'),
      },
      bucket,
    );
    const at = key('s:n0');
    // node-redis sends a Buffer argument as it is; command() is typed for strings only.
    await servers.valkey.command(at, ['RPUSH', at, record as unknown as string]);
    await servers.valkey.command(key(`id:${bucket}`), [
      'HSET',
      key(`id:${bucket}`),
      id,
      `R|n0|${index}|${Date.now()}|0|t`,
    ]);
    await servers.valkey.command(key('ready:t'), ['RPUSH', key('ready:t'), `${bucket}:${id}`]);
  }

  it('finds a partition whose notification was lost while hinted ones keep it busy', async () => {
    const busy = idsIn(0, 300, 'busy');
    const [quiet] = idsIn(1, 1, 'quiet');
    for (let i = 0; i < busy.length; i++) await ready(0, busy[i], i);
    await ready(1, quiet, 0);
    // The consumer's clock is Date.now(): moved by hand, 10 ms a receive.
    vi.useFakeTimers({ toFake: ['Date'] });
    onTestFinished(() => void vi.useRealTimers());
    const consumer = new Consumer(valkeyDriver(servers.valkey, QUEUE), {
      partitions: PARTITIONS,
      windowMs: 1_000,
      visibilityMs: 60_000,
      rescanMs: 500,
    });
    // Partition 0 said so; partition 1's notification never came.
    consumer.onReady(0, 't');
    const order: string[] = [];
    while (!order.includes(quiet) && order.length < busy.length + 1) {
      for (const message of await consumer.receive('t', { max: 1 })) order.push(message.id);
      vi.advanceTimersByTime(10);
    }
    expect(order).toContain(quiet);
    // Found long before partition 0 ran dry (once in 50 receives at this pace).
    expect(order.indexOf(quiet)).toBeLessThan(busy.length / 2);
    consumer.close();
  }, 30_000);

  /** A ready message at the end of the partition's near segment, with no other ready one left. */
  async function readyAlone(partition: number, id: string, clear = true): Promise<void> {
    const prefix = partitionPrefix(QUEUE, partition);
    if (clear) await servers.valkey.command(`${prefix}ready:t`, ['DEL', `${prefix}ready:t`]);
    const length = await servers.valkey.command(`${prefix}s:n0`, ['LLEN', `${prefix}s:n0`]);
    await ready(partition, id, Number(length));
  }

  /** A consumer that scans only on its first receive (then not for a minute). */
  const quietConsumer = () =>
    new Consumer(valkeyDriver(servers.valkey, QUEUE), {
      partitions: PARTITIONS,
      windowMs: 1_000,
      visibilityMs: 60_000,
      scanMs: 60_000,
      rescanMs: 60_000,
    });

  /** The tw_take calls the consumer makes, with how many were under way when each was sent. */
  function watchTakes(after?: (partition: number) => Promise<void>) {
    const calls: Array<{ partition: number; concurrent: number }> = [];
    let open = 0;
    const original = servers.valkey.fcall.bind(servers.valkey);
    servers.valkey.fcall = async (fn, key, args, buffers) => {
      if (fn !== 'tw_take') return original(fn, key, args, buffers);
      const partition = Number(/:(\d+)\}/.exec(key)?.[1]);
      calls.push({ partition, concurrent: ++open });
      try {
        const reply = await original(fn, key, args, buffers);
        await after?.(partition);
        return reply;
      } finally {
        open--;
      }
    };
    return { calls, restore: () => (servers.valkey.fcall = original) };
  }

  it('asks the hinted partitions at once, each for its share', async () => {
    const [a] = idsIn(0, 1, 'share-a');
    const [b] = idsIn(1, 1, 'share-b');
    await readyAlone(0, a);
    await readyAlone(1, b);
    const consumer = quietConsumer();
    const watch = watchTakes();
    try {
      const got = await consumer.receive('t', { max: 10 });
      expect(got.map((m) => m.id).sort()).toEqual([a, b].sort());
      // Both partitions in one round: the second was sent before the first answered.
      expect(watch.calls.map((c) => c.partition).sort()).toEqual([0, 1]);
      expect(Math.max(...watch.calls.map((c) => c.concurrent))).toBe(2);
    } finally {
      watch.restore();
      consumer.close();
    }
  });

  it('keeps a partition hinted when its notification comes while a take there is under way', async () => {
    const consumer = quietConsumer();
    for (const p of [0, 1])
      await servers.valkey.command(`${partitionPrefix(QUEUE, p)}ready:t`, [
        'DEL',
        `${partitionPrefix(QUEUE, p)}ready:t`,
      ]);
    // The first receive scans (nothing ready anywhere); no scan again for a minute.
    expect(await consumer.receive('t')).toEqual([]);
    const [late] = idsIn(1, 1, 'late');
    let once = true;
    const watch = watchTakes(async (partition) => {
      if (partition !== 1 || !once) return;
      once = false;
      // The take found partition 1 empty; then its message became ready and said so.
      await readyAlone(1, late, false);
      consumer.onReady(1, 't');
    });
    try {
      consumer.onReady(1, 't');
      expect(await consumer.receive('t')).toEqual([]);
      // Without the hint nothing would ask partition 1 before the next scan, a minute away.
      expect((await consumer.receive('t')).map((m) => m.id)).toEqual([late]);
    } finally {
      watch.restore();
      consumer.close();
    }
  });

  it('keeps nothing for topics it heard of or received from once that can decide nothing', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    onTestFinished(() => void vi.useRealTimers());
    const consumer = new Consumer(valkeyDriver(servers.valkey, QUEUE), {
      partitions: PARTITIONS,
      windowMs: 1_000,
      visibilityMs: 60_000,
      scanMs: 5,
      rescanMs: 5,
    });
    const inside = consumer as unknown as Record<
      'hints' | 'scannedAt' | 'taking' | 'waiters',
      ReadonlyMap<string, unknown>
    >;
    const sizes = () => ({
      hints: inside.hints.size,
      scannedAt: inside.scannedAt.size,
      taking: inside.taking.size,
      waiters: inside.waiters.size,
    });
    try {
      // Every node hears of every topic made ready anywhere, received from here or not.
      for (let i = 0; i < 3_000; i++) consumer.onReady(i % PARTITIONS, `heard-${i}`);
      expect(sizes()).toEqual({ hints: 0, scannedAt: 0, taking: 0, waiters: 0 });
      for (let i = 0; i < 3_000; i++) {
        expect(await consumer.receive(`order-${i}`)).toEqual([]);
        vi.advanceTimersByTime(1);
      }
      // Only the scans of the last few milliseconds decide anything; a few more wait for the
      // next look for old ones (when the map has doubled).
      expect(sizes().scannedAt).toBeLessThanOrEqual(1_024);
      vi.useRealTimers(); // a long poll ends by Date.now()
      const polls = Array.from({ length: 50 }, (_, i) =>
        consumer.receive(`tenant-${i}`, { waitMs: 20 }),
      );
      for (const answer of await Promise.all(polls)) expect(answer).toEqual([]);
      expect(sizes()).toMatchObject({ hints: 0, taking: 0, waiters: 0 });
    } finally {
      consumer.close();
    }
  });

  it('sends the acks of one partition made in one turn as one tw_ack, each answered for itself', async () => {
    for (const p of [0, 1]) {
      await servers.valkey.command(`${partitionPrefix(QUEUE, p)}ready:t`, [
        'DEL',
        `${partitionPrefix(QUEUE, p)}ready:t`,
      ]);
    }
    const ids = idsIn(0, 3, 'acked');
    for (const id of ids) await readyAlone(0, id, false);
    const consumer = new Consumer(valkeyDriver(servers.valkey, QUEUE), {
      partitions: PARTITIONS,
      windowMs: 1_000,
      visibilityMs: 60_000,
    });
    const calls: Array<Array<string | number>> = [];
    const original = servers.valkey.fcall.bind(servers.valkey);
    servers.valkey.fcall = (fn, key, args, buffers) => {
      if (fn === 'tw_ack') calls.push([...args] as Array<string | number>);
      return original(fn, key, args, buffers);
    };
    try {
      const got = await consumer.receive('t', { max: 3 });
      expect(got.map((m) => m.id).sort()).toEqual([...ids].sort());
      // Three acks and one of a receipt whose attempt is not the current one, in one turn.
      const stale = got[0].receipt.replace(/^c0\.1\./, 'c0.7.');
      const answers = await Promise.all([
        ...got.map((m) => consumer.ack(m.receipt)),
        consumer.ack(stale),
      ]);
      expect(answers).toEqual([true, true, true, false]);
      expect(calls).toHaveLength(1);
      expect(calls[0]).toHaveLength(12);
      // Acked: a second ack of the same receipt finds nothing.
      expect(await consumer.ack(got[1].receipt)).toBe(false);
    } finally {
      servers.valkey.fcall = original;
      consumer.close();
    }
  });
});
