/**
 * The ValkeyDriver's reads of a partition's keys (src/cluster/driver.ts) on a real Valkey: what
 * the engine asks of any PartitionDriver, answered in its terms (window numbers, near segments,
 * lease holders, Infinity for no delivery out), from an empty partition and from one holding
 * messages in windows and in a near segment.
 */

import { describe, expect, it } from 'vitest';
import type { ValkeyDriver } from '../../src/cluster/driver.js';
import type { Owner, ToSchedule } from '../../src/partitioned/driver.js';
import { encodeRecord, placeOf } from '../../src/partitioned/record.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed } from '../../scripts/valkey.mjs';
import { waitFor } from '../support/wait-for.js';
import { valkeyDriver, withValkey } from './with-valkey.js';

const PARTITIONS = 2;
const WINDOW_MS = 1_000;

/** A message of topic t with an id in partition 0, due at `deliverAt`. */
function message(prefix: string, deliverAt: number): ToSchedule {
  let id = prefix;
  for (let i = 0; placeOf(id, PARTITIONS).partition !== 0; i++) id = `${prefix}-${i}`;
  const { bucket } = placeOf(id, PARTITIONS);
  const fields = { id, topic: 't', maxAttempts: 1, backoff: undefined, payloadKind: 1 };
  const record = encodeRecord({ ...fields, payload: '"x"' }, bucket);
  return { id, bucket, deliverAt, window: Math.floor(deliverAt / WINDOW_MS), topic: 't', record };
}

describe.runIf(installed('valkey-server'))('the Valkey driver', () => {
  const servers = withValkey();

  it('answers an empty partition with nothing: no windows, no near segment, no delivery out', async () => {
    const driver = valkeyDriver(servers.valkey, 'empty');
    expect(await driver.windows(0, -Infinity, Infinity)).toEqual([]);
    expect(await driver.nearSegments(0)).toEqual([]);
    expect(await driver.earliestVisibility(0)).toBe(Infinity);
    expect(await driver.loadedUntil(0)).toBe(0);
    expect(await driver.counts(0)).toEqual({});
    expect(await driver.segmentSizes(0)).toEqual({});
    expect(await driver.reasons(0, [])).toEqual([]);
    expect(await driver.dead(0, 't', 10)).toEqual([]);
    expect(await driver.leaseHolders(PARTITIONS)).toEqual([
      { owner: '', until: 0 },
      { owner: '', until: 0 },
    ]);
  });

  it('reads windows from one up to before another, and the near segments that hold records', async () => {
    const driver = valkeyDriver(servers.valkey, 'filled');
    const entries = [5_500, 7_500, 9_500].map((due, i) => ({
      kind: 'message' as const,
      ...message(`far-${i}`, due),
    }));
    const { existing } = await driver.schedule(0, entries);
    // Undefined for each created (the reply may leave them out altogether).
    expect(entries.map((_, k) => existing[k])).toEqual([undefined, undefined, undefined]);
    expect(await driver.windows(0, -Infinity, Infinity)).toEqual([5, 7, 9]);
    expect(await driver.windows(0, 5, 9)).toEqual([5, 7]);
    expect(await driver.windows(0, 6, Infinity, 1)).toEqual([7]);

    const by = { node: 'a', epoch: 0 };
    const lease = await driver.lease(0, 'acquire', by, 60_000);
    expect(lease.granted).toBe(true);
    const loaded = await driver.load(0, { node: 'a', epoch: lease.epoch }, 8_000, true);
    expect(loaded?.loadedUntil).toBe(8_000);
    expect(await driver.loadedUntil(0)).toBe(8_000);
    // Below loadedUntil: into the near segment the load made.
    await driver.schedule(0, [{ kind: 'message', ...message('near', 6_000) }]);
    expect(await driver.nearSegments(0)).toEqual([loaded?.near]);
    expect(await driver.segmentSizes(0)).toEqual({ w5: 1, w7: 1, w9: 1, [loaded!.near]: 1 });
    expect(await driver.counts(0)).toEqual({ 't|S': 4 });

    const [mine, other] = await driver.leaseHolders(PARTITIONS);
    expect(mine.owner).toBe('a');
    expect(mine.until).toBeGreaterThan(0);
    expect(other).toEqual({ owner: '', until: 0 });
  });

  /**
   * Messages made ready in partition 0, each in a window of its own (so that losing one's
   * segment loses only its record), in the order given.
   */
  async function readyNow(driver: ValkeyDriver, names: string[]) {
    const lease = await driver.lease(0, 'acquire', { node: 'a', epoch: 0 }, 60_000);
    const owner: Owner = { node: 'a', epoch: lease.epoch };
    const now = Date.now();
    const messages = names.map((name, k) => message(name, now - 10_000 + k * WINDOW_MS));
    await driver.schedule(
      0,
      messages.map((m) => ({ kind: 'message' as const, ...m })),
    );
    await driver.load(0, owner, now, false);
    for (const m of messages) {
      const seg = `w${m.window}`;
      const { live } = await driver.read(0, seg, 0, 10);
      await driver.fire(0, owner, 0, [{ id: m.id, bucket: m.bucket, seg, index: live[0].index }]);
    }
    return messages;
  }

  /** Deletes a message's segment, as a failover to a replica that never had it would. */
  async function loseRecord(queue: string, m: ToSchedule) {
    const key = `tw:{${queue}:0}:s:w${m.window}`;
    expect(await servers.valkey.command(key, ['DEL', key])).toBe(1);
  }

  /** The counts not zero (Valkey keeps a count's field when it falls to 0). */
  const live = async (driver: ValkeyDriver) =>
    Object.fromEntries(Object.entries(await driver.counts(0)).filter(([, n]) => n !== 0));

  const codes = (errors: Error[]) => errors.map((err) => (err as { code?: string }).code);

  it('drops a ready message whose record is gone, says so, and takes the ones behind it', async () => {
    const errors: Error[] = [];
    const driver = valkeyDriver(servers.valkey, 'lost-ready', 'async', undefined, (err) => {
      errors.push(err);
    });
    const [a, b] = await readyNow(driver, ['a', 'b', 'c']);
    await loseRecord('lost-ready', a);
    // A take of one is not stuck behind it.
    expect((await driver.take(0, 't', 1, 30_000, 1 << 20)).map((t) => t.id)).toEqual([b.id]);
    expect(codes(errors)).toEqual(['ERR_TICKWHEEL_DATA_LOST']);
    expect(errors[0].message).toContain(`message ${a.id} (partition 0) was ready (topic t)`);
    expect(await driver.get({ partition: 0, id: a.id, bucket: a.bucket })).toBeUndefined();
    expect(await driver.readyPartitions('t', PARTITIONS)).toEqual([0]);
    expect(await live(driver)).toEqual({ 't|R': 1, 't|I': 1 });
  });

  it('drops an in-flight message whose record is gone when it is overdue, says so, and answers the ones behind it', async () => {
    const errors: Error[] = [];
    const driver = valkeyDriver(servers.valkey, 'lost-out', 'async', undefined, (err) => {
      errors.push(err);
    });
    const [a, b] = await readyNow(driver, ['a', 'b']);
    // Out for 1 ms.
    const taken = await driver.take(0, 't', 2, 1, 1 << 20);
    expect(taken.map((t) => t.id)).toEqual([a.id, b.id]);
    await loseRecord('lost-out', a);
    const overdue = await waitFor(async () => {
      const found = await driver.overdue(0, Date.now() + 5_000, 10);
      return found.length > 0 ? found : undefined;
    });
    expect(overdue.map((d) => d.id)).toEqual([b.id]);
    expect(codes(errors)).toEqual(['ERR_TICKWHEEL_DATA_LOST']);
    expect(errors[0].message).toContain(`message ${a.id} (partition 0) was in flight`);
    expect(await driver.get({ partition: 0, id: a.id, bucket: a.bucket })).toBeUndefined();
    expect(await live(driver)).toEqual({ 't|I': 1 });
    expect(await driver.earliestVisibility(0)).toBeLessThan(Infinity);
    // A nack of one whose record went since: dropped and reported, not an error of the call.
    await loseRecord('lost-out', b);
    const retry = { id: b.id, bucket: b.bucket, attempt: 1, due: Date.now(), window: b.window };
    expect(await driver.nack(0, retry, 'declined', false)).toBeUndefined();
    expect(codes(errors)).toEqual(['ERR_TICKWHEEL_DATA_LOST', 'ERR_TICKWHEEL_DATA_LOST']);
    expect(await live(driver)).toEqual({});
    expect(await driver.earliestVisibility(0)).toBe(Infinity);
  });
});
