import { describe, expect, it } from 'vitest';
import { HierarchicalWheel } from '../../src/wheel/index.js';

describe('HierarchicalWheel, Kafka example (W = 20, tick = 1 ms)', () => {
  it('places 2, 8, 19 on level 0 and creates overflow levels only for 350 and 450', () => {
    const wheel = new HierarchicalWheel({ wheelSize: 20 });
    for (const t of [2, 8, 19]) wheel.add(t);
    expect(wheel.levels).toBe(1);
    wheel.add(350);
    expect(wheel.levels).toBe(2);
    wheel.add(450);
    expect(wheel.levels).toBe(3);
  });

  // The first level holds two blocks of 20 ticks (the current one and the next), so a slot of a
  // higher level is cascaded a block before it begins: 350 (level 1, 340..359) at 320, where
  // it lands in the next block; 450 (level 2, 400..799) at 380 onto level 1 (440..459), and
  // from there at 420.
  it('fires each at its tick, cascading 350 at 320 and 450 at 380 and 420', () => {
    const wheel = new HierarchicalWheel({ wheelSize: 20 });
    const due = new Map<number, number>();
    for (const t of [2, 8, 19, 350, 450]) due.set(wheel.add(t), t);
    const wakeups: number[] = [];
    const fired: Array<[number, number]> = [];
    for (let next = wheel.nextDeadline(); next !== Infinity; next = wheel.nextDeadline()) {
      wakeups.push(next);
      wheel.advance(next, (index) => {
        fired.push([due.get(index)!, next]);
        wheel.release(index);
      });
    }
    expect(fired).toEqual([
      [2, 2],
      [8, 8],
      [19, 19],
      [350, 350],
      [450, 450],
    ]);
    expect(wakeups).toEqual([2, 8, 19, 320, 350, 380, 420, 450]);
  });
});
