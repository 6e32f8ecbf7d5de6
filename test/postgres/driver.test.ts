/**
 * PostgresDriver (src/postgres/) on a real PostgreSQL: schedules with ids and located runs,
 * their places and dedup, get/stored/cancel/move, and what the partition's channel says.
 */

import { describe, expect, it } from 'vitest';
import { locatedId } from '../../src/partitioned/record.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
import { waitFor } from '../support/wait-for.js';
import { FAR, at, located, message, own, run, windowOf, withPostgres } from './with-postgres.js';

describe.runIf(postgresInstalled())('PostgresDriver: messages', () => {
  const pg = withPostgres();

  it('appends a far-future message to its window and keeps its state by id', async () => {
    const driver = await pg.open();
    const m = message({ id: 'o-1001', deliverAt: FAR + 0.5 });
    const answer = await driver.schedule(1, [m]);
    expect(answer.existing).toEqual([undefined]);
    expect(answer.where).toEqual([]);
    expect(await driver.get(at(1, 'o-1001'))).toEqual({
      id: 'o-1001',
      topic: 'invoice',
      status: 'scheduled',
      deliverAt: FAR + 0.5,
      attempts: 0,
    });
    expect(await driver.stored(at(1, 'o-1001'))).toEqual({
      deliverAt: FAR + 0.5,
      record: m.record,
    });
    expect(await driver.windows(1, -Infinity, Infinity)).toEqual([windowOf(FAR)]);
    expect(await driver.segmentSizes(1)).toEqual({ [`w${windowOf(FAR)}`]: 1 });
    expect(await driver.counts(1)).toEqual({ 'invoice|S': 1 });
    // Another partition holds none of it.
    expect(await driver.get(at(2, 'o-1001'))).toBeUndefined();
    expect(await driver.counts(2)).toEqual({});
  });

  it('answers a second schedule of a pending id with the first one, in one batch or two', async () => {
    const driver = await pg.open();
    await driver.schedule(0, [message({ id: 'a', deliverAt: FAR })]);
    const answer = await driver.schedule(0, [
      message({ id: 'a', deliverAt: FAR + 5 }),
      message({ id: 'b', deliverAt: FAR + 7 }),
      message({ id: 'b', deliverAt: FAR + 9 }),
    ]);
    expect(answer.existing).toEqual([FAR, undefined, FAR + 7]);
    expect(await driver.counts(0)).toEqual({ 'invoice|S': 2 });
    expect((await driver.get(at(0, 'b')))?.deliverAt).toBe(FAR + 7);
  });

  it('places located runs and answers where they went; their ids read back as scheduled', async () => {
    const driver = await pg.open();
    const w = windowOf(FAR);
    const first = [located(FAR + 1), located(FAR + 2)];
    const second = [located(FAR + 3)];
    const answer = await driver.schedule(3, [
      run(first),
      message({ id: 'between', deliverAt: FAR + 2 }),
      run(second),
    ]);
    expect(answer.loadedUntil).toBe(0);
    expect(answer.where).toEqual([
      { segment: `w${w}`, first: 0 },
      { segment: `w${w}`, first: 3 },
    ]);
    const id = locatedId(3, `w${w}`, 1, first[1].tag);
    expect(await driver.get({ partition: 3, id, bucket: 7 })).toEqual({
      id,
      topic: 'invoice',
      status: 'scheduled',
      deliverAt: FAR + 2,
      attempts: 0,
    });
    // A located id whose tag is not the record's names nothing.
    const wrong = locatedId(3, `w${w}`, 1, first[0].tag);
    expect(await driver.get({ partition: 3, id: wrong, bucket: 7 })).toBeUndefined();
    const read = await driver.read(3, `w${w}`, 0, 10);
    expect(read.scanned).toBe(4);
    expect(read.live.map((row) => [row.index, row.status, row.deliverAt])).toEqual([
      [0, 'S', FAR + 1],
      [1, 'S', FAR + 2],
      [2, 'S', FAR + 2],
      [3, 'S', FAR + 3],
    ]);
    expect(read.live[2].id).toBe('between');
    expect(read.live[3].id).toBe(locatedId(3, `w${w}`, 3, second[0].tag));
    expect(await driver.counts(3)).toEqual({ 'invoice|S': 4 });
  });

  it('sends what is due before loadedUntil to the near segment, and says so on the channel', async () => {
    const driver = await pg.open();
    const owner = await own(driver, 2);
    const now = Date.now();
    const loaded = await driver.load(2, owner, now + 60_000, false);
    expect(loaded?.loadedUntil).toBe(now + 60_000);
    const events: string[] = [];
    const stop = await driver.subscribe(2, (event) => events.push(event));
    const near = [located(now + 1_000), located(now + 70_000)];
    const answer = await driver.schedule(2, [
      message({ id: 'soon', deliverAt: now + 500 }),
      run(near),
    ]);
    const n = loaded!.near;
    // A run straddling loadedUntil: its near part first, then its window's.
    expect(answer.where).toEqual([
      { segment: n, first: 1 },
      { segment: `w${windowOf(now + 1_000)}`, first: 0 },
    ]);
    expect(answer.loadedUntil).toBe(now + 60_000);
    const nearId = locatedId(2, n, 1, near[0].tag);
    await waitFor(() => events.length > 0);
    expect(events).toEqual([
      `n ${n} 0 soon ${message({ id: 'soon', deliverAt: 0 }).bucket} ${now + 500} ${nearId} - ${now + 1_000}`,
    ]);
    expect(await driver.nearSegments(2)).toEqual([n]);
    await stop();
  });

  it('says only "n" of a near append too long for a notification', async () => {
    const driver = await pg.open();
    const owner = await own(driver, 0);
    await driver.load(0, owner, Date.now() + 60_000, false);
    const events: string[] = [];
    const stop = await driver.subscribe(0, (event) => events.push(event));
    const long = (i: number) => `${'x'.repeat(150)}-${i}`;
    await driver.schedule(
      0,
      Array.from({ length: 60 }, (_, i) => message({ id: long(i), deliverAt: Date.now() })),
    );
    await waitFor(() => events.length > 0);
    expect(events).toEqual(['n']);
    await stop();
  });

  it('cancels a message, answering what it was; a second cancel finds nothing', async () => {
    const driver = await pg.open();
    const w = windowOf(FAR);
    const loc = located(FAR + 9);
    await driver.schedule(0, [message({ id: 'c-1', deliverAt: FAR }), run([loc])]);
    expect(await driver.cancel(at(0, 'c-1'))).toEqual({
      topic: 'invoice',
      deliverAt: FAR,
      attempts: 0,
    });
    expect(await driver.cancel(at(0, 'c-1'))).toBeUndefined();
    expect((await driver.get(at(0, 'c-1')))?.status).toBe('cancelled');
    const id = locatedId(0, `w${w}`, 1, loc.tag);
    expect(await driver.cancel({ partition: 0, id, bucket: 3 })).toEqual({
      topic: 'invoice',
      deliverAt: FAR + 9,
      attempts: 0,
    });
    expect(await driver.get({ partition: 0, id, bucket: 3 })).toMatchObject({
      status: 'cancelled',
    });
    expect(await driver.read(0, `w${w}`, 0, 10)).toEqual({ scanned: 2, live: [] });
    expect(await driver.counts(0)).toEqual({});
    expect(await driver.segmentSizes(0)).toEqual({});
    expect(await driver.windows(0, -Infinity, Infinity)).toEqual([]);
  });

  it('reschedules a scheduled message to another window, copying its record', async () => {
    const driver = await pg.open();
    const loc = located(FAR);
    const answer = await driver.schedule(1, [run([loc])]);
    const id = locatedId(1, answer.where[0].segment, 0, loc.tag);
    const later = FAR + 3_600_000;
    expect(
      await driver.move('reschedule', { partition: 1, id, bucket: 11 }, later, windowOf(later)),
    ).toBe(true);
    expect(await driver.get({ partition: 1, id, bucket: 11 })).toMatchObject({
      status: 'scheduled',
      deliverAt: later,
    });
    expect(await driver.windows(1, -Infinity, Infinity)).toEqual([windowOf(later)]);
    const read = await driver.read(1, `w${windowOf(later)}`, 0, 10);
    expect(read.live.map((row) => [row.id, row.index])).toEqual([[id, 0]]);
    // The copy carries its id: it is found by id, not by where it is.
    expect(read.live[0].record[0]).toBe(id.length);
    expect(await driver.move('requeue', { partition: 1, id, bucket: 11 }, later, 1)).toBe(false);
  });
  it('remembers the latest 256 finished ids of a partition for get(), and forgets older ones', async () => {
    const driver = await pg.open();
    const ids = Array.from({ length: 400 }, (_, i) => `f-${i}`);
    await driver.schedule(
      1,
      ids.map((id) => message({ id, deliverAt: FAR })),
    );
    for (const id of ids) await driver.cancel(at(1, id));
    expect(await driver.get(at(1, 'f-399'))).toMatchObject({ status: 'cancelled', deliverAt: FAR });
    expect(await driver.get(at(1, 'f-144'))).toMatchObject({ status: 'cancelled' });
    expect(await driver.get(at(1, 'f-0'))).toBeUndefined();
    const { rows } = await pg.pool.query(
      `SELECT count(*)::int AS n FROM "${driver.schema}".done WHERE part = 1`,
    );
    expect(rows[0].n).toBeLessThan(256 + 64);
  });

  it('takes a batch of 2,500 to one window in one call, in order', async () => {
    const driver = await pg.open();
    const records = Array.from({ length: 2_500 }, (_, i) => located(FAR + i));
    const answer = await driver.schedule(0, [
      run(records),
      ...records.slice(0, 10).map((_, i) => message({ id: `after-${i}`, deliverAt: FAR })),
    ]);
    expect(answer.where).toEqual([{ segment: `w${windowOf(FAR)}`, first: 0 }]);
    const read = await driver.read(0, `w${windowOf(FAR)}`, 2_495, 100);
    expect(read.scanned).toBe(15);
    expect(read.live.map((row) => row.id).slice(5)).toEqual(
      Array.from({ length: 10 }, (_, i) => `after-${i}`),
    );
    expect(await driver.counts(0)).toEqual({ 'invoice|S': 2_510 });
  });
});
