/**
 * Payloads of a dense burst (from the DENSE_PER_MS-th message due in one millisecond on) are
 * parsed before the burst is due (src/queue/decode-ahead.ts), so that delivering it parses only
 * the first DENSE_PER_MS - 1. What must hold: every delivery still gets exactly the payload
 * scheduled, a fresh object each time (a handler that changes its payload changes no other
 * delivery's), messages that are not part of a dense burst are parsed when delivered, as
 * before, and what is kept for decoding stays bounded. JSON.parse is watched while messages are
 * received to see which way each payload came.
 */

import { execFileSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/index.js';
import type { DelayQueue } from '../../src/delay-queue.js';
import {
  DENSE_PER_MS,
  MAX_DECODED_CHARS,
  MAX_PAYLOAD_CHARS,
} from '../../src/queue/decode-ahead.js';
import { T0, advance, fileKind, memoryKind, useQueues } from './harness.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const tempDir = useTempDirs('dense');

const openQueue = useQueues();

afterEach(() => {
  vi.restoreAllMocks();
});

const BURST = DENSE_PER_MS * 2;
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
    const { messages, parses: before } = await receiveCounting(queue, BURST);
    expect(before).toBe(FIRST);
    const first = messages[FIRST + 7];
    (first.payload as { i: number; deep: { n: number } }).deep.n = -1;
    (first.payload as { i: number }).i = -1;
    expect(await queue.nack(first.receipt, { delayMs: 0, durable: true })).toBe(true);
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
  await waitFor(() => done(aheadOf(queue)), { intervalMs: 1 });
}

/** Turns of the event loop: a decoding step queued would have run in the first of them. */
async function turns(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** The decoder's private counts, to see that what it keeps stays bounded. */
function aheadOf(queue: DelayQueue) {
  return (
    queue as unknown as {
      backend: {
        near: {
          ahead: {
            noted: number;
            decodedChars: number;
            buckets: Map<number, unknown>;
            work: unknown[];
            busyTimer: unknown;
          };
        };
      };
    }
  ).backend.near.ahead;
}

describe('payloads decoded ahead: bounds', () => {
  it('at most MAX_DECODED_CHARS of payload text is held parsed; it is given back on delivery', async () => {
    const { clock, queue } = await openQueue(memoryKind);
    const due = T0 + 2000;
    const size = 4000;
    const n = Math.ceil(MAX_DECODED_CHARS / size) + DENSE_PER_MS + 1000;
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

  it('consumers behind on a topic hold decoding back; it goes on once they catch up', async () => {
    const { clock, queue } = await openQueue(memoryKind);
    // Ten ready on 'busy', one taken: the take left nine behind.
    await queue.scheduleMany(Array.from({ length: 10 }, (_, i) => ({ topic: 'busy', payload: i })));
    await advance(clock, 5, 1, queue);
    expect(await queue.receive('busy', { max: 1 })).toHaveLength(1);
    const due = clock.now() + 400; // its second is open at once
    await scheduleBurst(queue, due);
    // Its step has run, and found the consumers behind: it looks again later.
    await untilAhead(queue, (ahead) => ahead.busyTimer !== undefined);
    expect(aheadOf(queue).decodedChars).toBe(0);
    expect(aheadOf(queue).noted).toBe(BURST - FIRST);
    await advance(clock, 150, 50, queue); // 100 ms without a take leaving messages behind
    await untilAhead(queue, (ahead) => ahead.noted === 0);
    expect(aheadOf(queue).decodedChars).toBeGreaterThan(0);
    await advanceTo(clock, queue, due);
    expect((await receiveCounting(queue, BURST)).parses).toBe(FIRST);
  });

  it('ready messages nobody takes (a paused topic, a cancelled one) do not hold decoding back', async () => {
    const { clock, queue } = await openQueue(memoryKind);
    await queue.scheduleMany(Array.from({ length: 10 }, (_, i) => ({ topic: 'idle', payload: i })));
    await queue.schedule({ id: 'gone', topic: 'gone', payload: 0 });
    await advance(clock, 5, 1, queue);
    expect(await queue.cancel('gone')).toBe(true); // leaves a stale entry in its ready list
    await queue.pause('idle');
    const due = clock.now() + 400;
    await scheduleBurst(queue, due);
    await advanceTo(clock, queue, due);
    expect((await receiveCounting(queue, BURST)).parses).toBe(FIRST);
  });

  it('a second opens one second before it begins: not parsed before, parsed after', async () => {
    const clock = new ManualClock(T0);
    const kind = memoryKind();
    const queue = await kind.open(clock, { horizonMs: 60_000 });
    try {
      const due = T0 + 10_000; // its second opens at T0 + 9 s
      await scheduleBurst(queue, due);
      await advanceTo(clock, queue, T0 + 8_900);
      await turns();
      expect(aheadOf(queue).decodedChars).toBe(0);
      expect(aheadOf(queue).noted).toBe(BURST - FIRST);
      await advanceTo(clock, queue, T0 + 9_100);
      await untilAhead(queue, (ahead) => ahead.noted === 0);
      expect(aheadOf(queue).decodedChars).toBeGreaterThan(0);
      await advanceTo(clock, queue, due);
      expect((await receiveCounting(queue, BURST)).parses).toBe(FIRST);
      expect(aheadOf(queue).decodedChars).toBe(0);
    } finally {
      await queue.close();
    }
  });

  it('a message parsed ahead whose delivery times out is delivered again with a fresh copy', async () => {
    const { clock, queue } = await openQueue(memoryKind);
    const due = T0 + 2000;
    await scheduleBurst(queue, due);
    await advanceTo(clock, queue, due);
    const first = [];
    while (first.length < BURST) {
      first.push(...(await queue.receive('t', { max: 1000, visibilityMs: 1000 })));
    }
    const mine = first[FIRST + 3];
    (mine.payload as { i: number }).i = -1;
    for (const message of first) if (message !== mine) await queue.ack(message.receipt);
    await advance(clock, 1100, 50, queue); // the visibility timeout, then the retry's back-off
    await advance(clock, 60_000, 1000, queue);
    const { messages, parses } = await receiveCounting(queue, 1);
    expect(messages[0].id).toBe(mine.id);
    expect(messages[0].attempts).toBe(2);
    expect(messages[0].payload).toEqual(payloadOf(FIRST + 3));
    expect(parses).toBe(1);
    expect(aheadOf(queue).decodedChars).toBe(0);
  });

  it('seconds that pass while consumers are behind are dropped, with their notes', async () => {
    const { clock, queue } = await openQueue(memoryKind);
    await queue.scheduleMany(
      Array.from({ length: 10 }, (_, i) => ({ topic: 'busy', payload: i, maxAttempts: 10_000 })),
    );
    await advance(clock, 5, 1, queue);
    /** Moves the clock in 50 ms steps, a take leaving messages of 'busy' behind at each. */
    const advanceBehind = async (ms: number) => {
      for (let left = ms; left > 0; left -= 50) {
        const [one] = await queue.receive('busy', { max: 1 });
        await queue.nack(one.receipt, { delayMs: 0, durable: true });
        await advance(clock, 50, 50, queue);
      }
    };
    let parses = 0;
    for (let round = 0; round < 3; round++) {
      const due = clock.now() + 900;
      await scheduleBurst(queue, due, `r${round}-`);
      for (let i = 0; i < BURST; i += 2) await queue.cancel(`r${round}-${i}`);
      await advanceBehind(1000);
      const got = await receiveCounting(queue, BURST / 2);
      parses += got.parses;
      for (const message of got.messages) expect(await queue.ack(message.receipt)).toBe(true);
    }
    await advanceBehind(1000);
    await untilAhead(queue, (ahead) => ahead.noted === 0 && ahead.buckets.size === 0);
    const ahead = aheadOf(queue);
    expect(ahead.noted).toBe(0);
    expect(ahead.buckets.size).toBe(0);
    expect(ahead.decodedChars).toBe(0);
    expect(parses).toBe((3 * BURST) / 2); // nothing was parsed ahead while they were behind
  });
});

describe('a dense burst in a plain node process', () => {
  it('is delivered whole, in order, with its payloads, none early; the process exits', () => {
    const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
    const entry = pathToFileURL(join(root, 'dist', 'delay-queue.js')).href;
    const dir = tempDir();
    // 5,000 due in one millisecond, 800 ms ahead: parsed ahead from the 2,048th on, one due
    // timer for those, consumed on the system clock with fsync batching, then closed.
    const script = `
      const { DelayQueue } = await import(${JSON.stringify(entry)});
      const queue = await DelayQueue.open({ dir: ${JSON.stringify(dir)}, fsync: 'batch' });
      const n = 5000;
      const due = Math.ceil(Date.now()) + 800;
      await queue.scheduleMany(Array.from({ length: n }, (_, i) => ({
        topic: 'jobs', payload: { i, tag: 't' + i }, deliverAt: due,
      })));
      const got = [];
      let early = 0;
      let done;
      const all = new Promise((resolve) => (done = resolve));
      const consumer = queue.consume('jobs', (message) => {
        if (Date.now() < due) early++;
        got.push(message.payload);
        if (got.length === n) done();
      }, { concurrency: 1000 });
      await all;
      await consumer.close();
      const stats = await queue.stats();
      await queue.close();
      const inOrder = got.every((payload, k) => payload.i === k && payload.tag === 't' + k);
      process.on('exit', () => console.log(JSON.stringify({ n: got.length, inOrder, early, acked: stats.acked })));
    `;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(JSON.parse(out.trim())).toEqual({ n: 5000, inOrder: true, early: 0, acked: 5000 });
  });
});
