/**
 * Hand-off on PostgreSQL: a fire hands a topic's first fired messages straight in flight to the
 * firing node's waiting receive (no ready row, no take), within the count and bytes asked,
 * never past ready messages of the topic; a queue's receive gets them without a take, and never
 * before their due time although owners fire ahead of it.
 */

import { describe, expect, it, onTestFinished } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import { PostgresDriver } from '../../src/postgres/driver.js';
import type { HandOff, Owner } from '../../src/partitioned/driver.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
import { waitFor } from '../support/wait-for.js';
import { at, located, message, own, run, windowOf, withPostgres } from './with-postgres.js';

describe.runIf(postgresInstalled())('PostgreSQL: fires hand messages to waiting receives', () => {
  const pg = withPostgres();

  /** Schedules `ids` (due a second ago, in order) on partition `p`, loaded: their places. */
  async function due(driver: PostgresDriver, p: number, owner: Owner, ids: string[]) {
    const when = Date.now() - 1_000;
    const w = windowOf(when);
    await driver.schedule(
      p,
      ids.map((id, k) => message({ id, deliverAt: when + k, topic: 'mail', payload: `p-${id}` })),
    );
    await driver.load(p, owner, (w + 1) * 30_000, false);
    const read = await driver.read(p, `w${w}`, 0, 100);
    const places = new Map(read.live.map((row) => [row.id, row.index]));
    return ids.map((id) => ({ ...at(p, id), seg: `w${w}`, index: places.get(id)! }));
  }

  const hand = (most: number, maxBytes = 1 << 20): HandOff => ({
    topic: 'mail',
    most,
    maxBytes,
    visibilityMs: 30_000,
  });

  it('hands the first `most` in flight, the rest ready; a ready one stops the next', async () => {
    const driver = await pg.open();
    const owner = await own(driver, 1);
    const placed = await due(driver, 1, owner, ['a', 'b', 'c', 'd']);
    const [answer] = await driver.fireMany(
      [{ partition: 1, by: owner, at: placed.slice(0, 3), hand: [hand(2)] }],
      0,
    );
    expect(answer).toMatchObject({ fired: 3, early: [] });
    expect(answer!.handed!.map((h) => [h.id, h.topic, h.attempts])).toEqual([
      ['a', 'mail', 1],
      ['b', 'mail', 1],
    ]);
    expect(answer!.handed![0].record.toString('latin1')).toContain('p-a');
    expect(await driver.get(at(1, 'a'))).toMatchObject({ status: 'inflight', attempts: 1 });
    expect(await driver.get(at(1, 'c'))).toMatchObject({ status: 'ready', attempts: 0 });
    expect(await driver.counts(1)).toEqual({ 'mail|I': 2, 'mail|R': 1, 'mail|S': 1 });
    expect(await driver.earliestVisibility(1)).toBeGreaterThan(Date.now());
    // c is ready and due: d is not handed past it.
    const [next] = await driver.fireMany(
      [{ partition: 1, by: owner, at: placed.slice(3), hand: [hand(5)] }],
      0,
    );
    expect(next).toMatchObject({ fired: 1 });
    expect(next!.handed).toBeUndefined();
    expect((await driver.take(1, 'mail', 10, 30_000, 1 << 20)).map((t) => t.id)).toEqual([
      'c',
      'd',
    ]);
    // Handed ones are acked as taken ones are.
    expect(
      await driver.ack(
        1,
        [
          { ...at(1, 'a'), attempt: 1 },
          { ...at(1, 'b'), attempt: 1 },
        ],
        false,
      ),
    ).toEqual([true, true]);
  });

  it('hands within the bytes asked, none of another topic, nothing when fenced', async () => {
    const driver = await pg.open();
    const owner = await own(driver, 0);
    const placed = await due(driver, 0, owner, ['x', 'y']);
    const small = await driver.fireMany(
      [{ partition: 0, by: owner, at: placed.slice(0, 1), hand: [hand(5, 10)] }],
      0,
    );
    expect(small[0]).toMatchObject({ fired: 1 });
    expect(small[0]!.handed).toBeUndefined();
    const other = await driver.fireMany(
      [{ partition: 0, by: owner, at: placed.slice(1), hand: [{ ...hand(5), topic: 'sms' }] }],
      0,
    );
    expect(other[0]!.handed).toBeUndefined();
    const stale = await driver.fireMany(
      [{ partition: 0, by: { ...owner, epoch: owner.epoch + 1 }, at: placed, hand: [hand(5)] }],
      0,
    );
    expect(stale).toEqual([undefined]);
  });

  it('a located message fired ahead is handed with its record, due time and topic', async () => {
    const driver = await pg.open();
    const owner = await own(driver, 2);
    const when = Date.now() + 40;
    const loc = located(when, 'mail', 'ahead');
    const answer = await driver.schedule(2, [run([loc], 'mail')]);
    const w = windowOf(when);
    await driver.load(2, owner, (w + 2) * 30_000, false);
    const seg = answer.where[0].segment;
    const read = await driver.read(2, seg, 0, 10);
    const placed = read.live.map((row) => ({ ...at(2, row.id), seg, index: row.index }));
    const [fired] = await driver.fireMany(
      [{ partition: 2, by: owner, at: placed, hand: [hand(5)] }],
      1_000,
    );
    expect(fired!.handed).toHaveLength(1);
    expect(fired!.handed![0]).toMatchObject({ id: placed[0].id, deliverAt: when, attempts: 1 });
    expect(fired!.handed![0].record.equals(loc.record)).toBe(true);
  });

  /** Ids that takes answered, while the test runs. */
  function watchTakes(): string[] {
    const taken: string[] = [];
    const original = PostgresDriver.prototype.take;
    PostgresDriver.prototype.take = async function (this: PostgresDriver, ...args) {
      const rows = await original.apply(this, args);
      taken.push(...rows.map((row) => row.id));
      return rows;
    };
    onTestFinished(() => void (PostgresDriver.prototype.take = original));
    return taken;
  }

  // A receive is open to a hand-off while it waits, not while it asks the partitions again
  // (every 250 ms, a few ms): a message that fires then is taken instead. So each case runs
  // several times, and most must be handed.
  it('a receive waiting when its message fires gets it with no take, never early', async () => {
    const queue = await DelayQueue.open({ postgres: pg.url, queue: 'handed', partitions: 4 });
    onTestFinished(() => queue.close());
    const taken = watchTakes();
    let handed = 0;
    for (let round = 0; round < 5; round++) {
      const received = queue.receive('t', { max: 10, waitMs: 10_000 });
      const deliverAt = Date.now() + 300;
      const { id } = await queue.schedule({ topic: 't', payload: round, deliverAt });
      const [got] = await received;
      expect(Date.now()).toBeGreaterThanOrEqual(deliverAt);
      expect(got).toMatchObject({ id, payload: round, attempts: 1 });
      expect(await queue.get(id)).toMatchObject({ status: 'inflight', attempts: 1 });
      expect(await queue.ack(got.receipt)).toBe(true);
      expect(await queue.get(id)).toMatchObject({ status: 'acked' });
      if (!taken.includes(id)) handed++;
    }
    expect(handed).toBeGreaterThanOrEqual(3);
  });

  it('an aborted receive answers what was handed to it once due, not left in flight', async () => {
    // Fired a second ahead: held for that long after the hand-off.
    const queue = await DelayQueue.open({
      postgres: pg.url,
      queue: 'held',
      partitions: 4,
      fireAheadMs: 1_000,
    });
    onTestFinished(() => queue.close());
    for (let round = 0; ; round++) {
      expect(round).toBeLessThan(5);
      const aborts = new AbortController();
      const received = queue.receive('t', { max: 10, waitMs: 30_000 }, { signal: aborts.signal });
      const deliverAt = Date.now() + 1_500;
      const { id } = await queue.schedule({ topic: 't', payload: 'held', deliverAt });
      await waitFor(async () => (await queue.get(id))?.status !== 'scheduled', {
        timeoutMs: 10_000,
      });
      if ((await queue.get(id))?.status !== 'inflight') {
        // Fired while the receive was asking again: ready, for the receive to take when due.
        aborts.abort();
        await received.catch(() => []);
        continue;
      }
      expect(Date.now()).toBeLessThan(deliverAt);
      aborts.abort();
      const got = await received;
      expect(Date.now()).toBeGreaterThanOrEqual(deliverAt);
      expect(got.map((m) => [m.id, m.attempts])).toEqual([[id, 1]]);
      expect(await queue.ack(got[0].receipt)).toBe(true);
      return;
    }
  });

  it('starts a handed delivery with a short deadline, then gives it the visibility asked', async () => {
    const queue = await DelayQueue.open({ postgres: pg.url, queue: 'lengthened', partitions: 4 });
    onTestFinished(() => queue.close());
    const taken = watchTakes();
    const deadline = async (id: string) =>
      Number(
        (await pg.pool.query('SELECT at FROM tickwheel_lengthened.states WHERE id = $1', [id]))
          .rows[0].at,
      );
    for (let round = 0; ; round++) {
      expect(round).toBeLessThan(5);
      const received = queue.receive('t', { max: 1, waitMs: 10_000, visibilityMs: 60_000 });
      const { id } = await queue.schedule({
        topic: 't',
        payload: round,
        deliverAt: Date.now() + 300,
      });
      const [got] = await received;
      const out = Date.now();
      if (taken.includes(id)) {
        await queue.ack(got.receipt);
        continue;
      }
      // Short at first (HAND_GRACE_MS after its due time), then the 60 s asked, from about now.
      expect(await deadline(id)).toBeLessThan(out + 5_000);
      await waitFor(async () => (await deadline(id)) > out + 50_000, { timeoutMs: 10_000 });
      expect(await queue.get(id)).toMatchObject({ status: 'inflight', attempts: 1 });
      expect(await queue.ack(got.receipt)).toBe(true);
      return;
    }
  });
});
