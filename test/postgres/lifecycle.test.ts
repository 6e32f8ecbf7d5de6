/**
 * A message's life on PostgresDriver, as the owner and the consumers drive it: load, read, fire
 * (fenced by the lease's epoch, the owner-write count growing), take, ack, nack with retries
 * and dead letters with reasons, expiry of deliveries whose visibility ran out, requeue.
 */

import { describe, expect, it } from 'vitest';
import { locatedId } from '../../src/partitioned/record.js';
import { VISIBILITY_REASON } from '../../src/queue/message.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
import { waitFor } from '../support/wait-for.js';
import { at, located, message, own, run, windowOf, withPostgres } from './with-postgres.js';
import type { PostgresDriver } from '../../src/postgres/driver.js';
import type { Owner } from '../../src/partitioned/driver.js';

describe.runIf(postgresInstalled())('PostgresDriver: a message from schedule to ack', () => {
  const pg = withPostgres();

  it('schedules ahead, loads the window, fires, delivers and acks, leaving a note for get()', async () => {
    const driver = await pg.open();
    const owner = await own(driver, 1);
    const due = Date.now() - 1_000;
    const w = windowOf(due);
    const loc = located(due, 'mail');
    await driver.schedule(1, [
      message({ id: 'm-1', deliverAt: due, topic: 'mail' }),
      run([loc], 'mail'),
    ]);
    expect(await driver.windows(1, w, w + 1)).toEqual([w]);
    const loaded = await driver.load(1, owner, (w + 1) * 30_000, false);
    expect(loaded).toMatchObject({ loadedUntil: (w + 1) * 30_000 });
    const read = await driver.read(1, `w${w}`, 0, 100);
    expect(read.live.map((row) => row.id)).toEqual(['m-1', locatedId(1, `w${w}`, 1, loc.tag)]);

    const events: string[] = [];
    const stop = await driver.subscribe(1, (event) => events.push(event));
    const placed = read.live.map((row) => ({ ...at(1, row.id), seg: `w${w}`, index: row.index }));
    const fired = await driver.fire(1, owner, 0, placed);
    expect(fired).toMatchObject({ fired: 2, early: [] });
    expect(fired!.seq).toBeGreaterThan(loaded!.seq);
    await waitFor(() => events.includes('r mail'));
    expect(await driver.readyPartitions('mail', 2)).toEqual([1]);
    expect(await driver.counts(1)).toEqual({ 'mail|R': 2 });
    // Fired once: a second fire of the same places changes nothing.
    expect(await driver.fire(1, owner, 0, placed)).toMatchObject({ fired: 0 });

    const taken = await driver.take(1, 'mail', 10, 30_000, 1 << 20);
    expect(taken.map((t) => [t.id, t.attempts])).toEqual([
      ['m-1', 1],
      [placed[1].id, 1],
    ]);
    expect(taken[1].record.equals(loc.record)).toBe(true);
    await waitFor(() => events.some((event) => event.startsWith('i ')));
    expect(await driver.earliestVisibility(1)).toBeGreaterThan(Date.now());
    expect(await driver.take(1, 'mail', 10, 30_000, 1 << 20)).toEqual([]);

    const acks = await driver.ack(
      1,
      [
        { ...at(1, 'm-1'), attempt: 1 },
        { ...at(1, placed[1].id), attempt: 2 },
      ],
      false,
    );
    expect(acks).toEqual([true, false]);
    expect(await driver.ack(1, [{ ...at(1, placed[1].id), attempt: 1 }], true)).toEqual([true]);
    expect(await driver.get(at(1, 'm-1'))).toMatchObject({ status: 'acked', attempts: 1 });
    expect(await driver.get(at(1, placed[1].id))).toMatchObject({ status: 'acked' });
    expect(await driver.counts(1)).toEqual({});
    expect(await driver.segmentSizes(1)).toEqual({});
    expect(await driver.earliestVisibility(1)).toBe(Infinity);
    await stop();
  });

  it('takes within maxBytes of records, but always one, in the order they became ready', async () => {
    const driver = await pg.open();
    const owner = await own(driver, 0);
    const due = Date.now() - 1_000;
    const ids = ['a', 'b', 'c'];
    await driver.schedule(
      0,
      ids.map((id) => message({ id, deliverAt: due, payload: 'x'.repeat(100) })),
    );
    await driver.load(0, owner, due + 1, false);
    const read = await driver.read(0, `w${windowOf(due)}`, 0, 10);
    for (const row of read.live.reverse()) {
      await driver.fire(0, owner, 0, [
        { ...at(0, row.id), seg: `w${windowOf(due)}`, index: row.index },
      ]);
    }
    expect((await driver.take(0, 'invoice', 10, 30_000, 10)).map((t) => t.id)).toEqual(['c']);
    expect((await driver.take(0, 'invoice', 10, 30_000, 250)).map((t) => t.id)).toEqual(['b', 'a']);
  });

  /** Schedules `ids` due a second ago in partition 0 and fires them: ready, in that order. */
  async function readyNow(driver: PostgresDriver, owner: Owner, ids: string[]): Promise<void> {
    const due = Date.now() - 1_000;
    const seg = `w${windowOf(due)}`;
    await driver.schedule(
      0,
      ids.map((id) => message({ id, deliverAt: due })),
    );
    await driver.load(0, owner, due + 1, false);
    const read = await driver.read(0, seg, 0, 10);
    await driver.fire(
      0,
      owner,
      0,
      read.live.map((row) => ({ ...at(0, row.id), seg, index: row.index })),
    );
  }

  /** The database loses a message's record (as a restore from an older backup would). */
  async function loseRecord(driver: PostgresDriver, id: string): Promise<void> {
    const schema = (driver as unknown as { q: string }).q;
    await pg.pool.query(
      `DELETE FROM ${schema}.records r USING ${schema}.states s
       WHERE s.part = 0 AND s.id = $1 AND r.part = 0 AND r.seg = s.seg AND r.idx = s.idx`,
      [id],
    );
  }

  it('drops a ready message whose record is gone, says so, and takes the ones behind it', async () => {
    const errors: Error[] = [];
    const driver = await pg.open(undefined, undefined, { onError: (err) => errors.push(err) });
    await readyNow(driver, await own(driver, 0), ['a', 'b', 'c']);
    await loseRecord(driver, 'a');
    // A take of one is not stuck behind it.
    expect((await driver.take(0, 'invoice', 1, 30_000, 1 << 20)).map((t) => t.id)).toEqual(['b']);
    expect(errors.map((err) => (err as { code?: string }).code)).toEqual([
      'ERR_TICKWHEEL_DATA_LOST',
    ]);
    expect(errors[0].message).toContain('message a (partition 0) was ready (topic invoice)');
    expect(await driver.get(at(0, 'a'))).toBeUndefined();
    expect(await driver.readyPartitions('invoice', 4)).toEqual([0]);
    expect(await driver.counts(0)).toEqual({ 'invoice|R': 1, 'invoice|I': 1 });
  });

  it('drops an in-flight message whose record is gone when it is overdue, says so, and answers the ones behind it', async () => {
    const errors: Error[] = [];
    const driver = await pg.open(undefined, undefined, { onError: (err) => errors.push(err) });
    await readyNow(driver, await own(driver, 0), ['a', 'b']);
    // Out for 1 ms, the last failure's reason kept (a's row in reasons goes with it).
    expect((await driver.take(0, 'invoice', 2, 1, 1 << 20)).map((t) => t.id)).toEqual(['a', 'b']);
    const schema = (driver as unknown as { q: string }).q;
    await pg.pool.query(`INSERT INTO ${schema}.reasons VALUES (0, 'a', 'declined')`);
    await loseRecord(driver, 'a');
    const overdue = await waitFor(async () => {
      const found = await driver.overdue(0, Date.now(), 10);
      return found.length > 0 ? found : undefined;
    });
    expect(overdue.map((d) => d.id)).toEqual(['b']);
    expect(errors.map((err) => (err as { code?: string }).code)).toEqual([
      'ERR_TICKWHEEL_DATA_LOST',
    ]);
    expect(errors[0].message).toContain('message a (partition 0) was in flight');
    expect(await driver.get(at(0, 'a'))).toBeUndefined();
    expect(await driver.reasons(0, ['a'])).toEqual([undefined]);
    expect(await driver.counts(0)).toEqual({ 'invoice|I': 1 });
    // Only a lost one overdue: answered with none, and reported once.
    await loseRecord(driver, 'b');
    expect(await driver.overdue(0, Date.now(), 10)).toEqual([]);
    expect(errors).toHaveLength(2);
    expect(await driver.counts(0)).toEqual({});
  });

  it('refuses owner-only calls from anyone but the current epoch within its lease', async () => {
    const driver = await pg.open();
    const owner = await own(driver, 2);
    const stale = { node: owner.node, epoch: owner.epoch - 1 };
    const other = { node: 'node-b', epoch: owner.epoch };
    for (const by of [stale, other]) {
      expect(await driver.load(2, by, 1, false)).toBeUndefined();
      expect(await driver.fire(2, by, 0, [])).toBeUndefined();
      expect(await driver.expire(2, by, [])).toBeUndefined();
    }
    const a = await driver.load(2, owner, 1, false);
    const b = await driver.fire(2, owner, 0, []);
    const c = await driver.expire(2, owner, []);
    expect(a!.seq).toBeLessThan(b!.seq);
    expect(b!.seq).toBeLessThan(c!.seq);
    // A new acquire (after a release) fences the epoch before it.
    await driver.lease(2, 'release', owner, 0);
    const again = await own(driver, 2);
    expect(again.epoch).toBe(owner.epoch + 1);
    expect(await driver.load(2, owner, 1, false)).toBeUndefined();
    expect(await driver.load(2, again, 1, false)).toBeDefined();
  });

  it("does not fire a message more than the skew allowed ahead of the store's clock", async () => {
    const driver = await pg.open();
    const owner = await own(driver, 0);
    const due = Date.now() + 60_000;
    await driver.load(0, owner, due + 1, false);
    const answer = await driver.schedule(0, [message({ id: 'later', deliverAt: due })]);
    expect(answer.existing).toEqual([undefined]);
    const [near] = await driver.nearSegments(0);
    const place = { ...at(0, 'later'), seg: near, index: 0 };
    expect(await driver.fire(0, owner, 1_000, [place])).toMatchObject({
      fired: 0,
      early: ['later'],
    });
    expect(await driver.fire(0, owner, 120_000, [place])).toMatchObject({ fired: 1, early: [] });
  });

  it('retries a nacked delivery, buries it after maxAttempts with its reason, and requeues it', async () => {
    const driver = await pg.open();
    const owner = await own(driver, 3);
    const due = Date.now() - 1_000;
    await driver.schedule(3, [message({ id: 'n-1', deliverAt: due, maxAttempts: 2 })]);
    await driver.load(3, owner, Date.now() + 60_000, false);
    const fireAt = async (seg: string, index: number) =>
      driver.fire(3, owner, 0, [{ ...at(3, 'n-1'), seg, index }]);
    await fireAt(`w${windowOf(due)}`, 0);
    const [first] = await driver.take(3, 'invoice', 1, 30_000, 1 << 20);
    const retryAt = Date.now() + 3_000;
    const retry = { ...at(3, 'n-1'), attempt: 1, due: retryAt, window: windowOf(retryAt) };
    expect(first.attempts).toBe(1);
    expect(await driver.nack(3, { ...retry, attempt: 2 }, 'nope', false)).toBeUndefined();
    expect(await driver.nack(3, retry, 'timeout talking to the bank', false)).toBe('retry');
    expect(await driver.get(at(3, 'n-1'))).toMatchObject({
      status: 'scheduled',
      deliverAt: retryAt,
      attempts: 1,
    });
    expect(await driver.reasons(3, ['n-1', 'other'])).toEqual([
      'timeout talking to the bank',
      undefined,
    ]);
    // Due inside the loaded horizon: the retry went to the near segment.
    const [near] = await driver.nearSegments(3);
    const read = await driver.read(3, near, 0, 10);
    expect(read.live.map((row) => [row.id, row.status, row.attempts])).toEqual([['n-1', 'S', 1]]);
    // Fired ahead of its due time: ready, handed out once due, told when it will be.
    const events: string[] = [];
    const stop = await driver.subscribe(3, (event) => events.push(event));
    await driver.fire(3, owner, 10_000, [{ ...at(3, 'n-1'), seg: near, index: 0 }]);
    await waitFor(() => events.includes(`a ${retryAt} invoice`));
    events.length = 0;
    expect(await driver.take(3, 'invoice', 1, 30_000, 1 << 20)).toEqual([]);
    expect(events).toEqual([`a ${retryAt} invoice`]);
    // Found by a consumer's scan, whose take then learns when it is due.
    expect(await driver.readyPartitions('invoice', 4)).toEqual([3]);
    await stop();
    await waitFor(() => Date.now() >= retryAt);
    expect((await driver.take(3, 'invoice', 1, 30_000, 1 << 20))[0].attempts).toBe(2);
    expect(await driver.nack(3, { ...retry, attempt: 2 }, 'declined', false)).toBe('dead');
    expect(await driver.get(at(3, 'n-1'))).toMatchObject({ status: 'dead', attempts: 2 });
    expect(await driver.reasons(3, ['n-1'])).toEqual(['declined']);
    const dead = await driver.dead(3, 'invoice', 10);
    expect(dead.map((d) => d.id)).toEqual(['n-1']);
    expect(dead[0].died).toBeGreaterThan((Date.now() - 60_000) * 1000);
    expect(await driver.counts(3)).toEqual({ 'invoice|D': 1 });
    expect((await driver.stored(at(3, 'n-1')))?.deliverAt).toBe(retryAt);

    const later = Date.now() + 3_600_000;
    expect(await driver.move('reschedule', at(3, 'n-1'), later, windowOf(later))).toBe(false);
    expect(await driver.move('requeue', at(3, 'n-1'), later, windowOf(later))).toBe(true);
    expect(await driver.get(at(3, 'n-1'))).toMatchObject({
      status: 'scheduled',
      attempts: 0,
      deliverAt: later,
    });
    expect(await driver.dead(3, 'invoice', 10)).toEqual([]);
    expect(await driver.counts(3)).toEqual({ 'invoice|S': 1 });
  });

  it('lists dead letters in the order they died, even within one call', async () => {
    const driver = await pg.open();
    const owner = await own(driver, 0);
    const due = Date.now() - 1_000;
    const ids = ['d-3', 'd-1', 'd-2'];
    await driver.schedule(
      0,
      ids.map((id) => message({ id, deliverAt: due, maxAttempts: 1 })),
    );
    await driver.load(0, owner, due + 1, false);
    const read = await driver.read(0, `w${windowOf(due)}`, 0, 10);
    await driver.fire(
      0,
      owner,
      0,
      read.live.map((row) => ({ ...at(0, row.id), seg: `w${windowOf(due)}`, index: row.index })),
    );
    await driver.take(0, 'invoice', 10, 1, 1 << 20);
    const overdue = await waitFor(async () => {
      const found = await driver.overdue(0, Date.now(), 10);
      return found.length === 3 ? found : undefined;
    });
    const retries = overdue.map((d) => ({
      id: d.id,
      bucket: d.bucket,
      attempt: d.attempts,
      due,
      window: windowOf(due),
    }));
    const expired = await driver.expire(0, owner, retries);
    expect(expired?.outcomes).toEqual(['dead', 'dead', 'dead']);
    const dead = await driver.dead(0, 'invoice', 10);
    const died = dead.map((d) => d.died);
    expect(died).toEqual([...died].sort((a, b) => a - b));
    expect(new Set(died).size).toBe(3);
    expect(await driver.reasons(0, ids)).toEqual(ids.map(() => VISIBILITY_REASON));
  });

  it('lets the owner expire a delivery whose visibility ran out, and leaves one still out', async () => {
    const driver = await pg.open();
    const owner = await own(driver, 1);
    const due = Date.now() - 1_000;
    await driver.schedule(1, [
      message({ id: 'x-1', deliverAt: due }),
      message({ id: 'x-2', deliverAt: due, topic: 'slow' }),
    ]);
    await driver.load(1, owner, due + 1, false);
    const seg = `w${windowOf(due)}`;
    await driver.fire(1, owner, 0, [
      { ...at(1, 'x-1'), seg, index: 0 },
      { ...at(1, 'x-2'), seg, index: 1 },
    ]);
    await driver.take(1, 'invoice', 1, 1, 1 << 20);
    await driver.take(1, 'slow', 1, 600_000, 1 << 20);
    await waitFor(async () => (await driver.overdue(1, Date.now(), 10)).length === 1);
    const [out] = await driver.overdue(1, Date.now(), 10);
    expect(out).toMatchObject({ id: 'x-1', attempts: 1, deliverAt: due });
    const retryAt = Date.now() + 3_600_000;
    const retries = ['x-1', 'x-2'].map((id) => ({
      ...at(1, id),
      attempt: 1,
      due: retryAt,
      window: windowOf(retryAt),
    }));
    const expired = await driver.expire(1, owner, retries);
    expect(expired?.outcomes).toEqual(['retried', 'left']);
    expect(await driver.get(at(1, 'x-1'))).toMatchObject({
      status: 'scheduled',
      deliverAt: retryAt,
    });
    expect(await driver.get(at(1, 'x-2'))).toMatchObject({ status: 'inflight' });
    expect(await driver.counts(1)).toEqual({ 'invoice|S': 1, 'slow|I': 1 });
  });

  it('cancels a message in any live state: ready, in flight, dead', async () => {
    const driver = await pg.open();
    const owner = await own(driver, 2);
    const due = Date.now() - 1_000;
    const ids = ['r', 'i', 'd'];
    await driver.schedule(
      2,
      ids.map((id) => message({ id, deliverAt: due, topic: id, maxAttempts: 1 })),
    );
    await driver.load(2, owner, due + 1, false);
    const seg = `w${windowOf(due)}`;
    await driver.fire(
      2,
      owner,
      0,
      ids.map((id, index) => ({ ...at(2, id), seg, index })),
    );
    await driver.take(2, 'i', 1, 60_000, 1 << 20);
    await driver.take(2, 'd', 1, 60_000, 1 << 20);
    await driver.nack(2, { ...at(2, 'd'), attempt: 1, due, window: windowOf(due) }, 'no', false);
    expect(await driver.counts(2)).toEqual({ 'r|R': 1, 'i|I': 1, 'd|D': 1 });
    for (const id of ids) expect(await driver.cancel(at(2, id))).toMatchObject({ topic: id });
    expect(await driver.counts(2)).toEqual({});
    expect(await driver.take(2, 'r', 1, 60_000, 1 << 20)).toEqual([]);
    expect(await driver.dead(2, 'd', 10)).toEqual([]);
    expect(await driver.reasons(2, ['d'])).toEqual([undefined]);
    expect(await driver.segmentSizes(2)).toEqual({});
  });
  it('fires, takes and expires in one call messages whose records are in several segments', async () => {
    const driver = await pg.open();
    const owner = await own(driver, 0);
    const now = Date.now();
    // Two windows, a located run and a message with an id in each.
    const dues = [now - 40_000, now - 1_000];
    const segs = dues.map((due) => `w${windowOf(due)}`);
    const runs = dues.map((due) => [
      located(due, 'mail', 'first'),
      located(due + 1, 'mail', 'second'),
    ]);
    for (const [k, due] of dues.entries()) {
      await driver.schedule(0, [
        message({ id: `m${k}`, deliverAt: due, topic: 'mail' }),
        run(runs[k], 'mail'),
      ]);
    }
    await driver.load(0, owner, now, false);
    const placed = [];
    for (const seg of segs) {
      const read = await driver.read(0, seg, 0, 10);
      placed.push(...read.live.map((row) => ({ ...at(0, row.id), seg, index: row.index })));
    }
    // A located id whose tag is not its record's, at a real place: never fired.
    const wrong = { ...placed[1], id: locatedId(0, segs[0], 1, runs[0][1].tag) };
    expect(await driver.fire(0, owner, 0, [...placed, wrong])).toMatchObject({ fired: 6 });
    const records = new Map(
      runs.flatMap((records, k) =>
        records.map((loc, i) => [locatedId(0, segs[k], i + 1, loc.tag), loc.record]),
      ),
    );
    const taken = await driver.take(0, 'mail', 10, 1, 1 << 20);
    expect(taken.map((t) => t.id)).toEqual(placed.map((p) => p.id));
    for (const t of taken.filter((t) => records.has(t.id))) {
      expect(t.record.equals(records.get(t.id)!)).toBe(true);
    }
    const overdue = await waitFor(async () => {
      const found = await driver.overdue(0, Date.now(), 10);
      return found.length === 6 ? found : undefined;
    });
    expect(overdue.map((o) => o.id)).toEqual(taken.map((t) => t.id));
    expect(overdue.map((o) => o.record)).toEqual(taken.map((t) => t.record));
  });
});
