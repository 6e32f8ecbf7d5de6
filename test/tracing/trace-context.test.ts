/** Checking W3C trace context values (src/protocol/trace-context.ts): bounded, never a throw. */

import { describe, expect, it } from 'vitest';
import { traceContextOf, traceContextOfHeaders } from '../../src/protocol/trace-context.js';

const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

describe('trace context values', () => {
  it('keeps a well-formed traceparent and tracestate', () => {
    expect(traceContextOf(PARENT, 'rojo=00f067aa0ba902b7, congo=t61rcWkgMzE')).toEqual({
      traceparent: PARENT,
      tracestate: 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE',
    });
  });

  it.each([
    ['upper-case hex', PARENT.toUpperCase()],
    ['an all-zero trace id', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`],
    ['an all-zero parent id', `00-4bf92f3577b34da6a3ce929d0e0e4736-${'0'.repeat(16)}-01`],
    ['version ff', `ff${PARENT.slice(2)}`],
    ['version 00 with more fields', `${PARENT}-extra`],
    ['a short trace id', '00-4bf92f35-00f067aa0ba902b7-01'],
    ['a number', 42],
    ['a very long string', 'x'.repeat(100_000)],
  ])('drops a traceparent with %s', (_, value) => {
    expect(traceContextOf(value, 'a=b')).toBeUndefined();
  });

  it('reads a later version as version 00, dropping its extra fields', () => {
    expect(traceContextOf(`01${PARENT.slice(2)}-later`)).toEqual({ traceparent: PARENT });
  });

  it.each([
    ['over 512 characters', `k=${'v'.repeat(511)}`],
    ['over 32 members', Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(',')],
    ['a member without =', 'rojo'],
    ['a control character', 'a=b\u0001'],
  ])('drops a tracestate %s but keeps the traceparent', (_, state) => {
    expect(traceContextOf(PARENT, state)).toEqual({ traceparent: PARENT });
  });

  it('ignores repeated traceparent headers and joins repeated tracestate headers', () => {
    expect(traceContextOfHeaders({ traceparent: [PARENT, PARENT] })).toBeUndefined();
    expect(traceContextOfHeaders({ traceparent: PARENT, tracestate: ['a=1', 'b=2'] })).toEqual({
      traceparent: PARENT,
      tracestate: 'a=1,b=2',
    });
  });
});
