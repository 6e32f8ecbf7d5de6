import { once } from 'node:events';
import { createConnection, createServer, type Socket } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../support/wait-for.js';
import {
  IdleTracker,
  ManualClock,
  SystemClock,
  type IdleState,
  type IdleTrackerOptions,
} from '../../src/index.js';

type Event = [item: string, state: IdleState, periods: number, at: number];

function tracker(options: Partial<IdleTrackerOptions<string>>, start = 0) {
  const clock = new ManualClock(start);
  const events: Event[] = [];
  const idle = new IdleTracker<string>({
    clock,
    onIdle: (item, state, periods) => events.push([item, state, periods, clock.now()]),
    ...options,
  });
  return { clock, idle, events };
}

describe('IdleTracker events', () => {
  it('reports reader-idle exactly one period after the last read, never before', () => {
    const { clock, idle, events } = tracker({ readerIdleMs: 100 });
    const a = idle.track('a');
    clock.advance(60);
    idle.read(a); // idle from 60: due at 160
    clock.advance(99);
    expect(events).toEqual([]);
    clock.advance(1);
    expect(events).toEqual([['a', 'reader-idle', 1, 160]]);
  });

  it('repeats the event every period while idle, counting periods like Netty’s first flag', () => {
    const { clock, idle, events } = tracker({ readerIdleMs: 100 });
    const a = idle.track('a');
    clock.advance(350);
    expect(events.map(([, , periods, at]) => [periods, at])).toEqual([
      [1, 100],
      [2, 200],
      [3, 300],
    ]);
    idle.read(a); // activity: the next event is a first one again
    clock.advance(100);
    expect(events.at(-1)).toEqual(['a', 'reader-idle', 1, 450]);
  });

  it('tells reads, writes and both apart, and orders states due together reader, writer, all', () => {
    const { clock, idle, events } = tracker({
      readerIdleMs: 100,
      writerIdleMs: 100,
      allIdleMs: 100,
    });
    const a = idle.track('a');
    clock.advance(100);
    expect(events.map(([, state]) => state)).toEqual(['reader-idle', 'writer-idle', 'all-idle']);
    events.length = 0;
    clock.advance(50);
    idle.write(a); // at 150: writes resume, reads do not
    clock.advance(50);
    expect(events).toEqual([['a', 'reader-idle', 2, 200]]);
    events.length = 0;
    idle.touch(a); // at 200: both
    clock.advance(99);
    expect(events).toEqual([]);
    clock.advance(1);
    expect(events.map(([, state, periods]) => [state, periods])).toEqual([
      ['reader-idle', 1],
      ['writer-idle', 1],
      ['all-idle', 1],
    ]);
  });

  it('counts all-idle from the later of the last read and the last write', () => {
    const { clock, idle, events } = tracker({ allIdleMs: 100 });
    const a = idle.track('a');
    clock.advance(40);
    idle.read(a);
    clock.advance(40);
    idle.write(a); // last activity 80
    clock.advance(99);
    expect(events).toEqual([]);
    clock.advance(1);
    expect(events).toEqual([['a', 'all-idle', 1, 180]]);
  });

  it('does not touch the wheel on activity: 3000 reads cost a handful of wake-ups', () => {
    const { clock, idle, events } = tracker({ readerIdleMs: 1000 });
    const a = idle.track('a');
    let wakeups = 0;
    for (let t = 1; t <= 3000; t++) {
      idle.read(a); // a read every millisecond: never idle
      const next = clock.nextDeadline();
      clock.advance(1);
      if (next <= clock.now()) wakeups++;
    }
    expect(events).toEqual([]);
    // One check per period (at 1000, 1999, 2998) plus the wheel's own cascades.
    expect(wakeups).toBeLessThanOrEqual(6);
  });

  it('reports a late check as one event with the periods that passed', () => {
    const { clock, idle, events } = tracker({ readerIdleMs: 10, resolution: 35 });
    idle.track('a');
    clock.advance(35);
    expect(events).toEqual([['a', 'reader-idle', 3, 35]]);
    clock.advance(35);
    expect(events.at(-1)).toEqual(['a', 'reader-idle', 7, 70]);
  });

  it('is never early and at most one tick late with a coarse resolution', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.array(fc.integer({ min: 1, max: 400 }), { minLength: 1, maxLength: 20 }),
        fc.double({ min: 0.5, max: 300, noNaN: true }),
        (resolution, gaps, period) => {
          const { clock, idle, events } = tracker({ readerIdleMs: period, resolution });
          const a = idle.track('a');
          let last = 0;
          for (const gap of gaps) {
            clock.advance(gap);
            for (const [, , periods, at] of events) {
              expect(at).toBeGreaterThanOrEqual(last + periods * period);
              expect(at).toBeLessThanOrEqual(last + periods * period + resolution);
            }
            events.length = 0;
            idle.read(a);
            last = clock.now();
          }
        },
      ),
    );
  });
});

describe('IdleTracker handles and callbacks', () => {
  it('untracks from inside the callback, and the handle goes inert', () => {
    const clock = new ManualClock();
    const events: Event[] = [];
    const idle = new IdleTracker<string>({
      clock,
      readerIdleMs: 10,
      writerIdleMs: 10,
      onIdle: (item, state, periods, handle) => {
        events.push([item, state, periods, clock.now()]);
        idle.untrack(handle);
      },
    });
    const a = idle.track('a');
    clock.advance(100);
    expect(events).toEqual([['a', 'reader-idle', 1, 10]]); // writer-idle never came: untracked
    expect(idle.has(a)).toBe(false);
    expect(idle.read(a)).toBe(false);
    expect(idle.untrack(a)).toBe(false);
    expect(idle.size).toBe(0);
  });

  it('a stale handle never touches the item that reuses its storage', () => {
    const { clock, idle, events } = tracker({ readerIdleMs: 100 });
    const a = idle.track('a');
    idle.untrack(a);
    const b = idle.track('b');
    expect(b).not.toBe(a);
    clock.advance(50);
    expect(idle.read(a)).toBe(false);
    clock.advance(50);
    expect(events).toEqual([['b', 'reader-idle', 1, 100]]);
    expect(idle.item(b)).toBe('b');
    expect(idle.item(a)).toBeUndefined();
  });

  it('keeps going when a callback throws: the error goes to onError', () => {
    const errors: unknown[] = [];
    const { clock, idle, events } = tracker({
      readerIdleMs: 10,
      writerIdleMs: 10,
      onError: (err) => errors.push(err),
      onIdle: (item, state, periods) => {
        events.push([item, state, periods, clock.now()]);
        if (item === 'bad') throw new Error(`${state} handler failed`);
      },
    });
    idle.track('bad');
    idle.track('good');
    clock.advance(20);
    expect(events.filter(([item]) => item === 'good')).toHaveLength(4);
    expect(events.filter(([item]) => item === 'bad')).toHaveLength(4);
    expect(errors.map((err) => (err as Error).message)).toEqual([
      'reader-idle handler failed',
      'writer-idle handler failed',
      'reader-idle handler failed',
      'writer-idle handler failed',
    ]);
  });

  it('does not report a state whose activity the callback of an earlier state recorded', () => {
    const clock = new ManualClock();
    const events: Event[] = [];
    const idle = new IdleTracker<string>({
      clock,
      readerIdleMs: 50,
      writerIdleMs: 50,
      onIdle: (item, state, periods, handle) => {
        events.push([item, state, periods, clock.now()]);
        if (state === 'reader-idle') idle.write(handle); // e.g. sends a ping
      },
    });
    idle.track('a');
    clock.advance(120);
    expect(events.map(([, state, , at]) => [state, at])).toEqual([
      ['reader-idle', 50],
      ['reader-idle', 100],
    ]);
  });

  it('closes: no more events, tracking throws, queries answer "nothing"', () => {
    const { clock, idle, events } = tracker({ readerIdleMs: 10 });
    const a = idle.track('a');
    idle.close();
    clock.advance(100);
    expect(events).toEqual([]);
    expect(idle.size).toBe(0);
    expect(idle.read(a)).toBe(false);
    expect(idle.has(a)).toBe(false);
    expect(() => idle.track('b')).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_CLOSED' }),
    );
    expect(clock.nextDeadline()).toBe(Infinity);
    idle.close();
  });
});

describe('IdleTracker options', () => {
  const onIdle = () => {};

  it('treats 0 or a missing period as "not detected", like Netty', () => {
    const { clock, idle, events } = tracker({ readerIdleMs: 0, writerIdleMs: 30 });
    idle.track('a');
    clock.advance(30);
    expect(events.map(([, state]) => state)).toEqual(['writer-idle']);
  });

  it('refuses negative, NaN, infinite and non-number periods with a coded error', () => {
    for (const bad of [-1, NaN, Infinity, '100', null]) {
      expect(() => new IdleTracker({ onIdle, readerIdleMs: bad as number })).toThrowError(
        expect.objectContaining({
          name: 'TickwheelRangeError',
          code: 'ERR_TICKWHEEL_INVALID_OPTION',
          message: expect.stringContaining('readerIdleMs'),
        }),
      );
    }
  });

  it('refuses a tracker with nothing to detect, and a missing onIdle', () => {
    expect(() => new IdleTracker({ onIdle })).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
    );
    expect(() => new IdleTracker({ allIdleMs: 5 } as IdleTrackerOptions<unknown>)).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_CALLBACK' }),
    );
    expect(
      () => new IdleTracker({ onIdle, allIdleMs: 5, clock: { now: () => 0 } as never }),
    ).toThrowError(expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }));
  });

  it('refuses missing options, or options that are not an object, with a coded error', () => {
    for (const options of [undefined, null, 100]) {
      expect(() => new IdleTracker(options as never)).toThrowError(
        expect.objectContaining({
          name: 'TickwheelTypeError',
          code: 'ERR_TICKWHEEL_INVALID_OPTION',
          message: expect.stringMatching(/^IdleTracker options must be an object/),
        }),
      );
    }
  });
});

describe('IdleTracker against a model', () => {
  type Op =
    | { kind: 'track' }
    | { kind: 'read' | 'write' | 'touch' | 'untrack'; pick: number }
    | { kind: 'advance'; ms: number };

  const opArb: fc.Arbitrary<Op> = fc.oneof(
    { weight: 2, arbitrary: fc.constant({ kind: 'track' as const }) },
    {
      weight: 5,
      arbitrary: fc.record({
        kind: fc.constantFrom(
          'read' as const,
          'write' as const,
          'touch' as const,
          'untrack' as const,
        ),
        pick: fc.nat(),
      }),
    },
    {
      weight: 4,
      arbitrary: fc.integer({ min: 0, max: 250 }).map((ms) => ({ kind: 'advance' as const, ms })),
    },
  );
  const periodArb = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 120 }));

  it('reports exactly the events due at L + k·P, on time, for random activity', () => {
    fc.assert(
      fc.property(
        fc
          .tuple(periodArb, periodArb, periodArb)
          .filter((periods) => periods.some((period) => period > 0)),
        fc.array(opArb, { maxLength: 80 }),
        ([readerIdleMs, writerIdleMs, allIdleMs], ops) => {
          const { clock, idle, events } = tracker({ readerIdleMs, writerIdleMs, allIdleMs });
          const periodOf: Record<IdleState, number> = {
            'reader-idle': readerIdleMs,
            'writer-idle': writerIdleMs,
            'all-idle': allIdleMs,
          };
          const model: Array<{ id: string; handle: number; read: number; write: number }> = [];
          let next = 0;
          for (const op of ops) {
            const now = clock.now();
            if (op.kind === 'track') {
              const id = `i${next++}`;
              model.push({ id, handle: idle.track(id), read: now, write: now });
            } else if (op.kind === 'advance') {
              const target = now + op.ms;
              const expected: Event[] = [];
              for (const item of model) {
                for (const state of ['reader-idle', 'writer-idle', 'all-idle'] as const) {
                  const period = periodOf[state];
                  if (period === 0) continue;
                  const last =
                    state === 'reader-idle'
                      ? item.read
                      : state === 'writer-idle'
                        ? item.write
                        : Math.max(item.read, item.write);
                  for (let k = 1; last + k * period <= target; k++) {
                    if (last + k * period > now) {
                      expected.push([item.id, state, k, last + k * period]);
                    }
                  }
                }
              }
              events.length = 0;
              clock.advance(op.ms);
              const order = (e: Event) => `${String(e[3]).padStart(8)} ${e[0]} ${e[1]}`;
              const sort = (list: Event[]) =>
                [...list].sort((a, b) => (order(a) < order(b) ? -1 : 1));
              expect(sort(events)).toEqual(sort(expected));
            } else if (model.length > 0) {
              const item = model[op.pick % model.length];
              if (op.kind === 'untrack') {
                expect(idle.untrack(item.handle)).toBe(true);
                model.splice(model.indexOf(item), 1);
              } else {
                expect(idle[op.kind](item.handle)).toBe(true);
                if (op.kind !== 'write') item.read = now;
                if (op.kind !== 'read') item.write = now;
              }
            }
            expect(idle.size).toBe(model.length);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

const gc = (globalThis as { gc?: () => void }).gc;

describe('IdleTracker at a million items', () => {
  it.runIf(gc !== undefined)(
    'tracks 1M items in under 128 bytes each and reports each idle item once on time',
    () => {
      const settle = () => {
        gc!();
        gc!();
        const usage = process.memoryUsage();
        return usage.heapUsed + usage.arrayBuffers;
      };
      const clock = new ManualClock();
      const before = settle();
      let fired = 0;
      let early = 0;
      const idle = new IdleTracker<number>({
        clock,
        readerIdleMs: 30_000,
        initialCapacity: 1 << 20,
        onIdle: (item, _state, _periods, handle) => {
          fired++;
          // Odd items idle from when they were tracked, even ones from their read at 11 000.
          const due = item % 2 === 1 ? Math.floor(item / 1000) + 1 + 30_000 : 41_000;
          if (clock.now() < due) early++;
          idle.untrack(handle);
        },
      });
      const n = 1_000_000;
      const handles = new Float64Array(n);
      for (let i = 0; i < n; i++) {
        if (i % 1000 === 0) clock.advance(1);
        handles[i] = idle.track(i);
      }
      const perItem = (settle() - before) / n;
      expect(idle.size).toBe(n);
      expect(perItem).toBeLessThan(128);
      // Every other item stays busy: it reads once, 10 s in.
      clock.advance(10_000);
      for (let i = 0; i < n; i += 2) idle.read(handles[i]);
      clock.advance(20_000);
      expect(fired).toBe(n / 2);
      clock.advance(10_000);
      expect(fired).toBe(n);
      expect(early).toBe(0);
      expect(idle.size).toBe(0);
      idle.close();
    },
  );
});

describe('IdleTracker on real sockets', () => {
  it('reports the silent connection reader-idle, and not the one that keeps talking', async () => {
    const clock = new SystemClock();
    const idleAt = new Map<string, number>();
    const connectedAt = new Map<string, number>();
    let talkerHeardAt = 0;
    const server = createServer();
    const idle = new IdleTracker<Socket & { name?: string }>({
      clock,
      readerIdleMs: 150,
      onIdle: (socket, state, _periods, handle) => {
        if (state !== 'reader-idle') return;
        idleAt.set(socket.name!, clock.now());
        idle.untrack(handle);
        socket.destroy();
      },
    });
    server.on('connection', (socket: Socket & { name?: string }) => {
      const handle = idle.track(socket);
      socket.once('data', (first) => {
        socket.name = first.toString().split('\n')[0];
        connectedAt.set(socket.name, clock.now());
      });
      socket.on('data', () => {
        idle.read(handle);
        if (socket.name === 'talker') talkerHeardAt = clock.now();
      });
      socket.on('close', () => idle.untrack(handle));
      socket.on('error', () => {});
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as { port: number };

    const talker = createConnection(port, '127.0.0.1');
    const silent = createConnection(port, '127.0.0.1');
    talker.on('error', () => {});
    silent.on('error', () => {});
    talker.write('talker\n');
    silent.write('silent\n');
    silent.resume();
    const chatter = setInterval(() => talker.write('.'), 20);
    await once(silent, 'close');
    const silentFor = idleAt.get('silent')! - connectedAt.get('silent')!;
    // Generous bounds: never early, and not wildly late on a loaded machine.
    expect(silentFor).toBeGreaterThanOrEqual(150 - 1);
    expect(silentFor).toBeLessThan(1500);
    // The talker is still heard from twice the idle time after the silent one was reported.
    const reported = idleAt.get('silent')!;
    await waitFor(() => talkerHeardAt >= reported + 300);
    expect(idleAt.has('talker')).toBe(false);
    clearInterval(chatter);
    talker.destroy();
    idle.close();
    server.close();
  });
});

describe('IdleTracker.track that throws', () => {
  it('leaves no item tracked', () => {
    const clock = new ManualClock(0);
    const idle = new IdleTracker({
      clock,
      readerIdleMs: Number.MAX_SAFE_INTEGER,
      onIdle: () => {},
    });
    clock.advance(10);
    expect(() => idle.track('a')).toThrow(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_DELAY' }),
    );
    expect(idle.size).toBe(0);
    idle.close();
  });
});
