import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock, TimerWheel } from '../../src/index.js';

/**
 * TimerWheel on a ManualClock against a reference model: a plain list of pending timers. The
 * model's rule for when a timer fires is the documented one: at the first tick boundary at or
 * after its deadline, and after the tick it was scheduled in; equal ticks in the order the timers
 * were (re)armed. Timers scheduled from callbacks and intervals take part too.
 */

interface ModelTimer {
  id: number;
  tick: number;
  seq: number;
  /** Delay used by refresh() and by the interval's next run. */
  delay: number;
  interval: boolean;
  /** A timer that, when it fires, schedules a child with this delay. */
  spawn: number | undefined;
  handle: number;
}

type Op =
  | { kind: 'timeout'; delay: number; spawn: number | undefined }
  | { kind: 'interval'; period: number }
  | { kind: 'clear'; pick: number }
  | { kind: 'refresh'; pick: number; delay: number | undefined }
  | { kind: 'advance'; ms: number }
  | { kind: 'many'; count: number; delay: number };

const delayArb = fc.oneof(
  fc.integer({ min: -5, max: 40 }),
  fc.double({ min: 0, max: 100, noNaN: true }),
  fc.integer({ min: 0, max: 5000 }),
  fc.integer({ min: 2 ** 31 - 10, max: 2 ** 31 + 10 }),
);

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc
      .tuple(delayArb, fc.option(fc.integer({ min: 0, max: 50 }), { nil: undefined }))
      .map(([delay, spawn]) => ({ kind: 'timeout' as const, delay, spawn })),
  },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 1, max: 60 })
      .map((period) => ({ kind: 'interval' as const, period })),
  },
  { weight: 2, arbitrary: fc.nat().map((pick) => ({ kind: 'clear' as const, pick })) },
  {
    // Enough timers in one go to fill a batch of timers waiting for a clock reading.
    weight: 1,
    arbitrary: fc
      .tuple(fc.integer({ min: 1, max: 600 }), fc.integer({ min: 0, max: 30 }))
      .map(([count, delay]) => ({ kind: 'many' as const, count, delay })),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.nat(), fc.option(fc.integer({ min: 0, max: 200 }), { nil: undefined }))
      .map(([pick, delay]) => ({ kind: 'refresh' as const, pick, delay })),
  },
  {
    weight: 3,
    arbitrary: fc
      .oneof(
        fc.integer({ min: 0, max: 100 }),
        fc.double({ min: 0, max: 50, noNaN: true }),
        fc.integer({ min: 0, max: 10_000 }),
      )
      .map((ms) => ({ kind: 'advance' as const, ms })),
  },
);

/**
 * `checkEach`: read every pending timer's deadline after each operation. Reading a deadline
 * places the timers that wait for a clock reading; without it they wait until the clock moves
 * (or a cancel, a refresh, a batch filling up), as in a program that starts many at once.
 */
function run(resolution: number, start: number, ops: Op[], checkEach = true): void {
  const clock = new ManualClock(start);
  const wheel = new TimerWheel({ clock, resolution });
  const origin = start;
  const fired: Array<[number, number]> = [];
  let model: ModelTimer[] = [];
  let seq = 0;
  let nextId = 0;

  // The documented rule, written plainly: tick k begins at origin + k * resolution; a timer
  // fires on the first tick that begins at or after its deadline, and never on the tick that
  // `now` falls in. Ticks are defined by the clock times they begin at, so both searches
  // compare times, not quotients (which round).
  const timeOf = (k: number) => origin + k * resolution;
  const tickFor = (now: number, delay: number) => {
    const deadline = now + Math.max(0, delay);
    let tick = Math.floor((deadline - origin) / resolution) - 1;
    while (timeOf(tick) < deadline) tick++;
    let nowTick = Math.ceil((now - origin) / resolution) + 1;
    while (timeOf(nowTick) > now) nowTick--;
    return Math.max(tick, nowTick + 1);
  };

  const arm = (timer: ModelTimer, now: number, delay: number) => {
    timer.tick = tickFor(now, delay);
    timer.seq = seq++;
  };

  const childHandles = new Map<number, number>();
  const childId = (parent: number) => parent + 1_000_000;

  const schedule = (delay: number, spawn: number | undefined, interval: boolean, now: number) => {
    const id = nextId++;
    const timer: ModelTimer = {
      id,
      tick: 0,
      seq: 0,
      delay: Math.max(0, delay),
      interval,
      spawn,
      handle: 0,
    };
    arm(timer, now, delay);
    const callback = () => {
      fired.push([id, clock.now()]);
      if (spawn !== undefined) {
        const child = childId(id);
        childHandles.set(
          child,
          wheel.setTimeout(() => fired.push([child, clock.now()]), spawn),
        );
      }
      // Intervals stop after three runs so that every sequence ends.
      if (interval && fired.filter(([f]) => f === id).length >= 3)
        wheel.clearInterval(timer.handle);
    };
    timer.handle = interval
      ? wheel.setInterval(callback, delay)
      : wheel.setTimeout(callback, delay);
    model.push(timer);
  };

  /** What the model expects from advancing the clock from `now` to `target`. */
  const expectAdvance = (target: number): Array<[number, number]> => {
    const expected: Array<[number, number]> = [];
    const runs = new Map<number, number>();
    for (const [id] of fired) runs.set(id, (runs.get(id) ?? 0) + 1);
    while (true) {
      const due = model
        .filter((t) => origin + t.tick * resolution <= target)
        .sort((a, b) => a.tick - b.tick || a.seq - b.seq)[0];
      if (due === undefined) break;
      const at = origin + due.tick * resolution;
      expected.push([due.id, at]);
      const count = (runs.get(due.id) ?? 0) + 1;
      runs.set(due.id, count);
      if (due.interval && count < 3) arm(due, at, due.delay);
      else model = model.filter((t) => t !== due);
      if (due.spawn !== undefined) {
        const child: ModelTimer = {
          id: childId(due.id),
          tick: 0,
          seq: 0,
          delay: due.spawn,
          interval: false,
          spawn: undefined,
          handle: -1,
        };
        arm(child, at, due.spawn);
        model.push(child);
      }
    }
    return expected;
  };

  for (const op of ops) {
    const now = clock.now();
    switch (op.kind) {
      case 'timeout':
        schedule(op.delay, op.spawn, false, now);
        break;
      case 'interval':
        schedule(op.period, undefined, true, now);
        break;
      case 'many':
        for (let i = 0; i < op.count; i++) schedule(op.delay, undefined, false, now);
        break;
      case 'clear': {
        if (model.length === 0) break;
        const timer = model[op.pick % model.length];
        expect(wheel.clearTimeout(timer.handle)).toBe(true);
        expect(wheel.has(timer.handle)).toBe(false);
        expect(wheel.clearTimeout(timer.handle)).toBe(false);
        model = model.filter((t) => t !== timer);
        break;
      }
      case 'refresh': {
        if (model.length === 0) break;
        const timer = model[op.pick % model.length];
        if (op.delay !== undefined && timer.interval && op.delay === 0) break;
        expect(wheel.refresh(timer.handle, op.delay)).toBe(true);
        if (op.delay !== undefined) timer.delay = op.delay;
        arm(timer, now, timer.delay);
        break;
      }
      case 'advance': {
        const before = fired.length;
        const expected = expectAdvance(now + op.ms);
        clock.advance(op.ms);
        expect(fired.slice(before)).toEqual(expected);
        for (const timer of model) {
          if (timer.handle === -1) timer.handle = childHandles.get(timer.id)!;
        }
        break;
      }
    }
    expect(wheel.size).toBe(model.length);
    if (!checkEach && op.kind !== 'advance') continue;
    for (const timer of model) {
      expect(wheel.deadline(timer.handle)).toBe(origin + timer.tick * resolution);
    }
  }
  wheel.close();
  expect(wheel.size).toBe(0);
}

describe('TimerWheel on a ManualClock against a reference model', () => {
  for (const resolution of [1, 10, 0.5]) {
    it(`fires every timer at its first tick at or after its deadline, in order (resolution ${resolution} ms)`, () => {
      fc.assert(
        fc.property(
          fc.oneof(
            fc.constant(0),
            fc.integer({ min: -1e6, max: 1e12 }),
            fc.double({ min: 0, max: 1e6, noNaN: true }),
          ),
          fc.array(opArb, { maxLength: 60 }),
          (start, ops) => run(resolution, start, ops),
        ),
        { numRuns: Number(process.env.TICKWHEEL_PROPERTY_RUNS ?? 1500) },
      );
    });
  }

  it('places timers that wait for a clock reading as if it had been read at their start', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.constant(0), fc.double({ min: 0, max: 1e6, noNaN: true })),
        fc.constantFrom(1, 0.5, 10),
        fc.array(opArb, { maxLength: 60 }),
        (start, resolution, ops) => run(resolution, start, ops, false),
      ),
      { numRuns: Number(process.env.TICKWHEEL_PROPERTY_RUNS ?? 1500) },
    );
  });
});
