/**
 * A queue on a Valkey that restarts without its data (no persistence: a real valkey-server,
 * SIGKILLed and started again with nothing). Its messages are gone, and nothing can bring them
 * back; what must not happen is carrying on silently. The node reports each partition made
 * anew (ERR_TICKWHEEL_DATA_LOST to onError, the dataLosses count), loads the functions the
 * server lost, and serves again.
 */

import { afterAll, describe, expect, it } from 'vitest';
import { ClusterValkey } from '../../src/cluster/functions.js';
import { metaKey } from '../../src/cluster/keys.js';
import { DelayQueue, type Queue } from '../../src/delay-queue.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startServer } from '../../scripts/valkey.mjs';
import { waitFor } from '../support/wait-for.js';

describe.runIf(installed('valkey-server'))('a queue on a Valkey that restarts empty', () => {
  let valkey: {
    url: string;
    crash(): Promise<void>;
    restart(): Promise<void>;
    stop(): Promise<void>;
  };
  let opened: Queue | undefined;

  afterAll(async () => {
    await opened?.close();
    await valkey?.stop();
  });

  it('reports the partitions whose data was lost, and serves again', async () => {
    valkey = await startServer(); // no AOF, no snapshots: a restart starts empty
    const errors: Array<{ code?: string; message: string }> = [];
    const queue = await DelayQueue.open({
      redis: valkey.url,
      queue: 'lost',
      partitions: 2,
      durability: 'async',
      leaseMs: 1_000,
      onError: (err) => errors.push(err as { code?: string; message: string }),
    });
    opened = queue;
    const cluster = async () => (await queue.stats()).cluster;
    await waitFor(async () => (await cluster())?.owned.length === 2);
    await queue.schedule({ topic: 't', id: 'before', payload: 1, delayMs: 60_000 });
    expect(await queue.get('before')).toMatchObject({ status: 'scheduled' });
    expect((await cluster())?.dataLosses).toBe(0);

    await valkey.crash();
    await valkey.restart();

    const lost = () => errors.filter((e) => e.code === 'ERR_TICKWHEEL_DATA_LOST');
    await waitFor(() => lost().length >= 2, { timeoutMs: 15_000 });
    expect(lost()).toHaveLength(2); // each partition once
    expect(lost()[0].message).toMatch(/partition \d of queue lost was made anew on the server/);
    expect((await cluster())?.dataLosses).toBe(2);
    expect(await queue.get('before')).toBeUndefined();
    // The functions went with the data: the node loads them again, and the queue works.
    await queue.schedule({ topic: 't', id: 'after', payload: 2, delayMs: 100 });
    const got = await queue.receive('t', { waitMs: 10_000 });
    expect(got.map((m) => m.id)).toEqual(['after']);
    expect(await queue.ack(got[0].receipt)).toBe(true);
  }, 40_000);

  it('reports a partition whose owner-write count went back, and loads it again', async () => {
    await opened?.close();
    const errors: Array<{ code?: string; message: string }> = [];
    const queue = await DelayQueue.open({
      redis: valkey.url,
      queue: 'behind',
      partitions: 1,
      durability: 'async',
      leaseMs: 1_000,
      onError: (err) => errors.push(err as { code?: string; message: string }),
    });
    opened = queue;
    await waitFor(async () => (await queue.stats()).cluster?.owned.length === 1);
    await queue.schedule({ topic: 't', id: 'one', payload: 1, delayMs: 50 });
    await waitFor(async () => (await queue.get('one'))?.status === 'ready');
    // What a failover to a replica that missed the last writes leaves: the count back at 0.
    const meta = metaKey('behind', 0);
    const direct = await ClusterValkey.connect(valkey.url);
    await direct.command(meta, ['HSET', meta, 'oseq', '0']);
    await direct.close();
    const lost = () => errors.filter((e) => e.code === 'ERR_TICKWHEEL_DATA_LOST');
    await waitFor(() => lost().length >= 1);
    expect(lost()[0].message).toMatch(
      /partition 0 of queue behind: its owner-write count went back/,
    );
    expect((await queue.stats()).cluster?.dataLosses).toBe(1);
    // Loaded again, it serves.
    await queue.schedule({ topic: 't', id: 'two', payload: 2, delayMs: 50 });
    const got: string[] = [];
    await waitFor(async () => {
      for (const m of await queue.receive('t', { max: 10, waitMs: 1_000 })) got.push(m.id);
      return got.includes('two');
    });
    expect(got.sort()).toEqual(['one', 'two']);
  }, 40_000);
});
