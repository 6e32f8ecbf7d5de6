/**
 * The cluster consumer (src/cluster/consumer.ts) on a real Valkey: a partition whose "ready"
 * notification was lost (as in a failover) is still found while other partitions, hinted by
 * their notifications, never run dry: every partition is asked at least every `rescanMs`.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Valkey } from '../../src/cluster/connection.js';
import { Consumer } from '../../src/cluster/consumer.js';
import { partitionPrefix } from '../../src/cluster/keys.js';
import { encodeRecord, placeOf } from '../../src/cluster/record.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startServer } from '../../scripts/valkey.mjs';

const QUEUE = 'hints';
const PARTITIONS = 2;

describe.runIf(installed('valkey-server'))('the cluster consumer', () => {
  let server: { url: string; stop(): Promise<void> };
  let valkey: Valkey;

  beforeAll(async () => {
    server = await startServer({ binary: 'valkey-server' });
    valkey = await Valkey.connect(server.url);
    await valkey.loadLibrary();
  }, 30_000);

  afterAll(async () => {
    await valkey?.close();
    await server?.stop();
  });

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
    await valkey.command(at, ['RPUSH', at, record as unknown as string]);
    await valkey.command(key(`id:${bucket}`), [
      'HSET',
      key(`id:${bucket}`),
      id,
      `R|n0|${index}|${Date.now()}|0|t`,
    ]);
    await valkey.command(key('ready:t'), ['RPUSH', key('ready:t'), `${bucket}:${id}`]);
  }

  it('finds a partition whose notification was lost while hinted ones keep it busy', async () => {
    const busy = idsIn(0, 300, 'busy');
    const [quiet] = idsIn(1, 1, 'quiet');
    for (let i = 0; i < busy.length; i++) await ready(0, busy[i], i);
    await ready(1, quiet, 0);
    const consumer = new Consumer(valkey, {
      queue: QUEUE,
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
      await sleep(10);
    }
    expect(order).toContain(quiet);
    // Found long before partition 0 ran dry (about 1 in 50 receives at this pace).
    expect(order.indexOf(quiet)).toBeLessThan(busy.length / 2);
    consumer.close();
  }, 30_000);
});
