import { describe, expect, it } from 'vitest';
import { TickwheelError, TickwheelRangeError } from '../../src/errors.js';
import { HashedWheel, HierarchicalWheel } from '../../src/wheel/index.js';

/** What `fn` throws, or undefined. */
function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return undefined;
}

describe('the wheels refuse bad input with a TickwheelRangeError and a code', () => {
  it.each([0, 1.5, 2 ** 31, Number.NaN])('HashedWheel ticksPerWheel %s', (ticksPerWheel) => {
    const err = thrownBy(() => new HashedWheel({ ticksPerWheel }));
    expect(err).toBeInstanceOf(TickwheelRangeError);
    expect(err).toBeInstanceOf(TickwheelError);
    expect(err).toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
  });

  it.each([1, 4097, 2.5, Number.NaN])('HierarchicalWheel wheelSize %s', (wheelSize) => {
    const err = thrownBy(() => new HierarchicalWheel({ wheelSize }));
    expect(err).toBeInstanceOf(TickwheelRangeError);
    expect(err).toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
  });

  it('HierarchicalWheel: a tick past 2^53 is ERR_TICKWHEEL_INVALID_DELAY, naming the tick', () => {
    const wheel = new HierarchicalWheel();
    const err = thrownBy(() => wheel.add(2 ** 60));
    expect(err).toBeInstanceOf(TickwheelRangeError);
    expect(err).toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_DELAY' });
    expect((err as Error).message).toContain(String(2 ** 60));
  });
});
