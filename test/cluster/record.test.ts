/**
 * Cluster records (src/partitioned/record.ts) without a server: both forms (with an id, located)
 * round-trip every field, a text payload is written in as UTF-8, located ids parse only in the
 * form tickwheel writes, and placeOf routes a located id to the partition it names.
 */

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeRecord,
  encodeRecord,
  locatedId,
  parseLocated,
  placeOf,
} from '../../src/partitioned/record.js';
import type { Backoff } from '../../src/queue/message.js';

const backoffs: Array<Backoff | undefined> = [
  undefined,
  { type: 'fixed', delayMs: 250 },
  { type: 'exponential', delayMs: 100, jitter: 0.5 },
  { type: 'exponential', delayMs: 100, maxDelayMs: 60_000 },
  { type: 'fixed', delayMs: 1.5, jitter: 0.25, maxDelayMs: 9 },
];

describe('cluster records', () => {
  it('round-trip with an id and located, bytes or text, every back-off', () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[A-Za-z0-9._:-]{1,40}$/),
        fc.stringMatching(/^[a-z]{1,20}$/),
        fc.integer({ min: 1, max: 0xffff }),
        fc.constantFrom(...backoffs),
        fc.oneof(fc.string(), fc.uint8Array({ maxLength: 64 })),
        fc.boolean(),
        fc.integer({ min: 0, max: 2 ** 40 }),
        (id, topic, maxAttempts, backoff, payload, located, deliverAt) => {
          const fields = { id, topic, maxAttempts, backoff, payloadKind: 3, payload };
          const buf = located
            ? encodeRecord(fields, 0, { tag: 'Kx3_a9Qb', deliverAt })
            : encodeRecord(fields, 1234);
          const back = decodeRecord(buf);
          expect(back).toMatchObject({ topic, maxAttempts, payloadKind: 3 });
          expect(back.backoff).toEqual(backoff);
          const bytes = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload;
          expect(Buffer.from(back.payload).equals(Buffer.from(bytes))).toBe(true);
          if (located) {
            expect(back).toMatchObject({ id: '', tag: 'Kx3_a9Qb', deliverAt });
            expect(buf[0]).toBe(0);
          } else {
            expect(back).toMatchObject({ id, bucket: 1234 });
            expect(back.tag).toBeUndefined();
          }
        },
      ),
    );
  });

  it('parses a located id only in the form it is made', () => {
    const id = locatedId(12, 'w59207114', 4081, 'Kx3_a9Qb');
    expect(id).toBe('@12.w59207114.4081.Kx3_a9Qb');
    expect(parseLocated(id)).toEqual({
      partition: 12,
      seg: 'w59207114',
      index: 4081,
      tag: 'Kx3_a9Qb',
    });
    expect(parseLocated(locatedId(0, 'n3', 0, 'a'))).toMatchObject({ partition: 0, index: 0 });
    for (const other of [
      'o-1001',
      '@012.w1.2.t',
      '@12.w1.02.t',
      '@12.x1.2.t',
      '@12.w1.2',
      '@12.w1.2.t.u',
      '@12.w1.2.ta g',
    ]) {
      expect(parseLocated(other), other).toBeUndefined();
    }
  });

  it('routes a located id to the partition it names, others by hash', () => {
    expect(placeOf('@5.w1.2.t', 8).partition).toBe(5);
    // A partition the queue does not have: hashed like any id (and then not found there).
    const hashed = placeOf('@9.w1.2.t', 8).partition;
    expect(hashed).toBeGreaterThanOrEqual(0);
    expect(hashed).toBeLessThan(8);
    expect(placeOf('o-1001', 8)).toEqual(placeOf('o-1001', 8));
  });
});
