/**
 * The Valkey/Redis idempotency store (src/idempotent/redis.ts) on a real server: a duplicate
 * after the done mark runs nothing; a delivery during another's claim is refused as busy; a
 * failed handler lets go of its claim; a handler that outlives its claim is counted; a claim of
 * a killed worker expires and the effect runs again (what this store cannot prevent).
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisIdempotencyStore, idempotent } from '../../src/idempotent/index.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startServer } from '../../scripts/valkey.mjs';
import { sleep, waitFor } from '../support/wait-for.js';

const binary = installed('valkey-server') ? 'valkey-server' : 'redis-server';

describe.runIf(installed(binary))('the Redis idempotency store', () => {
  let server: { url: string; stop(): Promise<void> };

  beforeAll(async () => {
    server = await startServer({ binary });
  }, 30_000);

  afterAll(async () => {
    await server?.stop();
  });

  it('runs once, refuses a concurrent delivery as busy, and skips what is done', async () => {
    const store = await RedisIdempotencyStore.open({
      redis: server.url,
      prefix: 'a:',
      busyWaitMs: 0,
    });
    let calls = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const handler = idempotent(
      async () => {
        calls++;
        await gate;
      },
      { store },
    );
    const first = handler({ id: 'm-1', topic: 'mail' });
    await waitFor(() => calls === 1);
    await expect(handler({ id: 'm-1', topic: 'mail' })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_IDEMPOTENT_BUSY',
    });
    release();
    await first;
    await handler({ id: 'm-1', topic: 'mail' });
    expect(calls).toBe(1);
    expect(store.stats()).toMatchObject({ ran: 1, duplicates: 1, claimsExpired: 0 });
    await store.close();
  });

  it('lets go of the claim when the handler throws, so the retry runs at once', async () => {
    const store = await RedisIdempotencyStore.open({ redis: server.url, prefix: 'b:' });
    let fail = true;
    let calls = 0;
    const handler = idempotent(
      async () => {
        calls++;
        if (fail) throw new Error('not now');
      },
      { store },
    );
    await expect(handler({ id: 'm-2', topic: 'mail' })).rejects.toThrow('not now');
    fail = false;
    await handler({ id: 'm-2', topic: 'mail' });
    expect(calls).toBe(2);
    expect(store.stats()).toMatchObject({ ran: 1, failed: 1 });
    await store.close();
  });

  it('runs the effect again once a dead worker’s claim expires, and counts a handler that outlived its claim', async () => {
    const store = await RedisIdempotencyStore.open({
      redis: server.url,
      prefix: 'c:',
      claimMs: 200,
      busyWaitMs: 0,
    });
    // A worker that claimed and died: its claim is all that is left (long enough to be seen
    // busy once on a loaded machine).
    const dead = await RedisIdempotencyStore.open({
      redis: server.url,
      prefix: 'c:',
      claimMs: 1_000,
    });
    let claimed = false;
    const never = dead.once('mail/m-3', () => {
      claimed = true;
      return new Promise(() => {});
    });
    void never;
    await waitFor(() => claimed);
    let calls = 0;
    const handler = idempotent(async () => void calls++, { store });
    await expect(handler({ id: 'm-3', topic: 'mail' })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_IDEMPOTENT_BUSY',
    });
    // Busy until the dead claim's time runs out; then it runs.
    await waitFor(() =>
      handler({ id: 'm-3', topic: 'mail' }).then(
        () => true,
        (err: { code?: string }) => {
          if (err.code !== 'ERR_TICKWHEEL_IDEMPOTENT_BUSY') throw err;
          return false;
        },
      ),
    );
    expect(calls).toBe(1);
    // A handler slower than its claim: done, but another delivery could have run meanwhile.
    const slow = idempotent(() => sleep(300), { store });
    await slow({ id: 'm-4', topic: 'mail' });
    expect(store.stats()).toMatchObject({ ran: 2, claimsExpired: 1 });
    await store.close();
    await dead.close();
    // Closed: a named error, and closing again does nothing.
    await expect(handler({ id: 'm-5', topic: 'mail' })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_CLOSED',
    });
    await store.close();
  });

  it('refuses bad options by name', async () => {
    await expect(RedisIdempotencyStore.open({ redis: 'http://nope' })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    await expect(
      RedisIdempotencyStore.open({ redis: server.url, claimMs: 0 }),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
    await expect(
      RedisIdempotencyStore.open({ redis: server.url, prefix: 5 as never }),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
    await expect(
      RedisIdempotencyStore.open({ redis: server.url, retentionMs: 5 }),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
    await expect(
      RedisIdempotencyStore.open({ redis: server.url, busyWaitMs: -1 }),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
  });

  it('waits for another delivery’s claim: a duplicate once it is marked, a run once it expires', async () => {
    const first = await RedisIdempotencyStore.open({
      redis: server.url,
      prefix: 'd:',
      claimMs: 300,
    });
    const second = await RedisIdempotencyStore.open({
      redis: server.url,
      prefix: 'd:',
      claimMs: 300,
    });
    let calls = 0;
    const effect = async () => {
      calls++;
      await sleep(100);
    };
    // Marked done while the second waits: the second is a duplicate.
    const running = first.once('k1', effect);
    await waitFor(() => calls === 1);
    expect(await second.once('k1', effect)).toBe('duplicate');
    expect(await running).toBe('ran');
    // A claim that is never marked (its worker died): the second runs once it expires.
    let claimed = false;
    void first.once('k2', () => {
      claimed = true;
      return new Promise(() => {});
    });
    await waitFor(() => claimed);
    const started = Date.now();
    expect(await second.once('k2', effect)).toBe('ran');
    expect(Date.now() - started).toBeGreaterThanOrEqual(200);
    expect(calls).toBe(2);
    await first.close();
    await second.close();
  });
});
