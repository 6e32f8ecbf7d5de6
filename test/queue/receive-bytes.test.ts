/**
 * receive() bounds a batch by payload bytes as well as by count: what does not fit stays ready,
 * first in line, with no attempt used.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import type { DelayQueue } from '../../src/delay-queue.js';
import { T0, advance, fileKind, memoryKind, type QueueKind } from './harness.js';

const MiB = 1024 * 1024;
const kinds: QueueKind[] = [];
const queues: DelayQueue[] = [];
afterEach(async () => {
  for (const queue of queues.splice(0)) await queue.close();
  for (const kind of kinds.splice(0)) kind.cleanup();
});

describe.each([
  ['memory', memoryKind],
  ['file', fileKind],
] as const)('receive({ maxBytes }) (%s store)', (_name, makeKind) => {
  it('hands out only what fits, in order, and leaves the rest ready with no attempt used', async () => {
    const kind = makeKind();
    kinds.push(kind);
    const clock = new ManualClock(T0);
    const queue = await kind.open(clock, { maxPayloadBytes: 2 * MiB });
    queues.push(queue);
    // Near ones keep their payloads in memory; far ones (beyond the 1 s horizon) come back
    // from the store without them, so their sizes are known only when read.
    const near = await queue.scheduleMany(
      Array.from({ length: 6 }, (_, i) => ({
        topic: 'big',
        payload: new Uint8Array(MiB).fill(i),
        delayMs: 10,
      })),
    );
    const far = await queue.scheduleMany(
      Array.from({ length: 4 }, (_, i) => ({
        topic: 'far',
        payload: new Uint8Array(MiB).fill(i),
        delayMs: 3000,
      })),
    );
    await advance(clock, 3100, 100, queue);
    for (const [topic, ids] of [
      ['big', near.map((m) => m.id)],
      ['far', far.map((m) => m.id)],
    ] as const) {
      const first = await queue.receive(topic, { max: 1000, maxBytes: 2.5 * MiB });
      expect(first.map((m) => m.id)).toEqual(ids.slice(0, 2));
      expect(first.every((m) => m.attempts === 1)).toBe(true);
      for (const id of ids.slice(2)) {
        expect(await queue.get(id)).toMatchObject({ status: 'ready', attempts: 0 });
      }
      const rest = await queue.receive(topic, { max: 1000, maxBytes: 100 * MiB });
      expect(rest.map((m) => m.id)).toEqual(ids.slice(2));
      expect(rest.map((m) => m.attempts)).toEqual(ids.slice(2).map(() => 1));
      for (const message of [...first, ...rest])
        expect(await queue.ack(message.receipt)).toBe(true);
    }
    const stats = await queue.stats();
    expect(stats.delivered).toBe(10);
  });

  it('always delivers the first message, even one larger than maxBytes', async () => {
    const kind = makeKind();
    kinds.push(kind);
    const clock = new ManualClock(T0);
    const queue = await kind.open(clock, { maxPayloadBytes: 2 * MiB });
    queues.push(queue);
    await queue.schedule({ topic: 't', payload: new Uint8Array(MiB), delayMs: 1 });
    await queue.schedule({ topic: 't', payload: 'small', delayMs: 1 });
    await advance(clock, 10, 5, queue);
    const [one, ...none] = await queue.receive('t', { max: 10, maxBytes: 1000 });
    expect(one.payload).toBeInstanceOf(Uint8Array);
    expect(none).toEqual([]);
    expect((await queue.receive('t', { max: 10, maxBytes: 1000 }))[0].payload).toBe('small');
    await expect(queue.receive('t', { maxBytes: 0 })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
  });

  it('counts JSON payloads held as text by their UTF-8 bytes, exactly at the limit', async () => {
    const kind = makeKind();
    kinds.push(kind);
    const clock = new ManualClock(T0);
    const queue = await kind.open(clock);
    queues.push(queue);
    // Each payload is '"ééé…"' : 100 characters of 2 UTF-8 bytes, 202 bytes stored, and 102
    // UTF-16 units (so neither 1 nor 3 bytes a unit would count it right).
    const text = 'é'.repeat(100);
    const ids = (
      await queue.scheduleMany(
        Array.from({ length: 10 }, () => ({ topic: 't', payload: text, delayMs: 1 })),
      )
    ).map((m) => m.id);
    await advance(clock, 10, 5, queue);
    const received: string[] = [];
    for (const maxBytes of [3 * 202, 3 * 202 - 1, 202, 10_000]) {
      const batch = await queue.receive('t', { max: 1000, maxBytes });
      expect(batch.every((m) => m.payload === text)).toBe(true);
      received.push(...batch.map((m) => m.id));
      expect(batch.length).toBe(maxBytes === 10_000 ? 10 - 3 - 2 - 1 : Math.floor(maxBytes / 202));
    }
    expect(received).toEqual(ids);
  });
});
