/**
 * A queue on a Valkey that restarts without its data (no persistence: a real valkey-server,
 * SIGKILLed and started again with nothing). Its messages are gone, and nothing can bring them
 * back; what must not happen is carrying on silently. The node reports each partition made
 * anew (ERR_TICKWHEEL_DATA_LOST to onError, the dataLosses count), loads the functions the
 * server lost, and serves again.
 */

import { afterAll, describe, expect, it } from 'vitest';
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
});
