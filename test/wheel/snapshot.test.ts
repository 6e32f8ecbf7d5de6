import { describe, expect, it } from 'vitest';
import { HierarchicalWheel } from '../../src/wheel/index.js';

describe('HierarchicalWheel.snapshot', () => {
  it('counts rows per slot and level, with each level cursor', () => {
    const wheel = new HierarchicalWheel({ wheelSize: 20 });
    for (const tick of [2, 8, 8, 19, 350, 450]) wheel.add(tick);
    const { levels, truncated } = wheel.snapshot();
    expect(truncated).toBe(false);
    expect(levels).toHaveLength(3);
    // The first level shows its two blocks (40 slots); higher levels' cursors are read at the
    // next block's start, tick 20 = (0, 1, 0) in base 20.
    expect(levels[0].slots).toHaveLength(40);
    expect(levels.map((level) => level.cursor)).toEqual([0, 1, 0]);
    expect(levels[0].slots[2]).toBe(1);
    expect(levels[0].slots[8]).toBe(2);
    expect(levels[0].slots[19]).toBe(1);
    expect(levels[1].slots[17]).toBe(1);
    expect(levels[2].slots[1]).toBe(1);
    expect(levels.flatMap((level) => level.slots).reduce((a, b) => a + b)).toBe(6);
  });

  it('moves the cursor as the wheel advances and stops counting past its budget', () => {
    const wheel = new HierarchicalWheel({ wheelSize: 20 });
    for (let i = 0; i < 10; i++) wheel.add(345);
    wheel.advance(341, () => {});
    const after = wheel.snapshot();
    // current 342: block 17 (340..359), cursor 2 in it; the next block starts at 360, digit 18.
    expect(after.levels[0].cursor).toBe(2);
    expect(after.levels[1].cursor).toBe(18);
    expect(after.levels[0].slots[5]).toBe(10);
    expect(wheel.snapshot(3)).toMatchObject({ truncated: true });
  });
});

describe('HierarchicalWheel at the last safe ticks', () => {
  // The block that crosses 2^53: its end is not representable, so slots must be taken from the
  // block's start (exact) for sizes that are not powers of two.
  it.each([3, 5, 6, 7, 10, 12, 64])(
    'W = %i: fires every row at its tick, never early or lost',
    (size) => {
      const max = Number.MAX_SAFE_INTEGER;
      for (let start = max - 2 * size; start <= max; start++) {
        for (let tick = start; tick <= max; tick++) {
          const wheel = new HierarchicalWheel({ wheelSize: size, startTick: start });
          wheel.add(tick);
          expect(wheel.nextDeadline()).toBeLessThanOrEqual(tick);
          const fired: number[] = [];
          wheel.advance(tick - 1, () => {
            fired.push(-1);
          });
          expect(fired).toEqual([]);
          wheel.advance(tick, (index) => {
            fired.push(index);
            wheel.release(index);
          });
          expect(fired).toHaveLength(1);
          expect(wheel.size).toBe(0);
        }
      }
    },
  );
});
