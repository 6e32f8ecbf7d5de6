import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HashedWheel, HierarchicalWheel, type TimingWheel } from '../../src/wheel/index.js';

/**
 * The wheels against an obviously correct model: a list of pending rows, each with its tick and
 * the sequence number of its last insertion. After any sequence of operations, an advance to
 * `now` must fire exactly the model's rows with tick <= now, ordered by (tick, sequence), or the
 * first `limit` of them.
 */

interface ModelRow {
  handle: number;
  tick: number;
  seq: number;
}

type Op =
  | { kind: 'add'; delta: number }
  | { kind: 'cancel'; pick: number }
  | { kind: 'stale'; pick: number }
  | { kind: 'reschedule'; pick: number; delta: number }
  | { kind: 'advance'; delta: number; limit: number }
  | { kind: 'idle'; delta: number };

function deltaArb(far: boolean): fc.Arbitrary<number> {
  const near = fc.integer({ min: 0, max: 70 });
  if (!far) return fc.oneof(near, fc.integer({ min: 0, max: 5000 }));
  return fc.oneof(
    near,
    fc.integer({ min: 0, max: 100_000 }),
    fc.integer({ min: 0, max: 2 ** 40 }),
    fc.integer({ min: 2 ** 31 - 5, max: 2 ** 33 }),
  );
}

function opsArb(far: boolean): fc.Arbitrary<Op[]> {
  const delta = deltaArb(far);
  const op: fc.Arbitrary<Op> = fc.oneof(
    { weight: 5, arbitrary: delta.map((d) => ({ kind: 'add' as const, delta: d })) },
    { weight: 2, arbitrary: fc.nat().map((p) => ({ kind: 'cancel' as const, pick: p })) },
    { weight: 1, arbitrary: fc.nat().map((p) => ({ kind: 'stale' as const, pick: p })) },
    {
      weight: 2,
      arbitrary: fc
        .tuple(fc.nat(), delta)
        .map(([p, d]) => ({ kind: 'reschedule' as const, pick: p, delta: d })),
    },
    {
      weight: 3,
      arbitrary: fc
        .tuple(delta, fc.oneof(fc.constant(Infinity), fc.integer({ min: 0, max: 4 })))
        .map(([d, limit]) => ({ kind: 'advance' as const, delta: d, limit })),
    },
    // A driver bringing an empty wheel up to now before its next timer (idleTo); a wheel with
    // rows must ignore it.
    { weight: 1, arbitrary: delta.map((d) => ({ kind: 'idle' as const, delta: d })) },
  );
  return fc.array(op, { maxLength: 120 });
}

function check(wheel: TimingWheel, ops: Op[], startTick: number): void {
  const entries = wheel.entries;
  let pending: ModelRow[] = [];
  const gone: number[] = [];
  let seq = 0;
  let now = startTick;
  const byOrder = (a: ModelRow, b: ModelRow) => a.tick - b.tick || a.seq - b.seq;

  const fire = (until: number, limit: number) => {
    const fired: number[] = [];
    wheel.advance(
      until,
      (index) => {
        fired.push(entries.handleOf(index));
        wheel.release(index);
      },
      limit,
    );
    const due = pending.filter((row) => row.tick <= until).sort(byOrder);
    const expected = due.slice(0, Math.min(limit, due.length)).map((row) => row.handle);
    expect(fired).toEqual(expected);
    const firedSet = new Set(fired);
    pending = pending.filter((row) => !firedSet.has(row.handle));
    gone.push(...fired);
  };

  for (const op of ops) {
    // Drivers never insert before `current`; the model does the same.
    const base = Math.max(now, wheel.current);
    switch (op.kind) {
      case 'add': {
        const tick = base + op.delta;
        const handle = entries.handleOf(wheel.add(tick));
        pending.push({ handle, tick, seq: seq++ });
        break;
      }
      case 'cancel': {
        if (pending.length === 0) break;
        const row = pending[op.pick % pending.length];
        expect(wheel.cancel(row.handle)).toBe(true);
        expect(wheel.cancel(row.handle)).toBe(false);
        pending = pending.filter((r) => r !== row);
        gone.push(row.handle);
        break;
      }
      case 'stale': {
        if (gone.length === 0) break;
        expect(wheel.cancel(gone[op.pick % gone.length])).toBe(false);
        break;
      }
      case 'reschedule': {
        if (pending.length === 0) break;
        const row = pending[op.pick % pending.length];
        const index = entries.indexOf(row.handle);
        expect(index).toBeGreaterThanOrEqual(0);
        row.tick = base + op.delta;
        row.seq = seq++;
        wheel.reschedule(index, row.tick);
        break;
      }
      case 'advance': {
        const until = now + op.delta;
        fire(until, op.limit);
        now = until;
        break;
      }
      case 'idle': {
        const current = wheel.current;
        wheel.idleTo(now + op.delta);
        if (pending.length > 0) expect(wheel.current).toBe(current);
        expect(wheel.current).toBeGreaterThanOrEqual(current);
        break;
      }
    }
    expect(wheel.size).toBe(pending.length);
    expect(entries.live).toBe(pending.length);
    if (pending.length > 0) {
      const earliest = Math.min(...pending.map((row) => row.tick));
      const next = wheel.nextDeadline();
      // The next expiration may be a cascade or a visit before the earliest row; never after it.
      expect(next).toBeLessThanOrEqual(Math.max(earliest, wheel.current));
    } else {
      expect(wheel.nextDeadline()).toBe(Infinity);
    }
  }
  // Drain everything that is left by stepping from expiration to expiration.
  let guard = 0;
  while (pending.length > 0 && guard++ < 10_000) {
    const next = wheel.nextDeadline();
    expect(Number.isFinite(next)).toBe(true);
    fire(Math.max(next, now), Infinity);
    now = Math.max(next, now);
  }
  expect(pending).toEqual([]);
  expect(wheel.size).toBe(0);
}

const wheels: Array<[string, (startTick: number) => TimingWheel, boolean]> = [
  [
    'HierarchicalWheel W=64',
    (startTick) => new HierarchicalWheel({ startTick, initialCapacity: 16 }),
    true,
  ],
  [
    'HierarchicalWheel W=4096 (TimerWheel)',
    (startTick) => new HierarchicalWheel({ wheelSize: 4096, startTick, initialCapacity: 16 }),
    true,
  ],
  [
    'HierarchicalWheel W=20 (Kafka)',
    (startTick) => new HierarchicalWheel({ wheelSize: 20, startTick }),
    true,
  ],
  [
    'HierarchicalWheel W=2',
    (startTick) => new HierarchicalWheel({ wheelSize: 2, startTick }),
    true,
  ],
  [
    'HierarchicalWheel W=100',
    (startTick) => new HierarchicalWheel({ wheelSize: 100, startTick }),
    true,
  ],
  ['HashedWheel W=8', (startTick) => new HashedWheel({ ticksPerWheel: 8, startTick }), false],
  ['HashedWheel W=512', (startTick) => new HashedWheel({ startTick }), false],
];

describe.each(wheels)('%s against a sorted-list model', (_name, make, far) => {
  it('fires exactly the due rows, in (tick, insertion) order, never early', () => {
    fc.assert(
      fc.property(
        opsArb(far),
        fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 2 ** 36 })),
        (ops, start) => check(make(start), ops, start),
      ),
      { numRuns: 1500 },
    );
  });
});
