/**
 * CountsReads (src/partitioned/counts-reads.ts) over a driver whose partition reads the test
 * answers by hand: a few partitions at a time, one read at a time for any number of callers,
 * each answer counting what was written before its call, a failed read failing only its own
 * callers and never overlapping the next.
 */

import { describe, expect, it } from 'vitest';
import { COUNT_READS, CountsReads } from '../../src/partitioned/counts-reads.js';
import type { PartitionDriver } from '../../src/partitioned/driver.js';

const PARTITIONS = 10;

/**
 * A driver whose counts() calls wait until the test answers them; `state()` is read when a
 * call is made (a store answers what it held when the read reached it).
 */
function handDriver(state: () => number = () => 0) {
  const calls: Array<{
    partition: number;
    seen: number;
    answer(counts: Record<string, number>): void;
    fail(err: Error): void;
  }> = [];
  let running = 0;
  let most = 0;
  const driver = {
    counts: (partition: number) =>
      new Promise<Record<string, number>>((resolve, reject) => {
        running++;
        most = Math.max(most, running);
        const done = () => running--;
        calls.push({
          partition,
          seen: state(),
          answer: (counts) => (done(), resolve(counts)),
          fail: (err) => (done(), reject(err)),
        });
      }),
  } as unknown as PartitionDriver;
  return {
    driver,
    calls,
    get most() {
      return most;
    },
    /** Answers every call under way with `counts(partition)`, as the microtasks settle. */
    async answerAll(counts: (partition: number, seen: number) => Record<string, number>) {
      for (let k = 0; k < 100 && calls.length > 0; k++) {
        const now = calls.splice(0);
        for (const call of now) call.answer(counts(call.partition, call.seen));
        await new Promise((resolve) => setImmediate(resolve));
      }
    },
  };
}

describe('CountsReads', () => {
  it('reads a few partitions at a time and folds them per topic, status and partition', async () => {
    const hand = handDriver();
    const reads = new CountsReads(hand.driver, PARTITIONS);
    const read = reads.read();
    await hand.answerAll((p) => ({ 'a|S': p, 'b|R': 1, 'b|D': 2, 'c|X': 5, 'd|S': 0 }));
    const { totals, topics, scheduled } = await read;
    expect(hand.most).toBe(COUNT_READS);
    expect(totals).toEqual({ scheduled: 45, ready: PARTITIONS, inflight: 0, dead: 20 });
    expect(Object.fromEntries(topics)).toEqual({
      a: { scheduled: 45, ready: 0, inflight: 0, dead: 0 },
      b: { scheduled: 0, ready: PARTITIONS, inflight: 0, dead: 20 },
    });
    expect(scheduled).toEqual(Array.from({ length: PARTITIONS }, (_, p) => p));
  });

  it('runs one read at a time: callers during it share the next, which starts after they asked', async () => {
    let written = 0;
    const hand = handDriver(() => written);
    const reads = new CountsReads(hand.driver, PARTITIONS);
    const first = reads.read();
    // Written while the first read runs (its first partitions already read), before these
    // callers ask: their answer must count it in every partition.
    written = 7;
    const during = [reads.read(), reads.read(), reads.read()];
    await hand.answerAll((_, seen) => ({ 't|S': seen }));
    const answers = await Promise.all([first, ...during]);
    expect(hand.most).toBeLessThanOrEqual(COUNT_READS);
    expect(answers[0].totals.scheduled).toBe(7 * (PARTITIONS - COUNT_READS));
    // One more read, shared by the three.
    expect(answers[1]).toBe(answers[2]);
    expect(answers[2]).toBe(answers[3]);
    expect(answers[1].totals.scheduled).toBe(7 * PARTITIONS);
    // Idle again: a new caller starts a new read at once.
    const later = reads.read();
    expect(hand.calls).toHaveLength(COUNT_READS);
    await hand.answerAll(() => ({ 't|S': 1 }));
    expect((await later).totals.scheduled).toBe(PARTITIONS);
  });

  it('fails only its own callers, and the next read starts once every partition read of it settled', async () => {
    const hand = handDriver();
    const reads = new CountsReads(hand.driver, PARTITIONS);
    const failing = reads.read();
    failing.catch(() => {});
    const next = reads.read();
    // The first turn: one partition fails, the others are still under way.
    expect(hand.calls).toHaveLength(COUNT_READS);
    const [broken, ...others] = hand.calls.splice(0);
    broken.fail(new Error('connection lost'));
    await new Promise((resolve) => setImmediate(resolve));
    // The next read waits for the rest of the failed turn: no overlap.
    expect(hand.calls).toHaveLength(0);
    for (const call of others) call.answer({ 't|S': 1 });
    await expect(failing).rejects.toThrow('connection lost');
    await hand.answerAll(() => ({ 't|S': 2 }));
    expect((await next).totals.scheduled).toBe(2 * PARTITIONS);
    expect(hand.most).toBeLessThanOrEqual(COUNT_READS);
  });
});
