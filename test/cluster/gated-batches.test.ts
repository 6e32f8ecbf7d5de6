/**
 * GatedBatches (src/partitioned/gated-batches.ts): items of every key gathered while the store
 * is busy go out together once a call is free; never more calls under way than allowed.
 */

import { describe, expect, it, vi } from 'vitest';
import { GatedBatches } from '../../src/partitioned/gated-batches.js';
import { waitFor } from '../support/wait-for.js';

describe('GatedBatches', () => {
  it('sends what one turn brings as one call, and what comes meanwhile as the next', async () => {
    const calls: Array<Map<number, string[]>> = [];
    const answers: Array<() => void> = [];
    let running = 0;
    let most = 0;
    const batches = new GatedBatches<number, string>(async (batch) => {
      calls.push(batch);
      most = Math.max(most, ++running);
      await new Promise<void>((resolve) => answers.push(resolve));
      running--;
    });
    batches.add(1, 'a');
    batches.add(2, 'b');
    await waitFor(() => calls.length === 1);
    // While the first call is under way, three partitions' items gather.
    for (const [key, item] of [
      [1, 'c'],
      [3, 'd'],
      [1, 'e'],
      [2, 'f'],
    ] as const)
      batches.add(key, item);
    await new Promise((resolve) => setImmediate(resolve));
    expect(calls).toHaveLength(1);
    answers.shift()!();
    await waitFor(() => calls.length === 2);
    answers.shift()!();
    expect([...calls[0]]).toEqual([
      [1, ['a']],
      [2, ['b']],
    ]);
    expect([...calls[1]]).toEqual([
      [1, ['c', 'e']],
      [3, ['d']],
      [2, ['f']],
    ]);
    expect(most).toBe(1);
  });

  it('allows `most` calls at once, and goes on after a call that failed', async () => {
    const seen: string[][] = [];
    const answers: Array<(ok: boolean) => void> = [];
    let running = 0;
    let most = 0;
    const batches = new GatedBatches<number, string>(async (batch) => {
      seen.push([...batch.values()].flat());
      most = Math.max(most, ++running);
      const ok = await new Promise<boolean>((resolve) => answers.push(resolve));
      running--;
      if (!ok) throw new Error('the store failed');
    }, 2);
    batches.add(0, 'a');
    await waitFor(() => seen.length === 1);
    batches.add(0, 'b');
    await waitFor(() => seen.length === 2);
    batches.add(0, 'c');
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toHaveLength(2);
    answers.shift()!(false);
    await waitFor(() => seen.length === 3);
    answers.shift()!(true);
    answers.shift()!(true);
    expect(seen).toEqual([['a'], ['b'], ['c']]);
    expect(most).toBe(2);
  });

  it('sends at most `itemsPerCall` items a call, in the order they came, one call after the other', async () => {
    const calls: Array<Array<[number, string[]]>> = [];
    const batches = new GatedBatches<number, string>(
      async (batch) => {
        calls.push([...batch].map(([key, items]) => [key, [...items]]));
      },
      1,
      3,
    );
    for (const [key, item] of [
      [1, 'a'],
      [2, 'b'],
      [1, 'c'],
      [2, 'd'],
      [3, 'e'],
      [1, 'f'],
      [3, 'g'],
    ] as const)
      batches.add(key, item);
    await waitFor(() => calls.flat().flatMap(([, items]) => items).length === 7);
    expect(calls).toEqual([
      [[1, ['a', 'c', 'f']]],
      [
        [2, ['b', 'd']],
        [3, ['e']],
      ],
      [[3, ['g']]],
    ]);
  });

  it('starts calls at least minGapMs apart, gathering what comes in between into one', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'setImmediate', 'performance'] });
    try {
      const starts: Array<{ at: number; items: string[] }> = [];
      const batches = new GatedBatches<number, string>(
        async (batch) => {
          starts.push({ at: performance.now(), items: [...batch.values()].flat() });
        },
        1,
        Infinity,
        10,
      );
      batches.add(1, 'a');
      await vi.advanceTimersByTimeAsync(0);
      expect(starts).toHaveLength(1);
      // Done at once, but the next call waits for the gap: items due meanwhile go together.
      batches.add(1, 'b');
      await vi.advanceTimersByTimeAsync(4);
      batches.add(2, 'c');
      await vi.advanceTimersByTimeAsync(4);
      expect(starts).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(2);
      expect(starts.map((s) => s.items)).toEqual([['a'], ['b', 'c']]);
      expect(starts[1].at - starts[0].at).toBeGreaterThanOrEqual(10);
      // Past the gap already: the next call goes at the end of the turn, not later.
      await vi.advanceTimersByTimeAsync(50);
      batches.add(3, 'd');
      await vi.advanceTimersByTimeAsync(0);
      expect(starts).toHaveLength(3);
      expect(starts[2].at - starts[1].at).toBe(50);
    } finally {
      vi.useRealTimers();
    }
  });
});
