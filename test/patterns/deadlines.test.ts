import { once } from 'node:events';
import { getEventListeners } from 'node:events';
import { createConnection, createServer } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  AbortError,
  DeadlineRegistry,
  ManualClock,
  SystemClock,
  TimeoutError,
  TimerWheel,
  withDeadline,
} from '../../src/index.js';
import { waitFor } from '../support/wait-for.js';

/** Lets promise reactions run; the registry itself settles synchronously. */
const flush = () => new Promise((resolve) => setImmediate(resolve));

function outcome<V>(promise: Promise<V>) {
  const seen: { value?: V; error?: unknown; settled: boolean } = { settled: false };
  promise.then(
    (value) => Object.assign(seen, { value, settled: true }),
    (error: unknown) => Object.assign(seen, { error, settled: true }),
  );
  return seen;
}

function registry() {
  const clock = new ManualClock();
  return { clock, requests: new DeadlineRegistry<number | string, string>({ clock }) };
}

describe('DeadlineRegistry', () => {
  it('fulfils a request answered before its deadline', async () => {
    const { clock, requests } = registry();
    const reply = requests.register(1, 500);
    clock.advance(499);
    expect(requests.resolve(1, 'pong')).toBe(true);
    await expect(reply).resolves.toBe('pong');
    expect(requests.has(1)).toBe(false);
    clock.advance(1000); // its timer is gone: nothing else happens
    expect(requests.size).toBe(0);
  });

  it('rejects with the given reason on reject(id, err)', async () => {
    const { requests } = registry();
    const reply = requests.register('a', 500);
    const failure = new Error('server said no');
    expect(requests.reject('a', failure)).toBe(true);
    await expect(reply).rejects.toBe(failure);
  });

  it('rejects with a coded TimeoutError exactly when the deadline passes, never before', async () => {
    const { clock, requests } = registry();
    const seen = outcome(requests.register(7, 250));
    clock.advance(249);
    expect(requests.has(7)).toBe(true);
    clock.advance(1);
    expect(requests.has(7)).toBe(false);
    await flush();
    expect(seen.error).toBeInstanceOf(TimeoutError);
    expect(seen.error).toMatchObject({
      name: 'TimeoutError',
      code: 'ERR_TICKWHEEL_TIMEOUT',
      timeoutMs: 250,
      message: 'request 7 timed out after 250 ms',
    });
  });

  it('ignores an answer that comes after the deadline', async () => {
    const { clock, requests } = registry();
    const seen = outcome(requests.register('slow', 100));
    clock.advance(100);
    expect(requests.resolve('slow', 'too late')).toBe(false);
    expect(requests.reject('slow', new Error('too late'))).toBe(false);
    await flush();
    expect((seen.error as Error).message).toBe('request "slow" timed out after 100 ms');
  });

  it('refuses an id that is still in flight, synchronously, and accepts it again once settled', async () => {
    const { requests } = registry();
    const first = requests.register(1, 100);
    expect(() => requests.register(1, 100)).toThrowError(
      expect.objectContaining({
        name: 'TickwheelStateError',
        code: 'ERR_TICKWHEEL_DUPLICATE_ID',
        message: expect.stringContaining('request 1 is already in flight'),
      }),
    );
    requests.resolve(1, 'one');
    await expect(first).resolves.toBe('one');
    const second = requests.register(1, 100);
    requests.resolve(1, 'two');
    await expect(second).resolves.toBe('two');
  });

  it('times out a request of 0 ms or less on the next tick', async () => {
    const { clock, requests } = registry();
    const zero = outcome(requests.register(1, 0));
    const negative = outcome(requests.register(2, -30));
    expect(requests.deadline(1)).toBe(1);
    expect(requests.deadline(2)).toBe(1);
    clock.advance(1);
    await flush();
    expect(zero.error).toMatchObject({ code: 'ERR_TICKWHEEL_TIMEOUT', timeoutMs: 0 });
    expect(negative.error).toMatchObject({ code: 'ERR_TICKWHEEL_TIMEOUT', timeoutMs: 0 });
  });

  it('refuses NaN, infinite and non-number timeouts without registering', () => {
    const { requests } = registry();
    for (const bad of [NaN, Infinity, '100', undefined]) {
      expect(() => requests.register(1, bad as number)).toThrowError(
        expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_DELAY' }),
      );
    }
    expect(() => requests.register(1, 5, { signal: {} as AbortSignal })).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
    );
    expect(requests.size).toBe(0);
  });

  it('refuses options that are not an object, to the constructor and to register()', () => {
    const { requests } = registry();
    for (const options of [null, 5, 'signal']) {
      expect(() => new DeadlineRegistry(options as never)).toThrowError(
        expect.objectContaining({
          name: 'TickwheelTypeError',
          code: 'ERR_TICKWHEEL_INVALID_OPTION',
          message: expect.stringMatching(/^DeadlineRegistry options must be an object/),
        }),
      );
      expect(() => requests.register(1, 5, options as never)).toThrowError(
        expect.objectContaining({
          name: 'TickwheelTypeError',
          code: 'ERR_TICKWHEEL_INVALID_OPTION',
          message: expect.stringMatching(/^register\(\) options must be an object/),
        }),
      );
    }
    expect(requests.size).toBe(0);
    new DeadlineRegistry().close();
  });

  it('rejects with an AbortError when the signal aborts, and forgets its listener once settled', async () => {
    const { requests } = registry();
    const controller = new AbortController();
    const seen = outcome(requests.register(1, 500, { signal: controller.signal }));
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    controller.abort('user cancelled');
    await flush();
    expect(seen.error).toBeInstanceOf(AbortError);
    expect(seen.error).toMatchObject({ name: 'AbortError', cause: 'user cancelled' });
    expect(requests.has(1)).toBe(false);

    const kept = new AbortController();
    const answered = requests.register(2, 500, { signal: kept.signal });
    requests.resolve(2, 'ok');
    await answered;
    expect(getEventListeners(kept.signal, 'abort')).toHaveLength(0);
  });

  it('returns a rejected promise and registers nothing for a signal that has already aborted', async () => {
    const { requests } = registry();
    const reply = requests.register(1, 500, { signal: AbortSignal.abort('gone') });
    await expect(reply).rejects.toMatchObject({ name: 'AbortError', cause: 'gone' });
    expect(requests.has(1)).toBe(false);
  });

  it('tells the deadline of a request in flight', () => {
    const { clock, requests } = registry();
    clock.advance(40);
    void requests.register(1, 100).catch(() => {});
    expect(requests.deadline(1)).toBe(140);
    expect(requests.deadline(2)).toBeUndefined();
  });

  it('close() rejects everything in flight and refuses new requests', async () => {
    const { clock, requests } = registry();
    const a = outcome(requests.register(1, 100));
    const b = outcome(requests.register(2, 200));
    requests.close();
    await flush();
    for (const seen of [a, b]) {
      expect(seen.error).toMatchObject({ code: 'ERR_TICKWHEEL_CLOSED' });
    }
    expect(() => requests.register(3, 100)).toThrowError(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_CLOSED' }),
    );
    expect(clock.nextDeadline()).toBe(Infinity);
    requests.close();
  });

  it('agrees with a model on random registers, answers, aborts and time', async () => {
    type Op =
      | { kind: 'register'; timeout: number; signal: boolean }
      | { kind: 'resolve' | 'reject' | 'abort'; pick: number }
      | { kind: 'advance'; ms: number };
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      {
        weight: 4,
        arbitrary: fc.record({
          kind: fc.constant('register' as const),
          timeout: fc.integer({ min: -5, max: 300 }),
          signal: fc.boolean(),
        }),
      },
      {
        weight: 4,
        arbitrary: fc.record({
          kind: fc.constantFrom('resolve' as const, 'reject' as const, 'abort' as const),
          pick: fc.nat(),
        }),
      },
      {
        weight: 3,
        arbitrary: fc.integer({ min: 0, max: 150 }).map((ms) => ({ kind: 'advance' as const, ms })),
      },
    );
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 60 }), async (ops) => {
        const { clock, requests } = registry();
        type Entry = {
          id: number;
          due: number;
          controller?: AbortController;
          expect: string;
          seen: ReturnType<typeof outcome<string>>;
        };
        const live: Entry[] = [];
        const done: Entry[] = [];
        let nextId = 0;
        for (const op of ops) {
          const now = clock.now();
          if (op.kind === 'register') {
            const controller = op.signal ? new AbortController() : undefined;
            const id = nextId++;
            const seen = outcome(requests.register(id, op.timeout, { signal: controller?.signal }));
            // Due at the first whole ms at or after now + timeout, and after the current tick.
            live.push({
              id,
              due: Math.max(now + op.timeout, now + 1),
              controller,
              expect: '',
              seen,
            });
          } else if (op.kind === 'advance') {
            const target = now + op.ms;
            clock.advance(op.ms);
            for (const entry of [...live]) {
              if (entry.due <= target) {
                entry.expect = `timeout at ${entry.due}`;
                live.splice(live.indexOf(entry), 1);
                done.push(entry);
              }
            }
          } else if (live.length > 0) {
            const entry = live[op.pick % live.length];
            if (op.kind === 'abort' && entry.controller === undefined) continue;
            if (op.kind === 'resolve')
              expect(requests.resolve(entry.id, `v${entry.id}`)).toBe(true);
            if (op.kind === 'reject') expect(requests.reject(entry.id, `e${entry.id}`)).toBe(true);
            if (op.kind === 'abort') entry.controller!.abort('x');
            entry.expect = op.kind;
            live.splice(live.indexOf(entry), 1);
            done.push(entry);
          }
          expect(requests.size).toBe(live.length);
          for (const entry of live) expect(requests.deadline(entry.id)).toBe(entry.due);
        }
        await flush();
        for (const entry of done) {
          const { seen } = entry;
          expect(seen.settled).toBe(true);
          if (entry.expect === 'resolve') expect(seen.value).toBe(`v${entry.id}`);
          else if (entry.expect === 'reject') expect(seen.error).toBe(`e${entry.id}`);
          else if (entry.expect === 'abort') expect(seen.error).toBeInstanceOf(AbortError);
          else expect(seen.error).toBeInstanceOf(TimeoutError);
        }
        for (const entry of live) expect(entry.seen.settled).toBe(false);
        requests.close();
      }),
      { numRuns: 200 },
    );
  });
});

describe('withDeadline', () => {
  function timers() {
    const clock = new ManualClock();
    return { clock, timers: new TimerWheel({ clock }) };
  }

  it('settles like the promise when it settles first, and clears its timer', async () => {
    const { timers: wheel } = timers();
    await expect(withDeadline(Promise.resolve(42), 100, { timers: wheel })).resolves.toBe(42);
    const failure = new Error('nope');
    await expect(withDeadline(Promise.reject(failure), 100, { timers: wheel })).rejects.toBe(
      failure,
    );
    expect(wheel.size).toBe(0);
  });

  it('rejects with a TimeoutError when the time is up, and aborts the work with it', async () => {
    const { clock, timers: wheel } = timers();
    let workSignal: AbortSignal | undefined;
    const seen = outcome(
      withDeadline(
        (signal) => {
          workSignal = signal;
          return new Promise<string>(() => {});
        },
        300,
        { timers: wheel },
      ),
    );
    clock.advance(299);
    await flush();
    expect(seen.settled).toBe(false);
    expect(workSignal!.aborted).toBe(false);
    clock.advance(1);
    await flush();
    expect(seen.error).toMatchObject({ name: 'TimeoutError', code: 'ERR_TICKWHEEL_TIMEOUT' });
    expect(workSignal!.aborted).toBe(true);
    expect(workSignal!.reason).toBe(seen.error);
  });

  it('rejects with an AbortError when the caller’s signal aborts first', async () => {
    const { timers: wheel } = timers();
    const controller = new AbortController();
    let workSignal: AbortSignal | undefined;
    const seen = outcome(
      withDeadline(
        (signal) => {
          workSignal = signal;
          return new Promise<void>(() => {});
        },
        300,
        { timers: wheel, signal: controller.signal },
      ),
    );
    controller.abort('stop');
    await flush();
    expect(seen.error).toMatchObject({ name: 'AbortError', cause: 'stop' });
    expect(workSignal!.reason).toBe('stop');
    expect(wheel.size).toBe(0);
    await expect(
      withDeadline(Promise.resolve(1), 10, { signal: controller.signal }),
    ).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('turns a work function that throws into a rejection', async () => {
    const { timers: wheel } = timers();
    const failure = new Error('sync');
    await expect(
      withDeadline(
        () => {
          throw failure;
        },
        100,
        { timers: wheel },
      ),
    ).rejects.toBe(failure);
    expect(wheel.size).toBe(0);
  });

  it('refuses a bad time synchronously', () => {
    for (const bad of [NaN, Infinity, 'soon', 1e300]) {
      expect(() => withDeadline(Promise.resolve(), bad as number)).toThrowError(
        expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_DELAY' }),
      );
    }
  });

  it('refuses a closed wheel synchronously, and calls no work', () => {
    const wheel = new TimerWheel({ clock: new ManualClock() });
    wheel.close();
    let called = false;
    expect(() =>
      withDeadline(
        () => {
          called = true;
          return 1;
        },
        100,
        { timers: wheel },
      ),
    ).toThrowError(expect.objectContaining({ code: 'ERR_TICKWHEEL_CLOSED' }));
    expect(called).toBe(false);
  });

  it('refuses work that is neither a promise nor a function, and bad options, synchronously', () => {
    for (const work of [undefined, null, 5, { then: 1 }]) {
      expect(() => withDeadline(work as never, 100)).toThrowError(
        expect.objectContaining({
          name: 'TickwheelTypeError',
          code: 'ERR_TICKWHEEL_INVALID_CALLBACK',
          message: expect.stringMatching(/^work must be a promise, or a function/),
        }),
      );
    }
    for (const options of [null, 5]) {
      expect(() => withDeadline(Promise.resolve(1), 100, options as never)).toThrowError(
        expect.objectContaining({
          name: 'TickwheelTypeError',
          code: 'ERR_TICKWHEEL_INVALID_OPTION',
          message: expect.stringMatching(/^withDeadline options must be an object/),
        }),
      );
    }
    for (const timers of [{}, null, 5, { setTimeout: () => 1 }]) {
      expect(() => withDeadline(Promise.resolve(1), 100, { timers: timers as never })).toThrowError(
        expect.objectContaining({
          name: 'TickwheelTypeError',
          code: 'ERR_TICKWHEEL_INVALID_OPTION',
          message: expect.stringMatching(/^timers must be a TimerWheel/),
        }),
      );
    }
  });

  it('times out on the real clock with the shared wheel', async () => {
    const started = performance.now();
    await expect(withDeadline(new Promise(() => {}), 50)).rejects.toBeInstanceOf(TimeoutError);
    const took = performance.now() - started;
    expect(took).toBeGreaterThanOrEqual(49);
    expect(took).toBeLessThan(2000);
  });
});

const gc = (globalThis as { gc?: () => void }).gc;

describe('DeadlineRegistry at a million requests', () => {
  it.runIf(gc !== undefined)(
    'holds 1M requests in flight, answers half and times out the other half on time',
    async () => {
      const clock = new ManualClock();
      const requests = new DeadlineRegistry<number, number>({ clock, initialCapacity: 1 << 20 });
      const n = 1_000_000;
      let answered = 0;
      let timedOut = 0;
      const onValue = () => answered++;
      const onError = (err: unknown) => {
        if (err instanceof TimeoutError) timedOut++;
      };
      for (let i = 0; i < n; i++) requests.register(i, 5_000).then(onValue, onError);
      expect(requests.size).toBe(n);
      clock.advance(4_999);
      for (let i = 0; i < n; i += 2) requests.resolve(i, i);
      expect(requests.size).toBe(n / 2);
      clock.advance(1);
      expect(requests.size).toBe(0);
      await flush();
      expect(answered).toBe(n / 2);
      expect(timedOut).toBe(n / 2);
      requests.close();
    },
  );
});

describe('DeadlineRegistry over real loopback RPC', () => {
  it('answers the fast call and times out the slow one within generous bounds', async () => {
    // The server answers "fast" at once and "slow" after 3 s, one JSON line per reply.
    const server = createServer((socket) => {
      let buffered = '';
      socket.on('data', (chunk) => {
        buffered += chunk;
        let newline: number;
        while ((newline = buffered.indexOf('\n')) >= 0) {
          const call = JSON.parse(buffered.slice(0, newline)) as { id: number; method: string };
          buffered = buffered.slice(newline + 1);
          const reply = () =>
            socket.writable &&
            socket.write(`${JSON.stringify({ id: call.id, result: call.method })}\n`);
          if (call.method === 'slow') setTimeout(reply, 3_000);
          else reply();
        }
      });
      socket.on('error', () => {});
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as { port: number };

    const clock = new SystemClock();
    const calls = new DeadlineRegistry<number, string>({ clock });
    const socket = createConnection(port, '127.0.0.1');
    let buffered = '';
    let late = 0;
    socket.on('data', (chunk) => {
      buffered += chunk;
      let newline: number;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const reply = JSON.parse(buffered.slice(0, newline)) as { id: number; result: string };
        buffered = buffered.slice(newline + 1);
        if (!calls.resolve(reply.id, reply.result)) late++;
      }
    });
    await once(socket, 'connect');
    let nextId = 0;
    const call = (method: string, timeoutMs: number) => {
      const id = nextId++;
      socket.write(`${JSON.stringify({ id, method })}\n`);
      return calls.register(id, timeoutMs);
    };

    await expect(call('fast', 1_000)).resolves.toBe('fast');
    const started = clock.now();
    const slow = call('slow', 100);
    await expect(slow).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_TIMEOUT' });
    const took = clock.now() - started;
    expect(took).toBeGreaterThanOrEqual(100 - 1);
    // Before the slow answer: none had come when the call timed out.
    expect(late).toBe(0);
    expect(took).toBeLessThan(3_000);
    // The slow answer came, found nothing, and was dropped.
    await waitFor(() => late === 1);
    expect(calls.size).toBe(0);
    socket.destroy();
    calls.close();
    server.close();
  });
});

describe('DeadlineRegistry.register that throws', () => {
  it('registers nothing when the timeout is finite but past what the wheel can hold', async () => {
    const calls = new DeadlineRegistry<number>({ clock: new ManualClock(0) });
    expect(() => calls.register(7, 1e300)).toThrow(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_DELAY' }),
    );
    expect({ has: calls.has(7), size: calls.size }).toEqual({ has: false, size: 0 });
    const later = calls.register(7, 100); // the id is free
    calls.close();
    await expect(later).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_CLOSED' });
  });
});
