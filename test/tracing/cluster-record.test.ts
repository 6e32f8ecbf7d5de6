/**
 * The trace context in a cluster record (src/partitioned/record.ts): with an id or located, absent
 * from a record without one; a damaged one never takes the rest of the record with it.
 */

import { describe, expect, it } from 'vitest';
import { decodeRecord, encodeRecord } from '../../src/partitioned/record.js';
import { TickwheelCorruptError } from '../../src/errors.js';
import { CALLER } from './otel.js';

const TRACE = { traceparent: CALLER.traceparent, tracestate: CALLER.tracestate };

describe('the trace context of a cluster record', () => {
  const fields = {
    id: 'order-9',
    topic: 'emails',
    maxAttempts: 3,
    backoff: { type: 'fixed' as const, delayMs: 10 },
    payloadKind: 0,
    payload: '{"a":1}',
  };

  it('round-trips with an id and located, and is absent from a record without one', () => {
    for (const trace of [TRACE, { traceparent: CALLER.traceparent }, undefined]) {
      for (const buf of [
        encodeRecord({ ...fields, trace }, 77),
        encodeRecord({ ...fields, trace }, 0, { tag: 'Kx3_a9Qb', deliverAt: 1e12 }),
      ]) {
        const back = decodeRecord(buf);
        expect(back.trace).toEqual(trace);
        expect(Buffer.from(back.payload).toString()).toBe('{"a":1}');
        expect(back).toMatchObject({ topic: 'emails', maxAttempts: 3, backoff: fields.backoff });
      }
    }
    const plain = encodeRecord(fields, 77);
    expect(encodeRecord({ ...fields, trace: TRACE }, 77).length - plain.length).toBe(
      3 + 55 + CALLER.tracestate.length,
    );
  });

  it('refuses a record whose context runs past its end; drops one that does not parse', () => {
    const buf = encodeRecord({ ...fields, payload: '', trace: TRACE }, 77);
    const lengthsAt = buf.length - 3 - 55 - CALLER.tracestate.length;
    const long = Buffer.from(buf);
    long.writeUInt16LE(4000, lengthsAt + 1);
    expect(() => decodeRecord(long)).toThrow(TickwheelCorruptError);
    const bad = Buffer.from(buf);
    bad[lengthsAt + 3] = 0x78; // 'x' for the version
    expect(decodeRecord(bad)).toMatchObject({ trace: undefined, topic: 'emails' });
  });
});
