import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import {
  AbortError,
  HashedWheelTimer,
  ManualClock,
  SystemTimer,
  TimerWheel,
  type TimerHandle,
} from '../../src/index.js';
import { waitFor } from '../support/wait-for.js';

function manual(options: ConstructorParameters<typeof TimerWheel>[0] = {}) {
  const clock = new ManualClock(0);
  const wheel = new TimerWheel({ clock, ...options });
  return { clock, wheel };
}

describe('TimerWheel.setTimeout', () => {
  it('passes extra arguments to the callback', () => {
    const { clock, wheel } = manual();
    const fn = vi.fn();
    wheel.setTimeout(fn, 5, 'a', 2, { b: true });
    clock.advance(5);
    expect(fn).toHaveBeenCalledExactlyOnceWith('a', 2, { b: true });
  });

  it('never fires before its deadline and fires in the tick that reaches it', () => {
    const { clock, wheel } = manual({ resolution: 10 });
    const at: number[] = [];
    wheel.setTimeout(() => at.push(clock.now()), 25);
    clock.advance(29);
    expect(at).toEqual([]);
    clock.advance(1);
    expect(at).toEqual([30]);
  });

  it('fires timers with equal deadlines in the order they were scheduled', () => {
    const { clock, wheel } = manual();
    const order: number[] = [];
    for (let i = 0; i < 100; i++) wheel.setTimeout(() => order.push(i), 1000);
    clock.advance(1000);
    expect(order).toEqual([...Array(100).keys()]);
  });

  it('treats a negative delay as 0: the next tick', () => {
    const { clock, wheel } = manual();
    const fn = vi.fn();
    const handle = wheel.setTimeout(fn, -50);
    expect(wheel.deadline(handle)).toBe(1);
    clock.advance(1);
    expect(fn).toHaveBeenCalledOnce();
  });

  it('honours delays above 2^31-1 ms instead of firing after 1 ms like Node', () => {
    const { clock, wheel } = manual();
    const fn = vi.fn();
    const delay = 2 ** 31 + 12_345;
    wheel.setTimeout(fn, delay);
    clock.advance(delay - 1);
    expect(fn).not.toHaveBeenCalled();
    clock.advance(1);
    expect(fn).toHaveBeenCalledOnce();
  });

  it('holds a delay of 100 years and fires it on the day', () => {
    const { clock, wheel } = manual();
    const century = 100 * 365.25 * 24 * 3600 * 1000;
    const fn = vi.fn();
    wheel.setTimeout(fn, century);
    // About 2^41.5 ticks: digit 3 in base 4096 (12 bits a level), so four levels.
    expect(wheel.stats().levels).toBe(4);
    clock.advance(century - 1);
    expect(fn).not.toHaveBeenCalled();
    clock.advance(1);
    expect(fn).toHaveBeenCalledOnce();
  });

  it('rejects NaN, infinite and non-number delays with a coded error', () => {
    const { wheel } = manual();
    for (const bad of [NaN, Infinity, -Infinity]) {
      expect(() => wheel.setTimeout(() => {}, bad)).toThrowError(
        expect.objectContaining({
          name: 'TickwheelRangeError',
          code: 'ERR_TICKWHEEL_INVALID_DELAY',
        }),
      );
    }
    for (const bad of ['10', null, undefined, {}]) {
      expect(() => wheel.setTimeout(() => {}, bad as unknown as number)).toThrowError(
        expect.objectContaining({
          name: 'TickwheelTypeError',
          code: 'ERR_TICKWHEEL_INVALID_DELAY',
        }),
      );
    }
  });

  it('rejects a callback that is not a function', () => {
    const { wheel } = manual();
    expect(() => wheel.setTimeout('run' as unknown as () => void, 1)).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_CALLBACK' }),
    );
  });

  it('sleep() throws a delay no tick can hold synchronously, and rejects above maxPending', async () => {
    const { wheel } = manual({ maxPending: 1 });
    expect(() => wheel.sleep(1e300)).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_DELAY' }),
    );
    expect(wheel.size).toBe(0);
    void wheel.sleep(5);
    await expect(wheel.sleep(5)).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_MAX_PENDING' });
    expect(wheel.size).toBe(1);
  });

  it('throws a RangeError with a code above maxPending', () => {
    const { wheel } = manual({ maxPending: 2 });
    wheel.setTimeout(() => {}, 1);
    wheel.setTimeout(() => {}, 1);
    expect(() => wheel.setTimeout(() => {}, 1)).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_MAX_PENDING' }),
    );
    expect(wheel.size).toBe(2);
  });

  it('rejects invalid options', () => {
    expect(() => new TimerWheel({ resolution: 0 })).toThrowError(
      expect.objectContaining({
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
        message: 'resolution must be a number above 0, got number 0',
      }),
    );
    expect(() => new TimerWheel({ clock: { now: () => 0 } })).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
    );
    expect(() => new TimerWheel({ maxBatch: 0 })).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
    );
  });
});

describe('TimerWheel handles', () => {
  it('returns numbers that are never 0', () => {
    const { wheel } = manual();
    const handle = wheel.setTimeout(() => {}, 1);
    expect(typeof handle).toBe('number');
    expect(handle).not.toBe(0);
  });

  it('makes a fired or cancelled handle inert, even when its slot is reused', () => {
    const { clock, wheel } = manual();
    const first = wheel.setTimeout(() => {}, 1);
    clock.advance(1);
    const fn = vi.fn();
    const second = wheel.setTimeout(fn, 5);
    expect(wheel.has(first)).toBe(false);
    expect(wheel.clearTimeout(first)).toBe(false);
    expect(wheel.refresh(first)).toBe(false);
    expect(wheel.has(second)).toBe(true);
    clock.advance(5);
    expect(fn).toHaveBeenCalledOnce();
  });

  it('ignores values that are not handles', () => {
    const { wheel } = manual();
    wheel.setTimeout(() => {}, 1);
    for (const bad of [0, -1, 1.5, NaN, 2 ** 60, '1', null, undefined]) {
      expect(wheel.clearTimeout(bad as TimerHandle)).toBe(false);
      expect(wheel.has(bad as TimerHandle)).toBe(false);
    }
    expect(wheel.size).toBe(1);
  });

  it('reports the tick-rounded deadline of a pending timer', () => {
    const clock = new ManualClock(1000);
    const wheel = new TimerWheel({ clock, resolution: 10 });
    const handle = wheel.setTimeout(() => {}, 15);
    expect(wheel.deadline(handle)).toBe(1020);
    wheel.clearTimeout(handle);
    expect(wheel.deadline(handle)).toBeUndefined();
  });
});

describe('TimerWheel.refresh', () => {
  it('re-arms from now with the same delay, like timeout.refresh()', () => {
    const { clock, wheel } = manual();
    const fn = vi.fn();
    const handle = wheel.setTimeout(fn, 100);
    clock.advance(90);
    expect(wheel.refresh(handle)).toBe(true);
    clock.advance(99);
    expect(fn).not.toHaveBeenCalled();
    clock.advance(1);
    expect(fn).toHaveBeenCalledOnce();
  });

  it('re-arms with a new delay when given one', () => {
    const { clock, wheel } = manual();
    const fn = vi.fn();
    const handle = wheel.setTimeout(fn, 100);
    wheel.refresh(handle, 10);
    clock.advance(10);
    expect(fn).toHaveBeenCalledOnce();
  });

  it('keeps an idle timeout from firing while activity keeps refreshing it', () => {
    const { clock, wheel } = manual();
    const idle = vi.fn();
    const handle = wheel.setTimeout(idle, 50);
    for (let i = 0; i < 100; i++) {
      clock.advance(49);
      wheel.refresh(handle);
    }
    expect(idle).not.toHaveBeenCalled();
    clock.advance(50);
    expect(idle).toHaveBeenCalledOnce();
  });
});

describe('TimerWheel.setInterval', () => {
  it('runs every period until cleared, from inside its own callback too', () => {
    const { clock, wheel } = manual();
    const at: number[] = [];
    const handle = wheel.setInterval(() => {
      at.push(clock.now());
      if (at.length === 3) wheel.clearInterval(handle);
    }, 10);
    clock.advance(100);
    expect(at).toEqual([10, 20, 30]);
    expect(wheel.size).toBe(0);
  });

  it('refuses a period of 0', () => {
    const { wheel } = manual();
    expect(() => wheel.setInterval(() => {}, 0)).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_DELAY' }),
    );
  });
});

describe('TimerWheel.sleep', () => {
  it('resolves after the delay', async () => {
    const { clock, wheel } = manual();
    let done = false;
    const sleeping = wheel.sleep(20).then(() => (done = true));
    clock.advance(19);
    await Promise.resolve();
    expect(done).toBe(false);
    clock.advance(1);
    await sleeping;
    expect(done).toBe(true);
  });

  it('rejects with an AbortError when the signal aborts, and cancels its timer', async () => {
    const { wheel } = manual();
    const controller = new AbortController();
    const sleeping = wheel.sleep(1000, { signal: controller.signal });
    expect(wheel.size).toBe(1);
    controller.abort(new Error('stop'));
    await expect(sleeping).rejects.toMatchObject({ name: 'AbortError', code: 'ABORT_ERR' });
    await expect(sleeping).rejects.toBeInstanceOf(AbortError);
    expect(wheel.size).toBe(0);
  });

  it('rejects with ERR_TICKWHEEL_CLOSED when the wheel closes first', async () => {
    const { wheel } = manual();
    const sleeping = wheel.sleep(1000);
    wheel.close();
    await expect(sleeping).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_CLOSED' });
  });

  it('rejects at once for an already aborted signal', async () => {
    const { wheel } = manual();
    await expect(wheel.sleep(10, { signal: AbortSignal.abort() })).rejects.toMatchObject({
      name: 'AbortError',
    });
    expect(wheel.size).toBe(0);
  });
});

describe('TimerWheel callbacks that throw', () => {
  it('sends the error to onError and still fires the other timers', () => {
    const errors: unknown[] = [];
    const { clock, wheel } = manual({ onError: (err) => errors.push(err) });
    const after = vi.fn();
    wheel.setTimeout(() => {
      throw new Error('boom');
    }, 5);
    wheel.setTimeout(after, 5);
    clock.advance(5);
    expect(errors).toHaveLength(1);
    expect(after).toHaveBeenCalledOnce();
    expect(wheel.stats().errors).toBe(1);
  });

  it('reports through a process warning when there is no onError', () => {
    const { clock, wheel } = manual();
    const emit = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    wheel.setTimeout(() => {
      throw new Error('unhandled in timer');
    }, 1);
    clock.advance(1);
    expect(emit).toHaveBeenCalledOnce();
    emit.mockRestore();
  });
});

describe('TimerWheel lean path', () => {
  it('calls the wheel-wide onExpire with the data of each timer', () => {
    const expired: number[] = [];
    const clock = new ManualClock(0);
    const wheel = new TimerWheel<number>({ clock, onExpire: (id) => expired.push(id) });
    const handles = [3, 1, 2].map((id) => wheel.schedule(id * 10, id));
    wheel.clearTimeout(handles[2]);
    clock.advance(100);
    expect(expired).toEqual([1, 3]);
  });

  it('refuses schedule() without onExpire', () => {
    const { wheel } = manual();
    expect(() => wheel.schedule(1, 'x')).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
    );
  });
});

describe('TimerWheel batches', () => {
  it('runs a large expiry in batches of maxBatch, all of them on a ManualClock advance', () => {
    const { clock, wheel } = manual({ maxBatch: 100 });
    let count = 0;
    for (let i = 0; i < 1050; i++) wheel.setTimeout(() => count++, 10);
    clock.advance(10);
    expect(count).toBe(1050);
  });

  it('yields to the event loop between batches on the real clock', async () => {
    const wheel = new TimerWheel({ maxBatch: 1000 });
    let fired = 0;
    let immediateSawPartial = false;
    for (let i = 0; i < 20_000; i++) wheel.setTimeout(() => fired++, 5);
    // An I/O-phase callback scheduled while the expiry runs must get a turn before it ends.
    const probe = () => {
      if (fired > 0 && fired < 20_000) immediateSawPartial = true;
      if (fired < 20_000) setImmediate(probe);
    };
    setImmediate(probe);
    await waitFor(() => fired === 20_000);
    expect(immediateSawPartial).toBe(true);
    wheel.close();
  });
});

describe('TimerWheel.close', () => {
  it('cancels every timer, and scheduling afterwards throws', () => {
    const { clock, wheel } = manual();
    const fn = vi.fn();
    wheel.setTimeout(fn, 10);
    wheel.setInterval(fn, 10);
    wheel.close();
    expect(wheel.size).toBe(0);
    clock.advance(100);
    expect(fn).not.toHaveBeenCalled();
    expect(() => wheel.setTimeout(fn, 1)).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_CLOSED' }),
    );
    expect(clock.nextDeadline()).toBe(Infinity);
    wheel.close();
  });
});

describe('One ManualClock driving several wheels', () => {
  it('interleaves their timers in time order', () => {
    const clock = new ManualClock(0);
    const a = new TimerWheel({ clock });
    const b = new TimerWheel({ clock, resolution: 5 });
    const order: string[] = [];
    a.setTimeout(() => order.push(`a${clock.now()}`), 7);
    b.setTimeout(() => order.push(`b${clock.now()}`), 3);
    a.setTimeout(() => order.push(`a${clock.now()}`), 12);
    b.setTimeout(() => order.push(`b${clock.now()}`), 9);
    clock.advance(20);
    expect(order).toEqual(['b5', 'a7', 'b10', 'a12']);
  });
});

describe('TimerWheel.scheduleAt', () => {
  it('fires the lean callback at an absolute clock time, in scheduling order for equal times', () => {
    const clock = new ManualClock(1_000_000);
    const fired: Array<[string, number]> = [];
    const wheel = new TimerWheel<string>({
      clock,
      onExpire: (name) => fired.push([name, clock.now()]),
    });
    wheel.scheduleAt(1_000_500, 'a');
    clock.advance(100);
    wheel.scheduleAt(1_000_500, 'b');
    wheel.scheduleAt(1_000_050, 'past');
    clock.advance(1000);
    expect(fired).toEqual([
      ['past', 1_000_101],
      ['a', 1_000_500],
      ['b', 1_000_500],
    ]);
  });

  it('refreshes with the delay the due time stood for when it was scheduled', () => {
    const clock = new ManualClock(2_000);
    const fired: number[] = [];
    const wheel = new TimerWheel<string>({ clock, onExpire: () => fired.push(clock.now()) });
    const handle = wheel.scheduleAt(2_300, 'x');
    clock.advance(100);
    expect(wheel.refresh(handle)).toBe(true);
    expect(wheel.deadline(handle)).toBe(2_400);
    clock.advance(1_000);
    expect(fired).toEqual([2_400]);
  });
});

describe('SystemClock({ epoch: true })', () => {
  it('reports Unix epoch milliseconds that never go backwards', async () => {
    const { SystemClock } = await import('../../src/index.js');
    const clock = new SystemClock({ epoch: true });
    const first = clock.now();
    expect(Math.abs(first - Date.now())).toBeLessThan(1000);
    expect(clock.now()).toBeGreaterThanOrEqual(first);
  });
});

describe('TimerWheel.nextWakeupAt and resolution', () => {
  it('name the next wake-up (never after the earliest deadline plus a tick) and the tick', () => {
    const { clock, wheel } = manual({ resolution: 4 });
    expect(wheel.resolution).toBe(4);
    expect(wheel.nextWakeupAt()).toBe(Infinity);
    const far = wheel.setTimeout(() => {}, 1000);
    wheel.setTimeout(() => {}, 10);
    const wake = wheel.nextWakeupAt();
    expect(wake).toBeGreaterThanOrEqual(10);
    expect(wake).toBeLessThan(10 + 4);
    expect(wheel.stats().nextWakeup).toBe(wake);
    clock.advance(wake);
    expect(wheel.nextWakeupAt()).toBeGreaterThan(wake);
    expect(wheel.nextWakeupAt()).toBeLessThan(1000 + 4);
    wheel.clearTimeout(far);
    expect(wheel.nextWakeupAt()).toBe(Infinity);
    wheel.close();
    expect(wheel.nextWakeupAt()).toBe(Infinity);
  });
});

/** A clock whose time runs ahead of its alarms by `lag` ms (a busy event loop). */
class LaggingClock extends ManualClock {
  lag = 0;
  // Its time moves (by `lag`) without the clock telling its wheels: they must read it every time.
  override readonly bindsLate = false;
  override now(): number {
    return super.now() + this.lag;
  }
}

describe('TimerWheel.runDue and alignTicks', () => {
  it('runDue fires, at once and in order, what is due while the alarm runs late; nothing early', () => {
    const clock = new LaggingClock(0);
    const fired: string[] = [];
    const wheel = new TimerWheel<string>({ clock, onExpire: (name) => fired.push(name) });
    wheel.schedule(5, 'a');
    wheel.schedule(5, 'b');
    wheel.schedule(3, 'c');
    wheel.schedule(9, 'later');
    expect(wheel.runDue()).toBe(0); // nothing due at 0
    clock.lag = 6;
    expect(wheel.runDue()).toBe(3);
    expect(fired).toEqual(['c', 'a', 'b']);
    expect(wheel.size).toBe(1);
    clock.advance(6); // the late alarm finds nothing more due
    expect(fired).toEqual(['c', 'a', 'b']);
    clock.lag = 0;
    clock.advance(3);
    expect(fired).toEqual(['c', 'a', 'b', 'later']);
    wheel.close();
    expect(wheel.runDue()).toBe(0);
  });

  it('runDue leaves the alarm set for the next timer, and trusts only the alarms of its own clocks', () => {
    const clock = new LaggingClock(0);
    const fired: string[] = [];
    const wheel = new TimerWheel<string>({ clock, onExpire: (name) => fired.push(name) });
    wheel.schedule(5, 'a');
    wheel.schedule(9, 'b');
    expect(clock.nextDeadline()).toBe(5);
    clock.lag = 6;
    expect(wheel.runDue()).toBe(1);
    // Set for b now, not left at a's time (the clock would wake for nothing).
    expect(clock.nextDeadline()).toBe(9);
    wheel.close();

    // A clock of another kind: its alarm's deadline is not trusted to say nothing is due.
    let time = 0;
    const other = {
      now: () => time,
      createAlarm: () => ({ deadline: Infinity, set() {}, clear() {}, dispose() {} }),
    };
    const seen: string[] = [];
    const wheel2 = new TimerWheel<string>({ clock: other, onExpire: (name) => seen.push(name) });
    wheel2.schedule(5, 'x');
    time = 6;
    expect(wheel2.runDue()).toBe(1);
    expect(seen).toEqual(['x']);
    wheel2.close();

    // Nor a subclass of this package's clocks that makes alarms of its own.
    class OwnAlarms extends ManualClock {
      // Its targets are not its AlarmSet's, so it cannot bind their waiting timers: none wait.
      override readonly bindsLate = false;
      override createAlarm() {
        return { deadline: Infinity, set() {}, clear() {}, dispose() {} };
      }
    }
    const own = new OwnAlarms(0);
    const seen3: string[] = [];
    const wheel3 = new TimerWheel<string>({ clock: own, onExpire: (name) => seen3.push(name) });
    wheel3.schedule(5, 'y');
    own.advance(6); // its alarms never fire: only runDue can
    expect(wheel3.runDue()).toBe(1);
    expect(seen3).toEqual(['y']);
    wheel3.close();
  });

  it('runDue does nothing inside an expiration, and timers started there still fire', () => {
    const clock = new LaggingClock(0);
    const fired: string[] = [];
    const wheel = new TimerWheel<string>({
      clock,
      onExpire: (name) => {
        fired.push(name);
        expect(wheel.expiring).toBe(true);
        expect(wheel.runDue()).toBe(0);
        if (name === 'a') wheel.schedule(2, 'from-a');
      },
    });
    wheel.schedule(1, 'a');
    wheel.schedule(1, 'b');
    clock.lag = 1;
    expect(wheel.expiring).toBe(false);
    expect(wheel.runDue()).toBe(2);
    clock.lag = 0;
    clock.advance(3);
    expect(fired).toEqual(['a', 'b', 'from-a']);
  });

  it('runDue against a reference: exactly the timers whose tick has begun, in order, whatever the alarm says', () => {
    type Op =
      | { kind: 'schedule'; delay: number }
      | { kind: 'cancel'; pick: number }
      | { kind: 'lag'; ms: number }
      | { kind: 'runDue' }
      | { kind: 'advance'; ms: number };
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      {
        weight: 4,
        arbitrary: fc
          .oneof(fc.integer({ min: 0, max: 30 }), fc.double({ min: 0, max: 30, noNaN: true }))
          .map((delay) => ({ kind: 'schedule' as const, delay })),
      },
      { weight: 1, arbitrary: fc.nat().map((pick) => ({ kind: 'cancel' as const, pick })) },
      {
        weight: 2,
        arbitrary: fc
          .oneof(fc.constant(0), fc.double({ min: 0, max: 20, noNaN: true }))
          .map((ms) => ({ kind: 'lag' as const, ms })),
      },
      { weight: 3, arbitrary: fc.constant({ kind: 'runDue' as const }) },
      {
        weight: 2,
        arbitrary: fc
          .double({ min: 0, max: 15, noNaN: true })
          .map((ms) => ({ kind: 'advance' as const, ms })),
      },
    );
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 60 }), (ops) => {
        const clock = new LaggingClock(0);
        const fired: number[] = [];
        const wheel = new TimerWheel<number>({ clock, onExpire: (id) => fired.push(id) });
        // The model: pending timers with the tick they are due at (the first tick that begins
        // at or after the deadline, and after the tick they were started in), in start order.
        const pending: Array<{ id: number; tick: number; handle: TimerHandle }> = [];
        const expected: number[] = [];
        const fireUpTo = (now: number) => {
          const nowTick = Math.floor(now);
          const due = pending.filter((timer) => timer.tick <= nowTick);
          due.sort((a, b) => a.tick - b.tick || a.id - b.id);
          for (const timer of due) {
            expected.push(timer.id);
            pending.splice(pending.indexOf(timer), 1);
          }
        };
        let next = 0;
        for (const op of ops) {
          if (op.kind === 'schedule') {
            const now = clock.now();
            const id = next++;
            const handle = wheel.schedule(op.delay, id);
            pending.push({
              id,
              tick: Math.max(Math.ceil(now + op.delay), Math.floor(now) + 1),
              handle,
            });
          } else if (op.kind === 'cancel') {
            if (pending.length === 0) continue;
            const [timer] = pending.splice(op.pick % pending.length, 1);
            wheel.clearTimeout(timer.handle);
          } else if (op.kind === 'lag') {
            // Time the clock's alarms have not seen yet (a busy event loop); never backwards.
            clock.lag = Math.max(clock.lag, op.ms);
          } else if (op.kind === 'runDue') {
            fireUpTo(clock.now());
            wheel.runDue();
          } else {
            // The alarms catch up: the clock's own time reaches the lagged time, and more.
            const by = clock.lag + op.ms;
            clock.lag = 0;
            clock.advance(by);
            fireUpTo(clock.now());
          }
          expect(fired).toEqual(expected);
        }
        wheel.close();
      }),
      { numRuns: 300 },
    );
  });

  it('alignTicks starts ticks on whole multiples of the resolution, not at construction', () => {
    const clock = new ManualClock(10.4);
    const fired: number[] = [];
    const aligned = new TimerWheel<number>({
      clock,
      resolution: 1,
      alignTicks: true,
      onExpire: () => fired.push(clock.now()),
    });
    aligned.scheduleAt(12, 0);
    expect(aligned.nextWakeupAt()).toBe(12);
    const plain = new TimerWheel<number>({ clock, resolution: 1, onExpire: () => {} });
    plain.scheduleAt(12, 0);
    expect(plain.nextWakeupAt()).toBeCloseTo(12.4, 9);
    clock.advance(1.6);
    expect(fired).toEqual([12]);
    expect(() => new TimerWheel({ alignTicks: 'yes' as unknown as boolean })).toThrow(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
    );
  });
});

describe('TimerWheel after an idle stretch', () => {
  it('places a short timer against the present on the first level, not a level it must cascade from', () => {
    const { clock, wheel } = manual();
    const fired: number[] = [];
    wheel.setTimeout(() => fired.push(clock.now()), 10);
    clock.advance(10);
    // An hour with nothing pending: the wheel's own tick stays where it was.
    clock.advance(3_600_000);
    const at = clock.now();
    wheel.setTimeout(() => fired.push(clock.now()), 5);
    const levels = wheel.wheelSnapshot().levels;
    expect(levels[0].slots.reduce((sum, count) => sum + count, 0)).toBe(1);
    expect(levels.slice(1).every((level) => level.slots.every((count) => count === 0))).toBe(true);
    clock.advance(4);
    expect(fired).toHaveLength(1);
    clock.advance(1);
    expect(fired).toEqual([10, at + 5]);
    wheel.close();
  });
});

describe('Lean and callback timers on one wheel', () => {
  // Expirations skip reading a row's flags while no callback timer exists: whichever way the
  // two kinds come and go, each timer must still fire as its own kind, once.
  type Op =
    | { kind: 'lean' | 'callback' | 'interval'; delay: number }
    | { kind: 'clear'; pick: number }
    | { kind: 'advance'; ms: number };
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    fc
      .tuple(fc.constantFrom('lean', 'callback', 'interval'), fc.integer({ min: 1, max: 30 }))
      .map(([kind, delay]) => ({ kind, delay }) as Op),
    fc.nat().map((pick) => ({ kind: 'clear' as const, pick })),
    fc.integer({ min: 0, max: 40 }).map((ms) => ({ kind: 'advance' as const, ms })),
  );

  it('fires each timer as the kind it was started as', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 80 }), (ops) => {
        const clock = new ManualClock(0);
        const viaOnExpire: unknown[] = [];
        const viaCallback: number[] = [];
        const wheel = new TimerWheel<number>({ clock, onExpire: (id) => viaOnExpire.push(id) });
        const kinds: string[] = [];
        const handles: TimerHandle[] = [];
        const cleared = new Set<number>();
        for (const op of ops) {
          if (op.kind === 'lean') {
            kinds.push('lean');
            handles.push(wheel.schedule(op.delay, kinds.length - 1));
          } else if (op.kind === 'callback' || op.kind === 'interval') {
            const id = kinds.length;
            kinds.push(op.kind);
            let runs = 0;
            const fn = function (this: TimerHandle) {
              viaCallback.push(id);
              if (op.kind === 'interval' && ++runs === 2) wheel.clearInterval(this);
            };
            handles.push(
              op.kind === 'interval'
                ? wheel.setInterval(fn, op.delay)
                : wheel.setTimeout(fn, op.delay),
            );
          } else if (op.kind === 'clear') {
            const pending = handles.flatMap((h, id) => (wheel.has(h) ? [id] : []));
            if (pending.length === 0) continue;
            const id = pending[op.pick % pending.length];
            expect(wheel.clearTimeout(handles[id])).toBe(true);
            cleared.add(id);
          } else if (op.kind === 'advance') {
            clock.advance(op.ms);
          }
        }
        clock.advance(1000);
        expect(wheel.size).toBe(0);
        for (const value of viaOnExpire) expect(typeof value).toBe('number');
        const runs = (list: unknown[], id: number) => list.filter((v) => v === id).length;
        kinds.forEach((kind, id) => {
          const lean = runs(viaOnExpire, id);
          const callback = runs(viaCallback, id);
          if (kind === 'lean') {
            expect(callback).toBe(0);
            expect(lean).toBe(cleared.has(id) ? 0 : 1);
          } else {
            expect(lean).toBe(0);
            const wanted = kind === 'interval' ? 2 : 1;
            if (cleared.has(id)) expect(callback).toBeLessThan(wanted);
            else expect(callback).toBe(wanted);
          }
        });
      }),
      { numRuns: Number(process.env.TICKWHEEL_PROPERTY_RUNS ?? 500) },
    );
  });
});

describe('Timers at the edge of the wheel', () => {
  it('a refresh() that throws leaves the timer as it was', () => {
    const clock = new ManualClock(0);
    const errors: unknown[] = [];
    const wheel = new TimerWheel({ clock, onError: (err) => errors.push(err) });
    const runs: number[] = [];
    const interval = wheel.setInterval(() => runs.push(clock.now()), 10);
    expect(() => wheel.refresh(interval, 2 ** 53)).toThrow(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_DELAY' }),
    );
    clock.advance(35);
    expect({ runs, pending: wheel.has(interval), errors }).toEqual({
      runs: [10, 20, 30],
      pending: true,
      errors: [],
    });
    wheel.close();
    expect(wheel.size).toBe(0);
  });

  it('an interval whose next run is past the last tick runs once more, reports it, and ends', () => {
    const clock = new ManualClock(0);
    const errors: unknown[] = [];
    const fired: string[] = [];
    const wheel = new TimerWheel<string>({
      clock,
      onError: (err) => errors.push(err),
      onExpire: (name) => fired.push(name),
    });
    clock.advance(2 ** 53 - 200);
    const runs: number[] = [];
    const interval = wheel.setInterval(() => runs.push(clock.now()), 150);
    clock.advance(200);
    expect(runs).toEqual([2 ** 53 - 50]);
    expect(errors).toEqual([expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_DELAY' })]);
    expect(wheel.has(interval)).toBe(false);
    expect(wheel.size).toBe(0);
    expect(fired).toEqual([]);
    wheel.close();
  });

  it('a row that served every generation is retired: a handle from its first timer never names a later one', () => {
    const clock = new ManualClock(0);
    const fired: string[] = [];
    const wheel = new TimerWheel<string>({ clock, onExpire: (name) => fired.push(name) });
    const stale = wheel.schedule(10, 'first');
    expect(wheel.clearTimeout(stale)).toBe(true);
    // The same row serves every one of these (the free list gives it back each time).
    // Without retiring, the next timer after these would be the row's generation 1 again.
    for (let i = 0; i < 2 ** 25 - 2; i++) wheel.clearTimeout(wheel.schedule(10, 'x'));
    const later = wheel.schedule(10, 'later');
    expect(later).not.toBe(stale);
    expect(wheel.clearTimeout(stale)).toBe(false);
    expect(wheel.has(later)).toBe(true);
    clock.advance(20);
    expect(fired).toEqual(['later']);
  }, 120_000);
});

describe('the timer faces refuse options that are not options', () => {
  const faces: Array<[string, (options: unknown) => unknown]> = [
    ['TimerWheel', (options) => new TimerWheel(options as never)],
    ['HashedWheelTimer', (options) => new HashedWheelTimer(options as never)],
    ['SystemTimer', (options) => new SystemTimer(options as never)],
  ];
  it.each(faces)(
    '%s: a number, a string or null for the options; unref not a boolean',
    (_name, make) => {
      for (const options of [5, 'fast', null, true]) {
        expect(() => make(options)).toThrow(
          expect.objectContaining({
            code: 'ERR_TICKWHEEL_INVALID_OPTION',
            message: expect.stringContaining('options must be an object'),
          }),
        );
      }
      expect(() => make({ unref: 'yes' })).toThrow(
        expect.objectContaining({
          code: 'ERR_TICKWHEEL_INVALID_OPTION',
          message: 'unref must be true or false, got the string "yes"',
        }),
      );
    },
  );

  it('a ManualClock says what its start time was', () => {
    expect(() => new ManualClock('5' as never)).toThrow(
      expect.objectContaining({
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
        message: 'startMs must be a finite number, got the string "5"',
      }),
    );
  });
});
