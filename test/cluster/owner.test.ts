/**
 * A partition's owner (src/partitioned/owner.ts) on a real Valkey: messages scheduled before it
 * starts (read from frozen windows) and after (read from the near segment, on a notification or
 * the poll) become ready when due, never before; deliveries whose visibility runs out are
 * retried; and the owner stops the moment its epoch is no longer the current one.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SystemClock, TimerWheel } from '../../src/index.js';
import { ClusterValkey as Valkey } from '../../src/cluster/functions.js';
import { eventsChannel, metaKey } from '../../src/cluster/keys.js';
import type { PartitionDriver } from '../../src/partitioned/driver.js';
import { PartitionOwner, type Due } from '../../src/partitioned/owner.js';
import { Producer } from '../../src/partitioned/producer.js';
import { placeOf } from '../../src/partitioned/record.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startServer } from '../../scripts/valkey.mjs';
import { checking, type Checking } from './checking.js';
import { valkeyDriver } from './with-valkey.js';
import { waitFor } from '../support/wait-for.js';

const PARTITIONS = 1;
const QUEUE = 'owned';
const META = metaKey(QUEUE, 0);

describe.runIf(installed('valkey-server'))('a partition owner on Valkey', () => {
  let server: { url: string; stop(): Promise<void> };
  let valkey: Valkey;
  let producer: Checking<Producer>;
  let wheel: TimerWheel<Due>;
  const owners: PartitionOwner[] = [];

  function producerOf(queue: string): Checking<Producer> {
    return checking(
      new Producer(valkeyDriver(valkey, queue), {
        partitions: PARTITIONS,
        windowMs: 1_000,
        maxPayloadBytes: 1 << 20,
      }),
    );
  }

  beforeAll(async () => {
    server = await startServer({ binary: 'valkey-server' });
    valkey = await Valkey.connect(server.url);
    await valkey.loadLibrary();
    producer = producerOf(QUEUE);
    wheel = new TimerWheel<Due>({
      clock: new SystemClock({ epoch: true }),
      onExpire: (due) => due.owner.fire(due),
    });
  }, 30_000);

  afterAll(async () => {
    for (const owner of owners) owner.stop();
    wheel?.close();
    await valkey?.close();
    await server?.stop();
  });

  async function own(
    node: string,
    fenced: (o: PartitionOwner) => void = () => {},
    stale: (o: PartitionOwner) => void = () => {},
    pollMs = 100,
    queue = QUEUE,
    driver: PartitionDriver = valkeyDriver(valkey, queue),
    onError: (err: unknown) => void = (err) => {
      throw err;
    },
  ) {
    const meta = metaKey(queue, 0);
    // The previous test's owner is gone: its lease has run out.
    await valkey.command(meta, ['HSET', meta, 'leaseUntil', '1']);
    const [granted, epoch] = (await valkey.fcall('tw_lease', meta, [
      'acquire',
      node,
      0,
      60_000,
    ])) as number[];
    expect(granted).toBe(1);
    const owner = new PartitionOwner(driver, {
      partitions: PARTITIONS,
      partition: 0,
      node,
      epoch,
      windowMs: 1_000,
      horizonMs: 2_000,
      maxClockSkewMs: 250,
      fireAheadMs: 0,
      pollMs,
      relistMs: pollMs,
      wheel,
      onFenced: fenced,
      onStale: stale,
      onError,
    });
    owners.push(owner);
    const stop = await valkey.subscribe(eventsChannel(queue, 0), (m) => owner.onEvent(m));
    await owner.start();
    return { owner, stop };
  }

  /** One ready message of topic t, taken for `visibilityMs`; undefined when none is ready. */
  async function takeOne(visibilityMs: number): Promise<Array<[string, number]> | undefined> {
    const rows = (await valkey.fcall('tw_take', META, ['t', 1, visibilityMs, 1 << 20])) as Array<
      [string, number]
    >;
    return rows.length > 0 ? rows : undefined;
  }

  /** When a message of topic t of `queue` was first taken (waited for, up to 5 s). */
  function firstTaken(queue: string): Promise<number> {
    const meta = metaKey(queue, 0);
    return waitFor(
      async () => {
        const rows = (await valkey.fcall('tw_take', meta, ['t', 1, 60_000, 1 << 20])) as unknown[];
        return rows.length > 0 ? Date.now() : undefined;
      },
      { timeoutMs: 5_000 },
    );
  }

  /** Takes everything ready, every few ms, noting when each id was taken. */
  async function collect(ids: string[], untilMs: number, meta = META) {
    const taken = new Map<string, number>();
    while (taken.size < ids.length && Date.now() < untilMs) {
      const rows = (await valkey.fcall('tw_take', meta, ['t', 100, 60_000, 1 << 20])) as Array<
        [string, number, string, string]
      >;
      for (const [id] of rows) taken.set(String(id), Date.now());
      await sleep(5);
    }
    return taken;
  }

  it('makes messages ready when due, never before, whether loaded from a window or the near segment', async () => {
    const start = Date.now();
    const before = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        producer.schedule({
          topic: 't',
          id: `before-${i}`,
          payload: i,
          deliverAt: start + 400 + i * 20,
        }),
      ),
    );
    // A message due after the horizon: it must wait for its window to be loaded.
    const far = await producer.schedule({
      topic: 't',
      id: 'far',
      payload: 0,
      deliverAt: start + 6_000,
    });
    const { owner, stop } = await own('node-a');
    const after = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        producer.schedule({
          topic: 't',
          id: `after-${i}`,
          payload: i,
          deliverAt: start + 500 + i * 20,
        }),
      ),
    );
    const all = [...before, ...after];
    const taken = await collect(
      all.map((r) => r.id),
      start + 5_000,
    );
    expect(taken.size).toBe(all.length);
    for (const { id, deliverAt } of all) {
      const at = taken.get(id) as number;
      expect(at, `${id} taken early`).toBeGreaterThanOrEqual(deliverAt);
      expect(at - deliverAt, `${id} late`).toBeLessThan(1_000);
    }
    expect((await producer.get('far'))?.status).toBe('scheduled');
    // The horizon moves on: once the far message's window is near, it fires too.
    const moving = setInterval(() => void owner.advance(), 200);
    const farTaken = await collect(['far'], start + 9_000);
    clearInterval(moving);
    expect(farTaken.get('far')).toBeGreaterThanOrEqual(far.deliverAt);
    owner.stop();
    await stop();
  }, 20_000);

  it('retries a delivery whose visibility ran out', async () => {
    const { owner, stop } = await own('node-b');
    await producer.schedule({
      topic: 't',
      id: 'slow',
      payload: 1,
      delayMs: 0,
      backoff: { type: 'fixed', delayMs: 50 },
    });
    expect(await waitFor(() => takeOne(100))).toHaveLength(1);
    // Visibility 100 ms, back-off 50 ms: it is ready again, attempt 2.
    const again = await waitFor(() => takeOne(60_000));
    expect(again.map(([id, attempt]) => [String(id), Number(attempt)])).toEqual([['slow', 2]]);
    owner.stop();
    await stop();
  }, 10_000);

  it('expires a delivery at its visibility deadline by a timer, with no poll to find it', async () => {
    // The poll would run only after a minute: the timer for the earliest deadline does it.
    const { owner, stop } = await own('node-v', undefined, undefined, 60_000);
    await producer.schedule({
      topic: 't',
      id: 'held',
      payload: 1,
      delayMs: 0,
      backoff: { type: 'fixed', delayMs: 0 },
    });
    expect(await waitFor(() => takeOne(400))).toHaveLength(1);
    const deadline = Date.now() + 400;
    const again = await waitFor(() => takeOne(60_000));
    const at = Date.now();
    expect(again.map(([id, attempt]) => [String(id), Number(attempt)])).toEqual([['held', 2]]);
    // Not before its visibility ran out (the server's clock and this one, within a few ms).
    expect(at).toBeGreaterThanOrEqual(deadline - 20);
    owner.stop();
    await stop();
  }, 15_000);

  it('fails at once the deliveries a former owner left in flight past their visibility, with no event or poll', async () => {
    const first = await own('node-w', undefined, undefined, 60_000);
    await producer.schedule({
      topic: 't',
      id: 'left',
      payload: 1,
      delayMs: 0,
      backoff: { type: 'fixed', delayMs: 0 },
    });
    expect(await waitFor(() => takeOne(50))).toHaveLength(1);
    const overdue = Date.now() + 50;
    // The owner dies before its timer runs: no one expires the delivery.
    first.owner.stop();
    await first.stop();
    await waitFor(() => Date.now() > overdue);
    // Its successor polls only after a minute, and hears no event for it.
    const { owner } = await own('node-x', undefined, undefined, 60_000);
    const again = await waitFor(() => takeOne(60_000));
    expect(again.map(([id, attempt]) => [String(id), Number(attempt)])).toEqual([['left', 2]]);
    owner.stop();
  }, 15_000);

  it('stops at the first refused call once another node holds a newer epoch', async () => {
    let fenced = 0;
    const { owner, stop } = await own('node-c', () => fenced++);
    // Its lease runs out (as if the node had paused) and another node takes the partition.
    await valkey.command(META, ['HSET', META, 'leaseUntil', '1']);
    await valkey.fcall('tw_lease', META, ['acquire', 'node-d', 0, 60_000]);
    const { partition } = placeOf('late', PARTITIONS);
    expect(partition).toBe(0);
    await producer.schedule({ topic: 't', id: 'late', payload: 1, delayMs: 50 });
    await waitFor(() => fenced === 1);
    expect(owner.active).toBe(false);
    // Nothing fired it: it waits for the new owner.
    expect((await producer.get('late'))?.status).toBe('scheduled');
    await stop();
  });

  it('notices that writes it saw were lost (a failover to a stale replica) and gives way to a fresh load', async () => {
    let staled = 0;
    const { owner, stop } = await own(
      'node-e',
      () => {},
      () => staled++,
    );
    await producer.schedule({ topic: 't', id: 'lost-fire', payload: 1, delayMs: 100 });
    // ('late', of the test before, is fired by this owner too.)
    const taken = await collect(['late', 'lost-fire'], Date.now() + 3_000);
    expect(taken.has('lost-fire')).toBe(true);
    // What a failover to a replica that missed the last writes looks like: the message is
    // scheduled again (its fire and take are gone) and the owner-write count went back.
    const { bucket } = placeOf('lost-fire', PARTITIONS);
    const ids = `${META.slice(0, -4)}id:${bucket}`;
    const state = String(await valkey.command(META, ['HGET', ids, 'lost-fire'])).split('|');
    state[0] = 'S';
    state[4] = '0';
    await valkey.command(META, ['HSET', ids, 'lost-fire', state.join('|')]);
    await valkey.command(META, ['ZREM', `${META.slice(0, -4)}inflight`, `${bucket}:lost-fire`]);
    await valkey.command(META, ['HSET', META, 'oseq', '0']);
    // Its next write (the horizon moving on) shows the count went back: stale.
    await owner.advance();
    expect(staled).toBe(1);
    expect(owner.active).toBe(false);
    await stop();
    // A fresh owner of the same lease loads the partition and fires the message again.
    const fresh = await own('node-f');
    const again = await collect(['lost-fire'], Date.now() + 3_000);
    expect(again.has('lost-fire')).toBe(true);
    fresh.owner.stop();
    await fresh.stop();
  }, 15_000);

  it('takes an owner-write count below one seen for no loss when its call was sent before that one was answered', async () => {
    // Over a pool (PostgreSQL) two owner-only calls of one partition run on two connections:
    // the one that drew the lower count may answer last.
    let staled = 0;
    let holdLoads = false;
    let letGo = () => {};
    const held = new Promise<void>((resolve) => (letGo = resolve));
    const direct = valkeyDriver(valkey, QUEUE);
    const driver: PartitionDriver = Object.create(direct);
    driver.load = async (...args) => {
      const answer = await direct.load(...args);
      if (holdLoads) await held;
      return answer;
    };
    const { owner, stop } = await own(
      'node-g',
      () => {},
      () => staled++,
      100,
      QUEUE,
      driver,
    );
    holdLoads = true;
    const loading = owner.advance();
    // A fire answered meanwhile, with a higher count.
    await producer.schedule({ topic: 't', id: 'overtaking', payload: 1, delayMs: 0 });
    const taken = await collect(['overtaking'], Date.now() + 3_000);
    expect(taken.has('overtaking')).toBe(true);
    letGo();
    await loading;
    expect(staled).toBe(0);
    expect(owner.active).toBe(true);
    owner.stop();
    await stop();
  }, 15_000);

  /** The segments of the tw_read calls made from now on. */
  function watchReads() {
    const segments: string[] = [];
    const original = valkey.fcall.bind(valkey);
    valkey.fcall = (fn, key, args, buffers) => {
      if (fn === 'tw_read') segments.push(String(args[0]));
      return original(fn, key, args, buffers);
    };
    return { segments, restore: () => (valkey.fcall = original) };
  }

  it('arms near messages from the note tw_schedule publishes, reading nothing', async () => {
    // A queue of its own: no delivery an earlier test left in flight can run out of visibility
    // while this owner starts (its retry is a near append that the owner reads).
    const queue = 'owned-note';
    const noting = producerOf(queue);
    // No poll for a minute: only the note can arm them.
    const { owner, stop } = await own('node-note', undefined, undefined, 60_000, queue);
    const watch = watchReads();
    try {
      const start = Date.now();
      const scheduled = await noting.scheduleMany(
        Array.from({ length: 5 }, (_, i) => ({
          topic: 't',
          id: `noted-${i}`,
          payload: i,
          deliverAt: start + 200 + i,
        })),
      );
      const taken = await collect(
        scheduled.map((r) => r.id),
        start + 3_000,
        metaKey(queue, 0),
      );
      expect(taken.size).toBe(5);
      for (const { id, deliverAt } of scheduled) {
        expect(taken.get(id) as number).toBeGreaterThanOrEqual(deliverAt);
      }
      expect(watch.segments).toEqual([]);
    } finally {
      watch.restore();
      owner.stop();
      await stop();
    }
  }, 10_000);

  it('reads a near segment rotated out once more, then no longer', async () => {
    const { owner, stop } = await own('node-rot', undefined, undefined, 60_000);
    const watch = watchReads();
    try {
      const read = async () => {
        watch.segments.length = 0;
        owner.onEvent('n');
        // Until the read it started has ended, and any read it asked for after it.
        await (owner as unknown as { nearReads: { running?: Promise<void> } }).nearReads.running;
        return [...watch.segments].sort();
      };
      const before = await read();
      expect(before).toHaveLength(1);
      // A new near segment (as every minute): the old one is read to its end once more (by
      // the load that started the new one), then never again.
      (owner as unknown as { lastRotation: number }).lastRotation = 0;
      watch.segments.length = 0;
      await owner.advance();
      const rotated = [...watch.segments].sort();
      expect(rotated).toHaveLength(2);
      expect(rotated).toContain(before[0]);
      const next = await read();
      expect(next).toHaveLength(1);
      expect(next).not.toContain(before[0]);
    } finally {
      watch.restore();
      owner.stop();
      await stop();
    }
  }, 10_000);

  it('reads what a schedule put in the near segment just before its first load', async () => {
    // A queue of its own: its near segment holds nothing live when the second owner starts.
    const queue = 'owned-race';
    const driver = valkeyDriver(valkey, queue);
    const racer = producerOf(queue);
    // A first owner makes the partition's near segment, and dies with nothing in it.
    const first = await own('node-race-1', undefined, undefined, 60_000, queue);
    first.owner.stop();
    await first.stop();
    // Its successor lists the near segments (none live), then a schedule into the one of the
    // first owner commits, then its first load starts a new near segment. No poll for a minute
    // and no note heard (nobody listened): only the start's reading can find the message.
    let raced: Promise<{ id: string; deliverAt: number }> | undefined;
    const racing = Object.assign(Object.create(driver) as PartitionDriver, {
      load: async (...args: Parameters<PartitionDriver['load']>) => {
        raced ??= racer.schedule({ topic: 't', id: 'raced', payload: 1, delayMs: 300 });
        await raced;
        return driver.load(...args);
      },
    });
    const { owner, stop } = await own('node-race-2', undefined, undefined, 60_000, queue, racing);
    try {
      const { deliverAt } = await (raced as Promise<{ deliverAt: number }>);
      expect(await firstTaken(queue)).toBeGreaterThanOrEqual(deliverAt);
    } finally {
      owner.stop();
      await stop();
    }
  }, 15_000);

  it('finds a near segment with live records it never read, says so, and fires what it holds', async () => {
    const queue = 'owned-hidden';
    const driver = valkeyDriver(valkey, queue);
    const hidden = producerOf(queue);
    const errors: unknown[] = [];
    const { owner, stop } = await own(
      'node-hidden',
      undefined,
      undefined,
      100,
      queue,
      driver,
      (e) => errors.push(e),
    );
    try {
      // Behind the owner's back, a near segment starts, a message goes into it, and another
      // starts: the owner's next load names the newest, never the one between.
      const by = { node: 'node-hidden', epoch: owner.epoch };
      await driver.load(0, by, 0, true);
      const { deliverAt } = await hidden.schedule({
        topic: 't',
        id: 'hidden',
        payload: 1,
        delayMs: 300,
      });
      await driver.load(0, by, 0, true);
      await owner.advance();
      expect(await firstTaken(queue)).toBeGreaterThanOrEqual(deliverAt);
      expect(errors.map((e) => (e as { code?: string }).code)).toEqual(['ERR_TICKWHEEL_ASSERTION']);
      expect((errors[0] as Error).message).toContain('had not read');
    } finally {
      owner.stop();
      await stop();
    }
  }, 15_000);
});
