/**
 * The lease functions of the tickwheel library (src/cluster/lua/leases.lua) on real servers started
 * by the test: Valkey 8 standalone, Redis 7.0 standalone (Debian's), and a Valkey Cluster of 3
 * primaries with a replica each. The rules are those the model test assumes of the lease table
 * (test/cluster/ownership-model.test.ts): one holder at a time by the server's clock, a new epoch
 * with every grant, renewals and owner-only calls only from the current epoch.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClusterValkey as Valkey } from '../../src/cluster/functions.js';
import * as tw from '../../src/cluster/functions.js';
import { LIBRARY_VERSION, librarySource } from '../../src/cluster/library.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startCluster, startServer } from '../../scripts/valkey.mjs';
import { waitFor } from '../support/wait-for.js';

interface Running {
  urls: string[];
  stop(): Promise<void>;
}

const setups: Array<[string, string, () => Promise<Running>]> = [
  [
    'Valkey standalone',
    'valkey-server',
    async () => {
      const s = await startServer({ binary: 'valkey-server' });
      return { urls: [s.url], stop: () => s.stop() };
    },
  ],
  [
    'Redis 7.0 standalone',
    'redis-server',
    async () => {
      const s = await startServer({ binary: 'redis-server' });
      return { urls: [s.url], stop: () => s.stop() };
    },
  ],
  [
    'Valkey Cluster, 3 primaries + 3 replicas',
    'valkey-server',
    async () => {
      const c = await startCluster({ primaries: 3, replicas: 1 });
      return { urls: c.urls, stop: () => c.stop() };
    },
  ],
];

for (const [name, binary, start] of setups) {
  describe(`lease functions on ${name}`, () => {
    if (!installed(binary)) {
      // Not skipped: a machine without the server cannot show the cluster works.
      it(`needs ${binary} (.ci/run installs it)`, () => {
        throw new Error(`${binary} is not installed`);
      });
      return;
    }
    let servers: Running;
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

    const meta = (p: number) => `tw:{leases:${p}}:meta`;
    const lease = (p: number, ...args: Array<string | number>) =>
      valkey.fcall('tw_lease', meta(p), args) as Promise<Array<number | string>>;
    /** Whether an owner-only call of `node` under `epoch` goes through (none to expire). */
    const holds = async (p: number, node: string, epoch: number) =>
      (await tw.expire(valkey, meta(p), { node, epoch }, [])) !== undefined;

    it('grants one holder at a time, each grant with a newer epoch', async () => {
      const first = await lease(0, 'acquire', 'a', 0, 5_000);
      const born = first[2];
      expect(first).toEqual([1, 1, born]);
      const refused = await lease(0, 'acquire', 'b', 0, 5_000);
      expect(refused.slice(0, 3)).toEqual([0, 1, 'a']);
      expect(Number(refused[3])).toBeGreaterThan(4_000);
      expect(refused[4]).toBe(born);
      expect(await holds(0, 'a', 1)).toBe(true);
      expect(await holds(0, 'b', 1)).toBe(false);
      // Released, it goes to the next asker at once, with epoch 2.
      expect(await lease(0, 'release', 'b', 1)).toEqual([0, 1, born]);
      expect(await lease(0, 'release', 'a', 1)).toEqual([1, 1, born]);
      expect(await holds(0, 'a', 1)).toBe(false);
      expect(await lease(0, 'acquire', 'b', 0, 5_000)).toEqual([1, 2, born]);
    });

    it('renews only the current epoch of the holder, and lets a lease run out by the server clock', async () => {
      const [, , born] = await lease(1, 'acquire', 'a', 0, 300);
      expect(await lease(1, 'renew', 'a', 1, 300)).toEqual([1, 1, born]);
      expect(await lease(1, 'renew', 'a', 0, 300)).toEqual([0, 1, born]);
      expect(await lease(1, 'renew', 'b', 1, 300)).toEqual([0, 1, born]);
      await waitFor(async () => !(await holds(1, 'a', 1)));
      expect(await lease(1, 'renew', 'a', 1, 300)).toEqual([0, 1, born]);
      // Even the old holder gets a new epoch: its earlier calls in flight are fenced.
      expect(await lease(1, 'acquire', 'a', 0, 300)).toEqual([1, 2, born]);
      expect(await holds(1, 'a', 1)).toBe(false);
      expect(await holds(1, 'a', 2)).toBe(true);
    });

    it("names when a partition's data was born: the same for its life, new once it was lost", async () => {
      const [, , born] = await lease(3, 'acquire', 'a', 0, 5_000);
      expect(String(born)).toMatch(/^\d{13}$/);
      // What a server restarted without its data looks like to the next lease call.
      await valkey.command(meta(3), ['DEL', meta(3)]);
      expect(await lease(3, 'renew', 'a', 1, 5_000)).toEqual([0, 0, '']);
      // Past the millisecond it was born in, by the server's clock.
      await waitFor(async () => {
        const [seconds, micros] = (await valkey.command(meta(3), ['TIME'])) as string[];
        return Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000) > Number(born);
      });
      const [granted, epoch, again] = await lease(3, 'acquire', 'a', 0, 5_000);
      expect([granted, epoch]).toEqual([1, 1]);
      expect(Number(again)).toBeGreaterThan(Number(born));
    });

    it('answers a bad call with an error, not a change', async () => {
      await expect(lease(2, 'steal', 'a', 0, 100)).rejects.toThrow(/unknown operation/);
      await expect(lease(2, 'acquire', 'a', 0, 0)).rejects.toThrow(/bad lease time/);
      expect(await valkey.command(meta(2), ['EXISTS', meta(2)])).toBe(0);
    });

    it('works for partitions spread over every slot the server has', async () => {
      const grants = await Promise.all(
        Array.from({ length: 64 }, (_, p) => lease(100 + p, 'acquire', 'n', 0, 5_000)),
      );
      expect(grants.every(([granted, epoch]) => granted === 1 && epoch === 1)).toBe(true);
    });

    it('refuses to run beside a newer library, and loads over an older one', async () => {
      const newer = librarySource().replace(
        `local VERSION = ${LIBRARY_VERSION}`,
        `local VERSION = ${LIBRARY_VERSION + 1}`,
      );
      expect(newer).not.toBe(librarySource());
      const other = await Valkey.connect(servers.urls);
      try {
        // As a newer tickwheel would: load its library on the primary of one key's slot.
        await other.command(meta(0), ['FUNCTION', 'LOAD', 'REPLACE', newer]);
        await expect(valkey.loadLibrary()).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_FORMAT' });
        await other.command(meta(0), ['FUNCTION', 'LOAD', 'REPLACE', librarySource()]);
        await valkey.loadLibrary();
        expect(Number(await valkey.fcall('tw_version', meta(0), []))).toBe(LIBRARY_VERSION);
      } finally {
        await other.close();
      }
    });
  });
}
