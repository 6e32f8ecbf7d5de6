/**
 * Payloads of a dense burst (from the DENSE_PER_MS-th message due in one millisecond on) are
 * parsed before the burst is due (src/queue/decode-ahead.ts), so that delivering it parses only
 * the first DENSE_PER_MS - 1. What must hold: every delivery still gets exactly the payload
 * scheduled, a fresh object each time (a handler that changes its payload changes no other
 * delivery's), messages that are not part of a dense burst are parsed when delivered, as
 * before, and what is kept for decoding stays bounded. JSON.parse is watched while messages are
 * received to see which way each payload came.
 */

import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ManualClock } from '../../src/index.js';
import type { DelayQueue } from '../../src/delay-queue.js';
import {
  DENSE_PER_MS,
  MAX_DECODED_CHARS,
  MAX_PAYLOAD_CHARS,
} from '../../src/queue/decode-ahead.js';
import { T0, advance, fileKind, memoryKind, useQueues } from './harness.js';

const openQueue = useQueues();

afterEach(() => {
  vi.restoreAllMocks();
});

const BURST = DENSE_PER_MS * 4;
/** Messages of a burst parsed at delivery: those scheduled before the millisecond was dense. */
const FIRST = DENSE_PER_MS - 1;

function payloadOf(i: number) {
  return { i, user: `user-${i}`, tags: ['a', i % 3 === 0 ? null : 'b'], deep: { n: i * 1.5 } };
}

/** Schedules BURST messages, all due at `deliverAt`, ids b0.. in order. */
async function scheduleBurst(queue: DelayQueue, deliverAt: number, prefix = 'b') {
  await queue.scheduleMany(
    Array.from({ length: BURST }, (_, i) => ({
      id: `${prefix}${i}`,
      topic: 't',
      payload: payloadOf(i),
      deliverAt,
    })),
  );
}

/** Receives n messages of topic 't', counting the JSON.parse calls made while receiving. */
async function receiveCounting(queue: DelayQueue, n: number) {
  const parse = vi.spyOn(JSON, 'parse');
  const all = [];
  try {
    while (all.length < n) {
      const batch = await queue.receive('t', { max: 1000 });
      expect(batch.length).toBeGreaterThan(0);
      all.push(...batch);
    }
    return { messages: all, parses: parse.mock.calls.length };
  } finally {
    parse.mockRestore();
  }
}

async function advanceTo(clock: ManualClock, queue: DelayQueue, at: number) {
  await advance(clock, at - clock.now(), 50, queue);
}

describe.each([
  ['memory', memoryKind],
  ['file', fileKind],
] as const)('payloads decoded ahead (%s store)', (_name, makeKind) => {
  it('a dense burst is parsed before it is due; each delivery gets the payload scheduled', async () => {
    const { clock, queue } = await openQueue(makeKind);
    const due = T0 + 3000;
    await scheduleBurst(queue, due);
    await advanceTo(clock, queue, due - 50);
    expect(await queue.receive('t', { max: 1000 })).toEqual([]); // never early
    await advanceTo(clock, queue, due);
    const { messages, parses } = await receiveCounting(queue, BURST);
    expect(parses).toBe(FIRST);
    expect(messages.map((m) => m.id)).toEqual(Array.from({ length: BURST }, (_, i) => `b${i}`));
    expect(messages.map((m) => m.payload)).toEqual(
      Array.from({ length: BURST }, (_, i) => payloadOf(i)),
    );
  });

  it('a burst scheduled after its second opened is parsed ahead too, if there is time', async () => {
    const { clock, queue } = await openQueue(makeKind);
    const due = T0 + 400;
    await scheduleBurst(queue, due);
    await advanceTo(clock, queue, due);
    const { messages, parses } = await receiveCounting(queue, BURST);
    expect(parses).toBe(FIRST);
    expect(messages.map((m) => m.payload)).toEqual(
      Array.from({ length: BURST }, (_, i) => payloadOf(i)),
    );
  });

  it('a payload parsed ahead goes to one delivery: a retry gets a fresh copy', async () => {
    const { clock, queue } = await openQueue(makeKind);
    const due = T0 + 2000;
    await scheduleBurst(queue, due);
    await advanceTo(clock, queue, due);
    const { messages } = await receiveCounting(queue, BURST);
    const first = messages[FIRST + 7];
    (first.payload as { i: number; deep: { n: number } }).deep.n = -1;
    (first.payload as { i: number }).i = -1;
    expect(await queue.nack(first.receipt, { delayMs: 0 })).toBe(true);
    await advance(clock, 5, 1, queue);
    const { messages: again, parses } = await receiveCounting(queue, 1);
    expect(again[0].id).toBe(`b${FIRST + 7}`);
    expect(again[0].attempts).toBe(2);
    expect(again[0].payload).toEqual(payloadOf(FIRST + 7));
    expect(again[0].payload).not.toBe(first.payload);
    expect(parses).toBe(1);
  });

  it('messages that are not part of a dense burst are parsed when delivered', async () => {
    const { clock, queue } = await openQueue(makeKind);
    const n = DENSE_PER_MS - 1; // one short of dense, all in one millisecond
    const due = T0 + 2500;
    await queue.scheduleMany(
      Array.from({ length: n }, (_, i) => ({ topic: 't', payload: payloadOf(i), deliverAt: due })),
    );
    // And as many again spread over a second, a few per millisecond.
    await queue.scheduleMany(
      Array.from({ length: n }, (_, i) => ({
        topic: 't',
        payload: payloadOf(i),
        deliverAt: due + 1 + (i % 500),
      })),
    );
    await advanceTo(clock, queue, due + 600);
    const { messages, parses } = await receiveCounting(queue, 2 * n);
    expect(parses).toBe(2 * n);
    expect(messages.slice(0, n).map((m) => m.payload)).toEqual(
      Array.from({ length: n }, (_, i) => payloadOf(i)),
    );
  });

  it('a cancelled message of a dense burst is not delivered; the rest are, parsed ahead', async () => {
    const { clock, queue } = await openQueue(makeKind);
    const due = T0 + 3000;
    await scheduleBurst(queue, due);
    await advanceTo(clock, queue, due - 500);
    for (let i = 0; i < BURST; i += 10) expect(await queue.cancel(`b${i}`)).toBe(true);
    await advanceTo(clock, queue, due);
    const left = Array.from({ length: BURST }, (_, i) => i).filter((i) => i % 10 !== 0);
    const { messages, parses } = await receiveCounting(queue, left.length);
    expect(parses).toBe(left.filter((i) => i < FIRST).length);
    expect(messages.map((m) => m.id)).toEqual(left.map((i) => `b${i}`));
    expect(messages.map((m) => m.payload)).toEqual(left.map((i) => payloadOf(i)));
    expect(await queue.receive('t', { max: 1000 })).toEqual([]);
  });

  it('payloads over MAX_PAYLOAD_CHARS are parsed at delivery', async () => {
    const { clock, queue } = await openQueue(makeKind);
    const due = T0 + 2000;
    const big = 'x'.repeat(MAX_PAYLOAD_CHARS);
    await queue.scheduleMany(
      Array.from({ length: BURST }, (_, i) => ({
        topic: 't',
        payload: { i, big },
        deliverAt: due,
      })),
    );
    await advanceTo(clock, queue, due);
    const { messages, parses } = await receiveCounting(queue, BURST);
    expect(parses).toBe(BURST);
    expect(messages.map((m) => (m.payload as { i: number }).i)).toEqual(
      Array.from({ length: BURST }, (_, i) => i),
    );
  });
});

/**
 * Waits (up to 10 s of real time, generous for a loaded machine) until `done` holds of the
 * decoder: its steps run one per turn of the event loop.
 */
async function untilAhead(queue: DelayQueue, done: (ahead: ReturnType<typeof aheadOf>) => boolean) {
  const until = Date.now() + 10_000;
  while (!done(aheadOf(queue)) && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** The decoder's private counts, to see that what it keeps stays bounded. */
function aheadOf(queue: DelayQueue) {
  return (
    queue as unknown as {
      near: {
        ahead: {
          noted: number;
          decodedChars: number;
          buckets: Map<number, unknown>;
          work: unknown[];
        };
      };
    }
  ).near.ahead;
}

describe('payloads decoded ahead: bounds', () => {
  it('at most MAX_DECODED_CHARS of payload text is held parsed; it is given back on delivery', async () => {
    const { clock, queue } = await openQueue(memoryKind);
    const due = T0 + 2000;
    const size = 4000;
    const n = Math.ceil(MAX_DECODED_CHARS / size) + 1000;
    const text = 'y'.repeat(size - 40);
    await queue.scheduleMany(
      Array.from({ length: n }, (_, i) => ({ topic: 't', payload: { i, text }, deliverAt: due })),
    );
    await advanceTo(clock, queue, due - 10);
    await untilAhead(queue, (ahead) => ahead.work.length === 0);
    const held = aheadOf(queue).decodedChars;
    expect(held).toBeGreaterThan(MAX_DECODED_CHARS - size);
    expect(held).toBeLessThanOrEqual(MAX_DECODED_CHARS);
    await advanceTo(clock, queue, due);
    const { messages, parses } = await receiveCounting(queue, n);
    expect(parses).toBeGreaterThanOrEqual(n - Math.floor(MAX_DECODED_CHARS / (size - 40)));
    expect(parses).toBeLessThan(n);
    expect(messages.every((m, i) => (m.payload as { i: number }).i === i)).toBe(true);
    expect(aheadOf(queue).decodedChars).toBe(0);
  });

  it('a backlog on another topic keeps nothing noted past its second, and cancelled ones give back their share', async () => {
    const { clock, queue } = await openQueue(memoryKind);
    // One ready message nobody receives: the queue is backlogged throughout.
    await queue.schedule({ topic: 'nobody', payload: 1, delayMs: 0 });
    await advance(clock, 5, 1, queue);
    for (let round = 0; round < 5; round++) {
      const due = clock.now() + 1500;
      await scheduleBurst(queue, due, `r${round}-`);
      for (let i = 0; i < BURST; i += 2) await queue.cancel(`r${round}-${i}`);
      await advanceTo(clock, queue, due);
      const { messages } = await receiveCounting(queue, BURST / 2);
      for (const message of messages) expect(await queue.ack(message.receipt)).toBe(true);
      await advance(clock, 1000, 100, queue);
    }
    // While backlogged, steps only drop what has passed, every 10 ms.
    await untilAhead(queue, (ahead) => ahead.noted === 0 && ahead.buckets.size === 0);
    const ahead = aheadOf(queue);
    expect(ahead.noted).toBe(0);
    expect(ahead.buckets.size).toBe(0);
    expect(ahead.decodedChars).toBe(0);
  });
});
