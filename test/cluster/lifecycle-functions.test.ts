/**
 * The life of a message through the tickwheel functions, on a real Valkey (standalone, and a
 * Cluster of 3 + 3 so that every key of a partition must be in its slot): scheduled far ahead,
 * its window loaded by the owner, fired, taken, nacked, retried, acked, dead, requeued; and the
 * owner-only calls refused to anyone but the current epoch.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClusterValkey as Valkey } from '../../src/cluster/functions.js';
import { decodeRecord, encodeRecord, placeOf } from '../../src/partitioned/record.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startCluster, startServer } from '../../scripts/valkey.mjs';
import { waitFor } from '../support/wait-for.js';

const WINDOW_MS = 30_000;
const PARTITIONS = 16;

const setups: Array<[string, () => Promise<{ urls: string[]; stop(): Promise<void> }>]> = [
  [
    'Valkey standalone',
    async () => {
      const s = await startServer({ binary: 'valkey-server' });
      return { urls: [s.url], stop: () => s.stop() };
    },
  ],
  [
    'a Valkey Cluster of 3 + 3',
    async () => {
      const c = await startCluster({ primaries: 3, replicas: 1 });
      return { urls: c.urls, stop: () => c.stop() };
    },
  ],
];

for (const [name, start] of setups) {
  describe.runIf(installed('valkey-server'))(`a message's life on ${name}`, () => {
    let servers: { urls: string[]; stop(): Promise<void> };
    let valkey: Valkey;

    beforeAll(async () => {
      servers = await start();
      valkey = await Valkey.connect(servers.urls);
      await valkey.loadLibrary();
    }, 60_000);

    afterAll(async () => {
      await valkey?.close();
      await servers?.stop();
    });

    /** One message's keys and calls, as a node would make them. */
    function message(id: string, maxAttempts = 3) {
      const { partition, bucket } = placeOf(id, PARTITIONS);
      const meta = `tw:{life:${partition}}:meta`;
      const prefix = meta.slice(0, -4);
      const record = encodeRecord(
        {
          id,
          topic: 'invoice',
          maxAttempts,
          backoff: { type: 'fixed', delayMs: 10 },
          payloadKind: 1,
          payload: Buffer.from(`payload of ${id}`),
        },
        bucket,
      );
      const windowOf = (due: number) => String(Math.floor(due / WINDOW_MS));
      const call = (fn: string, args: Array<string | number | Buffer>) =>
        valkey.fcall(fn, meta, args);
      return {
        partition,
        bucket,
        meta,
        prefix,
        schedule: (due: number) =>
          call('tw_schedule', [1, id, bucket, String(due), windowOf(due), 'invoice', record]),
        state: async () => (await call('tw_get', [id, bucket])) as string | null,
        lease: (node: string) => call('tw_lease', ['acquire', node, 0, 10_000]),
        load: (node: string, epoch: number, until: number, rotate = 0) =>
          call('tw_load', [node, epoch, until, rotate]) as Promise<Array<number | string>>,
        read: (seg: string) =>
          valkey.fcall('tw_read', meta, [seg, 0, 100], true) as Promise<[number, unknown[][]]>,
        fire: (node: string, epoch: number, seg: string, index: number, skewMs = 250) =>
          call('tw_fire', [node, epoch, skewMs, 1, id, bucket, seg, index]) as Promise<
            [number, string[]]
          >,
        take: (visibilityMs = 30_000) =>
          valkey.fcall('tw_take', meta, ['invoice', 10, visibilityMs, 1 << 20], true) as Promise<
            Array<[Buffer, number, Buffer, Buffer]>
          >,
        ack: (attempt: number) => call('tw_ack', [id, bucket, attempt]),
        nack: (attempt: number, due: number, reason = 'card declined') =>
          call('tw_nack', [id, bucket, attempt, String(due), windowOf(due), reason]),
        requeue: (due: number) => call('tw_requeue', [id, bucket, String(due), windowOf(due)]),
        reschedule: (due: number) =>
          call('tw_reschedule', [id, bucket, String(due), windowOf(due)]),
        expire: (node: string, epoch: number, attempt: number, due: number) =>
          call('tw_expire', [node, epoch, 1, id, bucket, attempt, String(due), windowOf(due)]),
        overdue: () =>
          valkey.fcall('tw_overdue', meta, [String(Date.now() + 60_000), 10], true) as Promise<
            unknown[][]
          >,
        cmd: (...words: string[]) => valkey.command(meta, words),
      };
    }

    const segOf = (state: string | null) => String(state).split('|')[1];
    const indexOf = (state: string | null) => Number(String(state).split('|')[2]);

    it('schedules far ahead, loads the window, fires, delivers and acks, leaving nothing but a note of it for get()', async () => {
      const m = message('order-0001');
      const now = Date.now();
      const due = now + 5; // due now, but in a window the owner has not loaded yet
      expect(await m.schedule(due)).toBe(1);
      const [granted, epoch] = (await m.lease('node-a')) as number[];
      expect(granted).toBe(1);
      // The owner raises loadedUntil over the window, then reads the frozen window.
      const until = (Math.floor(due / WINDOW_MS) + 1) * WINDOW_MS;
      expect((await m.load('node-a', epoch, until)).slice(0, 3)).toEqual([1, String(until), 0]);
      const seg = segOf(await m.state());
      const [scanned, live] = await m.read(seg);
      expect(scanned).toBe(1);
      expect(live).toHaveLength(1);
      const [index, status, readDue, attempts, record] = live[0] as [
        number,
        Buffer,
        Buffer,
        number,
        Buffer,
      ];
      expect([index, String(status), String(readDue), attempts]).toEqual([0, 'S', String(due), 0]);
      expect(decodeRecord(record)).toMatchObject({
        id: 'order-0001',
        topic: 'invoice',
        maxAttempts: 3,
      });

      // Due 5 ms after it was scheduled: within the 250 ms a fire may run ahead of its time.
      expect((await m.fire('node-a', epoch, seg, index)).slice(0, 2)).toEqual([1, []]);
      expect(String(await m.state()).startsWith('R|')).toBe(true);
      // A second fire of the same location does nothing: it is ready already.
      expect((await m.fire('node-a', epoch, seg, index)).slice(0, 2)).toEqual([0, []]);

      const taken = await m.take();
      expect(taken).toHaveLength(1);
      const [id, attempt, takenDue, takenRecord] = taken[0];
      expect([String(id), attempt, String(takenDue)]).toEqual(['order-0001', 1, String(due)]);
      expect(String(decodeRecord(takenRecord).payload)).toBe('payload of order-0001');
      expect(await m.take()).toEqual([]);

      expect(await m.ack(2)).toEqual([0]);
      expect(await m.ack(1)).toEqual([1]);
      expect(await m.ack(1)).toEqual([0]);
      // Gone from its id bucket; get() still answers it as acknowledged for a while.
      expect(await m.cmd('HEXISTS', `${m.prefix}id:${m.bucket}`, 'order-0001')).toBe(0);
      expect(String(await m.state())).toMatch(/^A\|/);
      expect(await m.cmd('EXISTS', `${m.prefix}s:${seg}`)).toBe(0);
      expect(await m.cmd('ZCARD', `${m.prefix}inflight`)).toBe(0);
      // Counts back at 0 leave no field behind.
      expect(await m.cmd('HGETALL', `${m.prefix}counts`)).toEqual({});
    });

    it('cancels a message whatever its state short of finished: ready, in flight, dead', async () => {
      const cancel = (m: ReturnType<typeof message>, id: string) =>
        valkey.fcall('tw_cancel', m.meta, [id, m.bucket]);
      // Each on its own id; all three are live but not scheduled when cancelled.
      const ready = message('cancel-ready');
      const inflight = message('cancel-inflight');
      const dead = message('cancel-dead', 1);
      for (const [m, node] of [
        [ready, 'node-r'],
        [inflight, 'node-i'],
        [dead, 'node-d'],
      ] as const) {
        const due = Date.now();
        await m.schedule(due);
        await m.cmd('HDEL', m.meta, 'owner');
        const [, epoch] = (await m.lease(node)) as number[];
        await m.load(node, epoch, (Math.floor(due / WINDOW_MS) + 1) * WINDOW_MS);
        const state = await m.state();
        expect((await m.fire(node, epoch, segOf(state), indexOf(state)))[0]).toBe(1);
      }
      expect(String(await ready.state()).startsWith('R|')).toBe(true);
      expect(await cancel(ready, 'cancel-ready')).toEqual([1, 'invoice', expect.any(String), 0]);
      expect(String(await ready.state())).toMatch(/^C\|/);

      const taken = await inflight.take();
      const ids = taken.map(([id]) => String(id));
      // The cancelled ready one is skipped by take (its entry stays in the list).
      expect(ids).not.toContain('cancel-ready');
      expect(ids).toContain('cancel-inflight');
      expect(await cancel(inflight, 'cancel-inflight')).toEqual([
        1,
        'invoice',
        expect.any(String),
        1,
      ]);
      expect(await inflight.ack(1)).toEqual([0]);
      expect(
        await inflight.cmd(
          'ZSCORE',
          `${inflight.prefix}inflight`,
          `${inflight.bucket}:cancel-inflight`,
        ),
      ).toBeNull();

      if (!ids.includes('cancel-dead')) await dead.take();
      expect(await dead.nack(1, Date.now(), 'no')).toBe('dead');
      expect(await cancel(dead, 'cancel-dead')).toEqual([1, 'invoice', expect.any(String), 1]);
      expect(await dead.cmd('ZRANGE', `${dead.prefix}dead:invoice`, '0', '-1')).not.toContain(
        `${dead.bucket}:cancel-dead`,
      );
      expect(await cancel(dead, 'cancel-dead')).toBe(0);
      for (const m of [ready, inflight, dead]) {
        const counts = (await m.cmd('HGETALL', `${m.prefix}counts`)) as Record<string, string>;
        for (const value of Object.values(counts)) expect(Number(value)).toBeGreaterThanOrEqual(0);
      }
    });

    it('refuses owner-only calls from anyone but the current epoch within its lease', async () => {
      const m = message('order-0002');
      const due = Date.now();
      await m.schedule(due);
      const [, epoch] = (await m.lease('node-b')) as number[];
      expect(await m.load('node-x', epoch, due + 60_000)).toEqual([-1]);
      expect(await m.load('node-b', epoch + 1, due + 60_000)).toEqual([-1]);
      const seg = segOf(await m.state());
      expect(await m.fire('node-b', epoch - 1, seg, 0)).toEqual([-1]);
      expect(String(await m.state()).startsWith('S|')).toBe(true);
      await m.cmd('HSET', m.meta, 'leaseUntil', '1');
      expect(await m.fire('node-b', epoch, seg, 0)).toEqual([-1]);
    });

    it("does not fire a message more than the skew allowed ahead of the server's clock", async () => {
      const m = message('order-0003');
      const due = Date.now() + 10_000;
      await m.schedule(due);
      const [, epoch] = (await m.lease('node-c')) as number[];
      const state = await m.state();
      const [fired, early] = await m.fire('node-c', epoch, segOf(state), indexOf(state), 250);
      expect([fired, early]).toEqual([0, ['order-0003']]);
      expect(String(await m.state()).startsWith('S|')).toBe(true);
    });

    it('retries a nacked delivery, buries it after maxAttempts, and requeues the dead letter', async () => {
      const m = message('order-0004', 2);
      const due = Date.now();
      await m.schedule(due);
      const [, epoch] = (await m.lease('node-d')) as number[];
      await m.load('node-d', epoch, (Math.floor(due / WINDOW_MS) + 2) * WINDOW_MS);
      let state = await m.state();
      await m.fire('node-d', epoch, segOf(state), indexOf(state));
      expect((await m.take())[0][1]).toBe(1);
      // A retry due inside the loaded horizon goes to the near segment.
      expect(await m.nack(1, due + 10)).toBe('retry');
      state = await m.state();
      expect(state).toMatch(/^S\|n0\|\d+\|/);
      expect(await m.cmd('HGET', `${m.prefix}reasons`, 'order-0004')).toBe('card declined');
      await m.fire('node-d', epoch, segOf(state), indexOf(state));
      expect((await m.take())[0][1]).toBe(2);
      expect(await m.nack(2, due + 20, 'card declined again')).toBe('dead');
      expect(String(await m.state()).startsWith('D|')).toBe(true);
      expect(await m.cmd('ZRANGE', `${m.prefix}dead:invoice`, '0', '-1')).toEqual([
        `${m.bucket}:order-0004`,
      ]);
      expect(await m.requeue(due + 30)).toBe(1);
      expect(await m.requeue(due + 30)).toBe(0);
      state = await m.state();
      expect(state).toMatch(/^S\|n0\|\d+\|[\d.]+\|0\|invoice$/);
      expect(await m.cmd('ZCARD', `${m.prefix}dead:invoice`)).toBe(0);
    });

    it('lets the owner expire a delivery whose visibility ran out', async () => {
      const m = message('order-0005');
      const due = Date.now();
      await m.schedule(due);
      const [, epoch] = (await m.lease('node-e')) as number[];
      const state = await m.state();
      await m.fire('node-e', epoch, segOf(state), indexOf(state));
      await m.take(50);
      // Not yet past its deadline: left alone.
      expect(((await m.expire('node-e', epoch, 1, due + 1_000)) as number[]).slice(0, 2)).toEqual([
        0, 0,
      ]);
      const overdue = await m.overdue();
      expect(overdue.map((row) => String(row[1]))).toContain('order-0005');
      expect(await m.expire('node-x', epoch, 1, due + 1_000)).toEqual([-1]);
      // Expired by its owner once its 50 ms of visibility have run out by the server's clock.
      await waitFor(async () =>
        expect(((await m.expire('node-e', epoch, 1, due + 1_000)) as number[]).slice(0, 2)).toEqual(
          [1, 0],
        ),
      );
      expect(String(await m.state()).startsWith('S|')).toBe(true);
      expect(await m.cmd('HGET', `${m.prefix}reasons`, 'order-0005')).toBe(
        'visibility timeout: not acknowledged in time',
      );
    });

    it('reschedules a scheduled message, moving its record, and nothing else', async () => {
      const m = message('order-0006');
      const due = Date.now() + 3_600_000;
      await m.schedule(due);
      const before = await m.state();
      expect(await m.reschedule(due + 86_400_000)).toBe(1);
      const after = await m.state();
      expect(segOf(after)).not.toBe(segOf(before));
      expect(await m.cmd('EXISTS', `${m.prefix}s:${segOf(before)}`)).toBe(0);
      const [, live] = await m.read(segOf(after));
      expect(live).toHaveLength(1);
    });
  });
}
