/**
 * Regression found by the crash harness: the delay queue's default clock, SystemClock({ epoch:
 * true }), was anchored at performance.timeOrigin, which can sit several ms ahead of Date.now()
 * for a process's whole life (up to 18 ms in processes started on a busy machine). Such a queue
 * delivered messages before their deliverAt by the wall clock. Anchored at Date.now(), the
 * clock may trail the wall clock by under a millisecond but never leads it.
 */

import { describe, expect, it } from 'vitest';
import { SystemClock } from '../../src/index.js';

describe('SystemClock({ epoch: true })', () => {
  it('never runs ahead of Date.now()', () => {
    for (let round = 0; round < 5; round++) {
      const clock = new SystemClock({ epoch: true });
      let ahead = 0;
      for (let i = 0; i < 20_000; i++) {
        const now = clock.now(); // read first: Date.now() after it is, if anything, later
        if (Math.floor(now) > Date.now()) ahead++;
      }
      expect(ahead).toBe(0);
      expect(Date.now() - clock.now()).toBeLessThan(5);
    }
  });
});
