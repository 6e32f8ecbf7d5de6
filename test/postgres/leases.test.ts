/**
 * PostgresDriver's shared state besides messages: leases with epochs and born, members, the
 * queue's fixed settings, token buckets, topic fields, recurring schedules' records with
 * versions and fencing, and occurrences made once while their mark lives.
 */

import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
import { waitFor } from '../support/wait-for.js';
import { at, message, own, withPostgres } from './with-postgres.js';

describe.runIf(postgresInstalled())('PostgresDriver: leases, members and settings', () => {
  const pg = withPostgres();

  it('keeps the fixed settings the first node wrote', async () => {
    const driver = await pg.open('settings', 4);
    expect(await driver.config(16, 1_000)).toEqual({ partitions: 4, windowMs: 30_000 });
    expect(await driver.leaseHolders()).toEqual(Array(4).fill({ owner: '', until: 0 }));
  });

  it('grants one holder at a time, each grant with a newer epoch, and names when data was born', async () => {
    const driver = await pg.open();
    const a = { node: 'a', epoch: 0 };
    const first = await driver.lease(0, 'acquire', a, 30_000);
    expect(first).toMatchObject({ granted: true, epoch: 1 });
    expect(Number(first.born)).toBeGreaterThan(Date.now() - 60_000);
    expect(await driver.lease(0, 'acquire', { node: 'b', epoch: 0 }, 30_000)).toEqual({
      granted: false,
      epoch: 1,
      born: first.born,
    });
    const holders = await driver.leaseHolders();
    expect(holders[0].owner).toBe('a');
    expect(holders[0].until).toBeGreaterThan(Date.now());
    expect(await driver.lease(0, 'renew', { node: 'a', epoch: 1 }, 30_000)).toMatchObject({
      granted: true,
    });
    expect(await driver.lease(0, 'renew', { node: 'a', epoch: 0 }, 30_000)).toMatchObject({
      granted: false,
    });
    expect(await driver.lease(0, 'release', { node: 'b', epoch: 1 }, 0)).toMatchObject({
      granted: false,
    });
    expect(await driver.lease(0, 'release', { node: 'a', epoch: 1 }, 0)).toMatchObject({
      granted: true,
    });
    const second = await driver.lease(0, 'acquire', { node: 'b', epoch: 0 }, 30_000);
    expect(second).toEqual({ granted: true, epoch: 2, born: first.born });
    // Another partition is born on its own first grant.
    expect((await driver.lease(1, 'release', a, 0)).born).toBe('');
    expect(await driver.grantKept(0, 1_000)).toBe(true);
  });

  it("renews a node's leases in one call, each under its own epoch", async () => {
    const driver = await pg.open();
    const held = [];
    for (const p of [0, 1, 2]) {
      const { epoch } = await driver.lease(p, 'acquire', { node: 'a', epoch: 0 }, 30_000);
      held.push({ partition: p, epoch });
    }
    await driver.lease(3, 'acquire', { node: 'b', epoch: 0 }, 30_000);
    const stale = { partition: 2, epoch: held[2].epoch + 1 };
    const asked = [held[0], held[1], stale, { partition: 3, epoch: 1 }];
    expect(await driver.renewMany('a', asked, 60_000)).toEqual([0, 1]);
    const holders = await driver.leaseHolders();
    expect(holders[0].until).toBeGreaterThan(holders[2].until + 20_000);
    expect(holders[3].owner).toBe('b');
  });

  it('lets renewals pass an owner-only change under way, and makes an acquire wait for it', async () => {
    const driver = await pg.open('fence-locks');
    const { epoch } = await driver.lease(0, 'acquire', { node: 'a', epoch: 0 }, 100);
    const client = await pg.pool.connect();
    try {
      await client.query('BEGIN');
      const seq = await client.query(
        `SELECT "tickwheel_fence-locks".owner_write(0, 'a', $1) AS v`,
        [epoch],
      );
      expect(seq.rows[0].v).not.toBeNull();
      // Renewed while the change is open: the holder keeps its lease.
      expect(await driver.renewMany('a', [{ partition: 0, epoch }], 200)).toEqual([0]);
      // Run out, it is another's to take, but only once the change has committed.
      const taking = waitFor(
        async () => (await driver.lease(0, 'acquire', { node: 'b', epoch: 0 }, 30_000)).granted,
      );
      await waitFor(async () => {
        const waiting = await pg.pool.query(
          `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%tw_lease%'`,
        );
        return waiting.rowCount === 1;
      });
      expect((await driver.leaseHolders())[0].owner).toBe('a');
      await client.query('COMMIT');
      await taking;
      expect((await driver.leaseHolders())[0].owner).toBe('b');
    } finally {
      client.release();
    }
  });

  it("lets a lease run out by the store's clock: renew refused, acquire by another granted", async () => {
    const driver = await pg.open();
    const lease = await driver.lease(3, 'acquire', { node: 'a', epoch: 0 }, 50);
    await waitFor(
      async () => (await driver.lease(3, 'acquire', { node: 'b', epoch: 0 }, 30_000)).granted,
    );
    expect(await driver.lease(3, 'renew', { node: 'a', epoch: lease.epoch }, 30_000)).toMatchObject(
      { granted: false },
    );
  });

  it('refuses a bad call with a named error, changing nothing', async () => {
    const driver = await pg.open();
    await expect(driver.lease(0, 'acquire', { node: 'a', epoch: 0 }, 0)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_STATE',
    });
    await expect(driver.lease(9, 'acquire', { node: 'a', epoch: 0 }, 1_000)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_STATE',
    });
    await expect(driver.read(0, 'x1', 0, 10)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_STATE',
    });
    await expect(
      driver.schedule(9, [message({ id: 'lost', deliverAt: Date.now() })]),
    ).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_STATE',
    });
    expect(await driver.counts(0)).toEqual({});
    expect((await driver.lease(0, 'acquire', { node: 'a', epoch: 0 }, 1_000)).epoch).toBe(1);
  });

  it('lists members while their heartbeats last, sorted', async () => {
    const driver = await pg.open();
    expect(await driver.heartbeat('node-b', 30_000)).toEqual(['node-b']);
    expect(await driver.heartbeat('node-a', 30_000)).toEqual(['node-a', 'node-b']);
    expect(await driver.heartbeat('node-c', 1)).toContain('node-a');
    await waitFor(async () => !(await driver.heartbeat('node-a', 30_000)).includes('node-c'));
    expect(await driver.heartbeat('node-b', 0)).toEqual(['node-a']);
  });

  it('shares a token bucket: full at first, empty after a burst, given back only under the same limit', async () => {
    const driver = await pg.open();
    const limit = { perSecond: 1, burst: 3 };
    expect(await driver.tokens('mail', limit, 2)).toEqual({ granted: 2, retryInMs: 0 });
    expect(await driver.tokens('mail', limit, 5)).toEqual({ granted: 1, retryInMs: 0 });
    const empty = await driver.tokens('mail', limit, 1);
    expect(empty.granted).toBe(0);
    expect(empty.retryInMs).toBeGreaterThan(0);
    expect(empty.retryInMs).toBeLessThanOrEqual(1_000);
    expect(await driver.tokens('mail', { perSecond: 2, burst: 3 }, -1)).toEqual({
      granted: 0,
      retryInMs: 0,
    });
    await driver.tokens('mail', limit, -2);
    expect((await driver.tokens('mail', limit, 2)).granted).toBe(2);
    // Another topic's bucket is its own.
    expect((await driver.tokens('sms', limit, 3)).granted).toBe(3);
  });

  it('sets and clears topic fields', async () => {
    const driver = await pg.open();
    await driver.setTopicFields(
      'settings',
      { 'mail|paused': 'true', 'sms|paused': 'true' },
      [],
      'pausing',
    );
    await driver.setTopicFields('push', { mail: '{"url":"http://x"}' }, [], 'push');
    await driver.setTopicFields(
      'settings',
      { 'mail|rateLimit': '{"perSecond":5}' },
      ['sms|paused'],
      'x',
    );
    const { fields, where } = await driver.topicFields('settings');
    expect(fields).toEqual({ 'mail|paused': 'true', 'mail|rateLimit': '{"perSecond":5}' });
    expect(where).toContain('topic_fields');
    expect((await driver.topicFields('push')).fields).toEqual({ mail: '{"url":"http://x"}' });
  });

  it("keeps recurring schedules' records by version, and fences a save by a former holder of partition 0", async () => {
    const driver = await pg.open();
    const changes = await driver.schedChanges();
    const put = await driver.sched({
      op: 'put',
      name: 'daily',
      version: 0,
      record: '{"a":1}',
      most: 10,
    });
    expect(put).toMatchObject({ done: true, fenced: false });
    expect(await driver.schedChanges()).not.toBe(changes);
    expect(
      await driver.sched({ op: 'put', name: 'daily', version: 0, record: '{}', most: 10 }),
    ).toEqual({
      done: false,
      fenced: false,
      version: put.version,
    });
    const owner = await own(driver, 0);
    const before = await driver.schedChanges();
    const saved = await driver.sched({
      op: 'save',
      name: 'daily',
      version: put.version,
      record: '{"a":2}',
      by: owner,
    });
    expect(saved.done).toBe(true);
    expect(saved.version).toBeGreaterThan(put.version);
    expect(await driver.schedChanges()).toBe(before);
    expect(await driver.schedRecord('daily')).toBe(`${saved.version}|{"a":2}`);
    const stale = { ...owner, epoch: owner.epoch - 1 };
    expect(
      await driver.sched({
        op: 'save',
        name: 'daily',
        version: saved.version,
        record: '{}',
        by: stale,
      }),
    ).toEqual({
      done: false,
      fenced: true,
      version: 0,
    });
    expect(await driver.sched({ op: 'del', name: 'daily', version: saved.version })).toEqual({
      done: true,
      fenced: false,
      version: 0,
    });
    // One deleted meanwhile stays deleted; made again, it never has a version it had.
    expect(
      await driver.sched({ op: 'save', name: 'daily', version: 0, record: '{}', by: owner }),
    ).toMatchObject({ done: false });
    const again = await driver.sched({
      op: 'put',
      name: 'daily',
      version: 0,
      record: '{"b":1}',
      most: 10,
    });
    expect(again.version).toBeGreaterThan(saved.version);
    expect(await driver.schedRecords()).toEqual({ daily: `${again.version}|{"b":1}` });
    expect(await driver.schedRecord('weekly')).toBeUndefined();
    // A new name while `most` records exist is refused with their count; the one there changes.
    const weekly = { op: 'put', name: 'weekly', version: 0, record: '{}', most: 1 } as const;
    expect(await driver.sched(weekly)).toEqual({ done: false, fenced: false, version: 0, full: 1 });
    expect(await driver.schedRecord('weekly')).toBeUndefined();
    const daily = {
      op: 'put',
      name: 'daily',
      version: again.version,
      record: '{}',
      most: 1,
    } as const;
    expect(await driver.sched(daily)).toMatchObject({ done: true });
  });

  it('counts the records again at each install: a count lost is made right', async () => {
    const queue = 'counted';
    const driver = await pg.open(queue);
    for (const name of ['a', 'b']) {
      await driver.sched({ op: 'put', name, version: 0, record: '{}', most: 10 });
    }
    const config = '"tickwheel_counted".config';
    const count = async () =>
      (await pg.pool.query(`SELECT value FROM ${config} WHERE key = 'schedCount'`)).rows[0]
        ?.value as string | undefined;
    expect(await count()).toBe('2');
    // The count gone, and the schema's version one less, so that the next open installs it.
    await pg.pool.query(`DELETE FROM ${config} WHERE key = 'schedCount'`);
    await pg.pool.query(
      `UPDATE ${config} SET value = (value::int - 1)::text WHERE key = 'version'`,
    );
    const reinstalled = await pg.open(queue);
    expect(await count()).toBe('2');
    expect(
      await reinstalled.sched({ op: 'put', name: 'd', version: 0, record: '{}', most: 3 }),
    ).toMatchObject({ done: true });
    expect(
      await reinstalled.sched({ op: 'put', name: 'e', version: 0, record: '{}', most: 3 }),
    ).toEqual({ done: false, fenced: false, version: 0, full: 3 });
  });

  it('makes an occurrence at most once while its mark lives, again once cancelled', async () => {
    const driver = await pg.open();
    const due = Date.now() + 3_600_000;
    const occurrence = message({ id: 'daily@1', deliverAt: due });
    expect(await driver.scheduleOnce(1, 60_000, occurrence)).toBe(true);
    expect(await driver.scheduleOnce(1, 60_000, occurrence)).toBe(false);
    expect(await driver.counts(1)).toEqual({ 'invoice|S': 1 });
    await driver.cancel(at(1, 'daily@1'));
    expect(await driver.scheduleOnce(1, 60_000, occurrence)).toBe(true);
    // A mark that ran out lets the occurrence be made again (here: found pending, not made).
    const short = message({ id: 'daily@2', deliverAt: due });
    expect(await driver.scheduleOnce(1, 1, short)).toBe(true);
    await waitFor(async () => (await driver.scheduleOnce(1, 60_000, short)) === false);
    expect(await driver.counts(1)).toEqual({ 'invoice|S': 2 });
  });
});
