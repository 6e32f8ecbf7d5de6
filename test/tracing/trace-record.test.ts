/**
 * The trace context in the file store's SCHEDULE record (src/store/file/records.ts): written
 * only for a message that has one, read back as written, and a damaged one never takes the
 * message's payload or other fields with it.
 */

import { describe, expect, it } from 'vitest';
import { TickwheelCorruptError } from '../../src/errors.js';
import type { MessageState } from '../../src/queue/message.js';
import type { TraceContext } from '../../src/protocol/trace-context.js';
import { decodeSchedule, scheduleLength, writeScheduleHead } from '../../src/store/file/records.js';

const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

function message(trace: TraceContext | undefined, payloadKind = 0): MessageState {
  return {
    id: 'order-17',
    topic: 'emails',
    deliverAt: Date.UTC(2026, 0, 1),
    attempts: 2,
    maxAttempts: 5,
    backoff: { type: 'fixed', delayMs: 250 },
    payloadKind,
    payload: undefined,
    ref: 0,
    trace,
  };
}

function encode(state: MessageState, payload: Buffer): Buffer {
  const body = Buffer.alloc(scheduleLength(state, payload.length));
  payload.copy(body, writeScheduleHead(body, 0, state));
  return body;
}

describe('the trace context of a SCHEDULE record', () => {
  const payload = Buffer.from('{"to":"a@example.com"}');

  it.each([
    ['no context', undefined],
    ['a traceparent', { traceparent: PARENT }],
    [
      'a traceparent and a tracestate',
      { traceparent: PARENT, tracestate: 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7' },
    ],
    [
      'a tracestate of 512 characters',
      { traceparent: PARENT, tracestate: `a=${'v'.repeat(254)},b=${'v'.repeat(253)}` },
    ],
  ])('round-trips %s with the payload and every other field', (_, trace) => {
    for (const kind of [0, 1]) {
      const state = message(trace, kind);
      const decoded = decodeSchedule(encode(state, payload));
      expect(decoded).toEqual({
        deliverAt: state.deliverAt,
        attempts: 2,
        maxAttempts: 5,
        backoff: { type: 'fixed', delayMs: 250 },
        payloadKind: kind,
        id: 'order-17',
        topic: 'emails',
        payload,
        trace,
      });
    }
  });

  it('costs nothing in a record without one (the layout of records written before it)', () => {
    const plain = encode(message(undefined), payload);
    const traced = encode(message({ traceparent: PARENT }), payload);
    expect(traced.length - plain.length).toBe(3 + 55);
    expect(plain[37]).toBe(0);
    expect(traced[37]).toBe(0x80);
  });

  it('refuses a record whose context lengths run past its end as corrupt', () => {
    const body = encode(message({ traceparent: PARENT }), Buffer.alloc(0));
    const lengthsAt = 39 + 'order-17'.length + 'emails'.length + 1;
    const longState = Buffer.from(body);
    longState.writeUInt16LE(1000, lengthsAt + 1);
    expect(() => decodeSchedule(longState)).toThrow(TickwheelCorruptError);
    const cut = body.subarray(0, lengthsAt + 2);
    expect(() => decodeSchedule(cut)).toThrow(TickwheelCorruptError);
  });

  it('drops a context whose bytes are not a trace context, keeping the message whole', () => {
    const body = encode(message({ traceparent: PARENT, tracestate: 'a=b' }), payload);
    const parentAt = 39 + 'order-17'.length + 'emails'.length + 1 + 3;
    const badParent = Buffer.from(body);
    badParent[parentAt + 5] = 0x5a; // 'Z' in the trace id
    const decoded = decodeSchedule(badParent);
    expect(decoded.trace).toBeUndefined();
    expect(decoded.payload).toEqual(payload);
    expect(decoded.id).toBe('order-17');
    const badState = Buffer.from(body);
    badState[parentAt + 55] = 0x2c; // ',' alone: no member left
    badState[parentAt + 56] = 0x2c;
    badState[parentAt + 57] = 0x2c;
    expect(decodeSchedule(badState).trace).toEqual({ traceparent: PARENT });
  });
});
