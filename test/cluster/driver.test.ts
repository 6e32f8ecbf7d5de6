/**
 * The ValkeyDriver's reads of a partition's keys (src/cluster/driver.ts) on a real Valkey: what
 * the engine asks of any PartitionDriver, answered in its terms (window numbers, near segments,
 * lease holders, Infinity for no delivery out), from an empty partition and from one holding
 * messages in windows and in a near segment.
 */

import { describe, expect, it } from 'vitest';
import type { ToSchedule } from '../../src/partitioned/driver.js';
import { encodeRecord, placeOf } from '../../src/partitioned/record.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed } from '../../scripts/valkey.mjs';
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
});
