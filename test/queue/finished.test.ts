import { describe, expect, it } from 'vitest';
import { FinishedMemory } from '../../src/queue/finished.js';
import type { MessageState } from '../../src/queue/message.js';

function state(id: string): MessageState {
  return {
    id,
    topic: 't',
    deliverAt: 0,
    attempts: 1,
    maxAttempts: 5,
    backoff: undefined,
    payloadKind: 0,
    payload: new Uint8Array(3),
    ref: 0,
  };
}

describe('FinishedMemory', () => {
  it('remembers between `capacity` and twice that many of the latest finished ids', () => {
    const memory = new FinishedMemory(100);
    for (let i = 0; i < 1000; i++) memory.remember(state(`m${i}`), i % 2 ? 'acked' : 'cancelled');
    const known = Array.from({ length: 1000 }, (_, i) => memory.get(`m${i}`) !== undefined);
    const count = known.filter(Boolean).length;
    expect(count).toBeGreaterThanOrEqual(100);
    expect(count).toBeLessThanOrEqual(200);
    // The ones remembered are the latest.
    expect(known.slice(1000 - count).every(Boolean)).toBe(true);
    expect(memory.get('m999')).toMatchObject({ status: 'acked', payload: undefined });
  });

  it('finds the latest finish of an id first, and remembers nothing at capacity 0', () => {
    const memory = new FinishedMemory(2);
    memory.remember(state('a'), 'cancelled');
    memory.remember(state('b'), 'acked'); // 'a' and 'b' now in the older generation
    memory.remember(state('a'), 'acked');
    expect(memory.get('a')?.status).toBe('acked');
    const none = new FinishedMemory(0);
    none.remember(state('a'), 'acked');
    expect(none.get('a')).toBeUndefined();
  });
});

describe('FinishedMemory, asked while it fills', () => {
  it('finds what was finished since the last get, in both generations, the latest finish first', () => {
    const memory = new FinishedMemory(4);
    memory.remember(state('a'), 'cancelled');
    expect(memory.get('a')?.status).toBe('cancelled');
    expect(memory.get('b')).toBeUndefined();
    memory.remember(state('b'), 'acked');
    memory.remember(state('a'), 'acked'); // the same id, finished again
    expect(memory.get('b')?.status).toBe('acked');
    expect(memory.get('a')?.status).toBe('acked');
    memory.remember(state('c'), 'acked'); // the generation is full: it becomes the older one
    memory.remember(state('d'), 'cancelled');
    expect(['a', 'b', 'c', 'd'].map((id) => memory.get(id)?.status)).toEqual([
      'acked',
      'acked',
      'acked',
      'cancelled',
    ]);
    for (const id of ['e', 'f', 'g', 'h']) memory.remember(state(id), 'acked');
    // Two rollovers later, the first generation is gone.
    expect(memory.get('a')).toBeUndefined();
    expect(memory.get('d')?.status).toBe('cancelled');
    expect(memory.get('h')?.status).toBe('acked');
  });

  it('drops the payload, held as bytes or as text', () => {
    const memory = new FinishedMemory(10);
    const message = { ...state('t'), payload: undefined, payloadText: '{"a":1}' };
    memory.remember(message, 'acked');
    expect(memory.get('t')).toMatchObject({ payload: undefined, payloadText: undefined });
  });
});
