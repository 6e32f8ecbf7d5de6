import { describe, expect, it } from 'vitest';
import { SystemClock } from '../../src/index.js';

describe('SystemClock({ epoch: true })', () => {
  it('never reads ahead of Date.now()', () => {
    let ahead = -Infinity;
    let behind = -Infinity;
    // Clocks anchored at every fraction of a millisecond, each read across whole-ms boundaries.
    for (let i = 0; i < 100; i++) {
      const clock = new SystemClock({ epoch: true });
      const until = performance.now() + 2;
      while (performance.now() < until) {
        const now = clock.now();
        const wall = Date.now();
        ahead = Math.max(ahead, now - wall);
        behind = Math.max(behind, wall - now);
      }
    }
    expect(ahead).toBeLessThanOrEqual(0);
    // Lenient: a pause between the two reads makes it look further behind.
    expect(behind).toBeLessThan(50);
  });
});
