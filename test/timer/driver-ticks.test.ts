import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock, TimerWheel } from '../../src/index.js';
import { WheelDriver } from '../../src/timer/driver.js';
import { HierarchicalWheel } from '../../src/wheel/index.js';
import { codeOf } from './code-of.js';

function driverAt(resolution: number, origin: number): WheelDriver {
  const clock = new ManualClock(origin);
  return new WheelDriver(new HierarchicalWheel(), { resolution, clock }, () => {});
}

describe('WheelDriver ticks', () => {
  // The tick of a deadline is the first tick that begins at or after it, whatever the rounding
  // of the quotient: checked on the tick's own start time, for awkward resolutions and origins,
  // up to ticks near 2^53 where the quotient is off by two.
  it('gives every deadline the first tick that begins at or after it', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(1, 0.1, 3, 1e-3, 1 / 3, 7.77, 0.5, 10),
        fc.constantFrom(0, 123.456, 1.7e12),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (resolution, origin, fraction) => {
          const driver = driverAt(resolution, origin);
          // Deadlines up to 2^52.9 ticks after the origin.
          const deadline = origin + resolution * 2 ** (52.9 * fraction);
          const tick = driver.tickDueAt(deadline);
          if (tick <= 1) return; // due at once: the next tick, whatever the deadline
          expect(driver.timeOf(tick)).toBeGreaterThanOrEqual(deadline);
          expect(driver.timeOf(tick - 1)).toBeLessThan(deadline);
          const contained = driver.tickContaining(driver.timeOf(tick));
          expect(driver.timeOf(contained)).toBeLessThanOrEqual(driver.timeOf(tick));
          expect(driver.timeOf(contained + 1)).toBeGreaterThan(driver.timeOf(tick));
        },
      ),
      { numRuns: 20_000 },
    );
  });

  it('refuses a tick so short that its inverse is not finite, with a coded error', () => {
    expect(codeOf(() => new TimerWheel({ resolution: 1e-310 }))).toEqual({
      name: 'TickwheelRangeError',
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
  });

  it('refuses a delay past 2^53 ticks with a coded error, and does not hang on it', () => {
    const wheel = new TimerWheel({ resolution: 1e-300, clock: new ManualClock() });
    expect(codeOf(() => wheel.setTimeout(() => {}, 1))).toEqual({
      name: 'TickwheelRangeError',
      code: 'ERR_TICKWHEEL_INVALID_DELAY',
    });
    expect(wheel.runDue()).toBe(0);
    wheel.close();
  });
});
