import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  LeaseKeeper,
  LeaseLostError,
  ManualClock,
  TimeoutError,
  type Lease,
  type LeaseOptions,
} from '../../src/index.js';

/** Lets promise reactions run between steps of virtual time. */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

interface Renewal {
  at: number;
  resolve: (value: boolean) => void;
  reject: (err: unknown) => void;
}

/** A keeper on a ManualClock with a renew() whose calls the test answers by hand. */
function setup(options: Partial<LeaseOptions<string>> = {}, keeperErrors?: unknown[]) {
  const clock = new ManualClock();
  const keeper = new LeaseKeeper({
    clock,
    onError: keeperErrors && ((err) => keeperErrors.push(err)),
  });
  const renewals: Renewal[] = [];
  const lost: Array<{ at: number; error: LeaseLostError }> = [];
  const lease = keeper.hold<string>({
    leaseMs: 300,
    data: 'lock:a',
    renew: () =>
      new Promise((resolve, reject) => renewals.push({ at: clock.now(), resolve, reject })),
    onLost: (error) => lost.push({ at: clock.now(), error }),
    ...options,
  });
  /** Advances `ms`, one millisecond at a time, running `each` after every step. */
  const run = async (ms: number, each: () => void = () => {}) => {
    for (let i = 0; i < ms; i++) {
      clock.advance(1);
      await settle();
      each();
      await settle();
    }
  };
  /** Answers every renewal as soon as it starts. */
  const answer = (value = true) => {
    for (const renewal of renewals.splice(0)) renewal.resolve(value);
  };
  return { clock, keeper, lease, renewals, lost, run, answer };
}

describe('LeaseKeeper renewals', () => {
  it('renews every leaseMs / 3 while held, each success extending validUntil', async () => {
    const starts: number[] = [];
    const { lease, run } = setup({
      renew: async (held) => {
        starts.push(held.validUntil);
        return true;
      },
    });
    expect(lease.state).toBe('held');
    expect(lease.data).toBe('lock:a');
    expect(lease.validUntil).toBe(300);
    await run(1000);
    // Each renewal starts a third of a lease after the previous one began: 100, 200, ... 1000.
    expect(lease.renewals).toBe(10);
    expect(starts).toEqual([300, 400, 500, 600, 700, 800, 900, 1000, 1100, 1200]);
    expect(lease.validUntil).toBe(1300);
  });

  it('times each renewal from when the previous one started, not from when it finished', async () => {
    const { clock, lease, renewals, run } = setup();
    const starts: number[] = [];
    await run(1000, () => {
      for (const renewal of [...renewals]) {
        if (!starts.includes(renewal.at)) starts.push(renewal.at);
        if (clock.now() - renewal.at >= 30) {
          renewals.splice(renewals.indexOf(renewal), 1);
          renewal.resolve(true); // every renewal takes 30 ms
        }
      }
    });
    expect(starts).toEqual([100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]);
    expect(lease.renewals).toBe(9);
  });

  it('starts the next renewal at once when one took longer than renewEveryMs', async () => {
    const { clock, renewals, run } = setup({ renewTimeoutMs: 150 });
    await run(220, () => {
      if (clock.now() === 220) renewals.shift()!.resolve(true); // started at 100
    });
    await run(1);
    expect(renewals.map((renewal) => renewal.at)).toEqual([221]);
  });

  it('honours renewEveryMs and renewTimeoutMs', async () => {
    const { renewals, lease, lost, run, answer } = setup({
      leaseMs: 1000,
      renewEveryMs: 250,
      renewTimeoutMs: 40,
    });
    await run(500, answer);
    expect(lease.renewals).toBe(2);
    await run(250); // the renewal at 750 is not answered
    expect(renewals.map((renewal) => renewal.at)).toEqual([750]);
    expect(lost).toEqual([]);
    await run(40);
    expect(lost.map(({ at }) => at)).toEqual([790]);
  });
});

describe('LeaseKeeper losing a lease', () => {
  it('loses the lease when renew() does not settle within renewTimeoutMs', async () => {
    const { lease, renewals, lost, run } = setup();
    const signal = lease.signal;
    await run(199);
    expect(lease.state).toBe('held');
    expect(signal.aborted).toBe(false);
    await run(1);
    expect(lease.state).toBe('lost');
    expect(lost).toHaveLength(1);
    const { at, error } = lost[0];
    expect(at).toBe(200);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(error).toMatchObject({
      name: 'LeaseLostError',
      code: 'ERR_TICKWHEEL_LEASE_LOST',
      message: expect.stringContaining('renewTimeoutMs (100 ms)'),
    });
    expect(error.cause).toBeInstanceOf(TimeoutError);
    expect(error.cause).toMatchObject({ code: 'ERR_TICKWHEEL_TIMEOUT', timeoutMs: 100 });
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe(error);
    expect(lease.endReason).toBe(error);

    renewals[0].resolve(true); // the hung renewal finally answers: too late, ignored
    await run(500);
    expect(lease.state).toBe('lost');
    expect(lease.renewals).toBe(0);
    expect(renewals).toHaveLength(1);
    expect(lost).toHaveLength(1);
  });

  it('never waits for a renewal beyond the end of the lease, whatever renewTimeoutMs says', async () => {
    const { lost, run } = setup({ renewTimeoutMs: 10_000 });
    await run(300);
    expect(lost.map(({ at, error }) => [at, error.message])).toEqual([
      [300, 'lease lost: renew() did not settle before the lease ran out'],
    ]);
  });

  it('loses the lease at once when renew() throws, rejects or answers false', async () => {
    const failure = new Error('connection reset');
    const cases: Array<[LeaseOptions<string>['renew'], unknown, string]> = [
      [
        () => {
          throw failure;
        },
        failure,
        'renew() threw',
      ],
      [() => Promise.reject(failure), failure, 'renew() rejected'],
      [async () => false, undefined, 'renew() answered false'],
    ];
    for (const [renew, cause, message] of cases) {
      const { lease, lost, run } = setup({ renew });
      await run(100);
      expect(lease.state).toBe('lost');
      expect(lost.map(({ at }) => at)).toEqual([100]);
      expect(lost[0].error.message).toContain(message);
      expect(lost[0].error.cause).toBe(cause);
      expect(lease.signal.aborted).toBe(true);
      expect(lease.signal.reason).toBe(lost[0].error);
    }
  });

  it('treats an answer that is not a boolean as a failure, so 0 from a Lua script is not "renewed"', async () => {
    for (const answer of [0, 1, 'OK', null]) {
      const { lease, lost, run } = setup({ renew: async () => answer as never });
      await run(100);
      expect(lease.state).toBe('lost');
      expect(lost[0].error.cause).toMatchObject({
        name: 'TickwheelTypeError',
        code: 'ERR_TICKWHEEL_INVALID_CALLBACK',
      });
    }
  });

  it('reports an onLost that throws to onError', async () => {
    const errors: unknown[] = [];
    const { lease, run } = setup(
      {
        renew: async () => false,
        onLost: () => {
          throw new Error('handler failed');
        },
      },
      errors,
    );
    await run(100);
    expect(lease.state).toBe('lost');
    expect(errors.map((err) => (err as Error).message)).toEqual(['handler failed']);
  });

  it('loses every held lease when the keeper closes, and refuses new ones', async () => {
    const { keeper, lease, lost, clock } = setup();
    const other = keeper.hold({ leaseMs: 100, renew: () => true });
    expect(keeper.size).toBe(2);
    keeper.close();
    expect(lease.state).toBe('lost');
    expect(other.state).toBe('lost');
    expect(lost[0].error.cause).toMatchObject({ code: 'ERR_TICKWHEEL_CLOSED' });
    expect(keeper.size).toBe(0);
    expect(clock.nextDeadline()).toBe(Infinity);
    expect(() => keeper.hold({ leaseMs: 100, renew: () => true })).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_CLOSED' }),
    );
  });
});

describe('LeaseKeeper release and abort', () => {
  it('release() stops renewing, runs options.release once, and aborts the signal', async () => {
    let released = 0;
    const { lease, keeper, renewals, lost, run, answer } = setup({
      release: async () => {
        released++;
      },
    });
    const signal = lease.signal;
    await run(250, answer);
    expect(lease.renewals).toBe(2);
    const first = lease.release();
    expect(lease.release()).toBe(first);
    await first;
    expect(released).toBe(1);
    expect(lease.state).toBe('released');
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toMatchObject({ name: 'AbortError' });
    expect(keeper.size).toBe(0);
    await run(1000);
    expect(renewals).toHaveLength(0);
    expect(lost).toHaveLength(0);
  });

  it('ignores a renewal that was in flight when the lease was released', async () => {
    const { lease, renewals, lost, run } = setup();
    await run(100);
    expect(renewals).toHaveLength(1);
    await lease.release();
    renewals[0].resolve(false);
    await run(500);
    expect(lease.state).toBe('released');
    expect(lost).toHaveLength(0);
  });

  it('rejects release() when options.release fails', async () => {
    const failure = new Error('DEL failed');
    const { lease } = setup({
      release: () => {
        throw failure;
      },
    });
    await expect(lease.release()).rejects.toBe(failure);
    expect(lease.state).toBe('released');
  });

  it('runs options.release once after a loss too, if asked', async () => {
    let released = 0;
    const { lease, run } = setup({ renew: async () => false, release: () => released++ });
    await run(100);
    expect(lease.state).toBe('lost');
    await lease.release();
    await lease.release();
    expect(lease.state).toBe('lost');
    expect(released).toBe(1);
  });

  it('ends the lease as released when options.signal aborts, and releases it in the store', async () => {
    const controller = new AbortController();
    let released = 0;
    const { lease, renewals, run, answer } = setup({
      signal: controller.signal,
      release: () => released++,
    });
    await run(150, answer);
    controller.abort('shutting down');
    await settle();
    expect(lease.state).toBe('released');
    expect(lease.signal.reason).toBe('shutting down');
    expect(released).toBe(1);
    await run(500);
    expect(renewals).toHaveLength(0);
  });

  it('gives a lease that is released at once for a signal that has already aborted', async () => {
    let released = 0;
    const { lease, keeper } = setup({
      signal: AbortSignal.abort('too late'),
      release: () => released++,
    });
    await settle();
    expect(lease.state).toBe('released');
    expect(lease.signal.aborted).toBe(true);
    expect(released).toBe(1);
    expect(keeper.size).toBe(0);
  });
});

describe('LeaseKeeper options', () => {
  const renew = () => true;
  const keeper = new LeaseKeeper({ clock: new ManualClock() });

  it('refuses lease and renewal periods that are not above 0', () => {
    for (const leaseMs of [0, -1, NaN, Infinity, '300']) {
      expect(() => keeper.hold({ leaseMs: leaseMs as number, renew })).toThrowError(
        expect.objectContaining({
          code: 'ERR_TICKWHEEL_INVALID_OPTION',
          message: expect.stringContaining('leaseMs'),
        }),
      );
    }
    for (const bad of [0, -5, NaN]) {
      expect(() => keeper.hold({ leaseMs: 300, renewEveryMs: bad, renew })).toThrowError(
        expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
      );
      expect(() => keeper.hold({ leaseMs: 300, renewTimeoutMs: bad, renew })).toThrowError(
        expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
      );
    }
    expect(keeper.size).toBe(0);
  });

  it('refuses renewEveryMs at or above leaseMs: the lease would lapse before it is renewed', () => {
    expect(() => keeper.hold({ leaseMs: 300, renewEveryMs: 300, renew })).toThrowError(
      expect.objectContaining({
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
        message: expect.stringContaining('renewEveryMs (300) must be below leaseMs (300)'),
      }),
    );
  });

  it('refuses a missing renew, non-function hooks and a signal that is not an AbortSignal', () => {
    expect(() => keeper.hold({ leaseMs: 300 } as LeaseOptions)).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_CALLBACK' }),
    );
    expect(() => keeper.hold({ leaseMs: 300, renew, onLost: 5 as never })).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_CALLBACK' }),
    );
    expect(() => keeper.hold({ leaseMs: 300, renew, signal: {} as never })).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
    );
  });

  it('refuses hold() without options, and keeper options that are not an object', () => {
    for (const options of [undefined, null, 300]) {
      expect(() => keeper.hold(options as never)).toThrowError(
        expect.objectContaining({
          name: 'TickwheelTypeError',
          code: 'ERR_TICKWHEEL_INVALID_OPTION',
          message: expect.stringMatching(/^hold\(\) options must be an object/),
        }),
      );
    }
    expect(keeper.size).toBe(0);
    for (const options of [null, 5, 'clock']) {
      expect(() => new LeaseKeeper(options as never)).toThrowError(
        expect.objectContaining({
          name: 'TickwheelTypeError',
          code: 'ERR_TICKWHEEL_INVALID_OPTION',
          message: expect.stringMatching(/^LeaseKeeper options must be an object/),
        }),
      );
    }
    new LeaseKeeper().close();
  });
});

describe('LeaseKeeper against a model', () => {
  it('renews on schedule, and is lost exactly when a renewal misses its deadline', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 3, max: 120 }).chain((leaseMs) =>
          fc.record({
            leaseMs: fc.constant(leaseMs),
            renewEveryMs: fc.integer({ min: 1, max: leaseMs - 1 }),
            renewTimeoutMs: fc.integer({ min: 1, max: 150 }),
            // How long each renewal takes, or that it answers false.
            answers: fc.array(
              fc.oneof(
                { weight: 6, arbitrary: fc.integer({ min: 0, max: 80 }) },
                { weight: 1, arbitrary: fc.constant('false' as const) },
              ),
              { minLength: 1, maxLength: 8 },
            ),
          }),
        ),
        async ({ leaseMs, renewEveryMs, renewTimeoutMs, answers }) => {
          const { clock, lease, renewals, lost, run } = setup({
            leaseMs,
            renewEveryMs,
            renewTimeoutMs,
          });
          const starts: number[] = [];
          let index = 0;
          const durations = new Map<Renewal, number | 'false'>();
          // The model: when renewals start, and when (if ever) the lease is lost.
          const expectedStarts: number[] = [];
          let expectedLost: number | undefined;
          let lastStart = 0;
          let next = renewEveryMs;
          for (const answer of answers) {
            const start = next;
            expectedStarts.push(start);
            const deadline = Math.min(start + renewTimeoutMs, lastStart + leaseMs);
            if (answer === 'false') {
              expectedLost = start;
              break;
            }
            if (start + answer >= deadline) {
              expectedLost = deadline;
              break;
            }
            lastStart = start;
            next = Math.max(start + renewEveryMs, start + answer + 1);
          }
          // With no loss expected, stop where the model stops: the renewal that starts at
          // `next` has no scripted answer, and with a 1 ms timeout it would be lost at next + 1.
          const horizon = expectedLost === undefined ? next : expectedLost + 1;
          await run(horizon, () => {
            for (const renewal of renewals) {
              if (!durations.has(renewal)) {
                starts.push(renewal.at);
                durations.set(renewal, answers[index++] ?? 10_000);
              }
              const answer = durations.get(renewal)!;
              if (answer === 'false') renewal.resolve(false);
              else if (clock.now() - renewal.at >= answer) renewal.resolve(true);
            }
            if (lease.state === 'held') expect(clock.now()).toBeLessThan(lease.validUntil);
          });
          expect(starts.slice(0, expectedStarts.length)).toEqual(expectedStarts);
          expect(lost.map(({ at }) => at)).toEqual(
            expectedLost === undefined ? [] : [expectedLost],
          );
          lease.release().catch(() => {});
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe('LeaseKeeper at a million leases', () => {
  it('keeps 1M leases alive on one wheel, renewing each on time', () => {
    const clock = new ManualClock();
    const keeper = new LeaseKeeper({ clock, initialCapacity: 1 << 20 });
    const n = 1_000_000;
    const renewedAt = new Float64Array(n);
    let early = 0;
    // One options object for all: synchronous answers keep the test fast (promises work alike).
    const options: LeaseOptions<number> = {
      leaseMs: 30_000,
      renew: (lease: Lease<number>) => {
        // Due 10 s after hold(), while the lease is valid until 30 s after it.
        if (clock.now() < lease.validUntil - 20_000) early++;
        renewedAt[lease.data]++;
        return true;
      },
    };
    const first = keeper.hold({ ...options, data: 0 });
    for (let i = 1; i < n; i++) {
      if (i % 100_000 === 0) clock.advance(1_000);
      keeper.hold({ ...options, data: i });
    }
    expect(keeper.size).toBe(n);
    clock.advance(10_000); // the first renewal of every lease is due by now
    expect(early).toBe(0);
    expect(renewedAt.every((count) => count === 1)).toBe(true);
    expect(first.validUntil).toBe(40_000);
    expect(keeper.size).toBe(n);
    keeper.close();
    expect(first.state).toBe('lost');
  });
});
