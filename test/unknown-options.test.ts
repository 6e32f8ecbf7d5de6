/**
 * Every options object of the public API refuses a name it does not know, with
 * ERR_TICKWHEEL_INVALID_OPTION and the closest known name: a misspelled option must never be a
 * default silently kept. And a deliverAt in seconds is refused, not delivered at once.
 */

import { describe, expect, it } from 'vitest';
import { TickwheelClient } from '../src/client/index.js';
import { pushListener } from '../src/client/push-receiver.js';
import { DelayQueue, MemoryStore } from '../src/delay-queue.js';
import { FileStore } from '../src/store/file/file-store.js';
import {
  HashedWheelTimer,
  ManualClock,
  SystemClock,
  SystemTimer,
  TimerWheel,
} from '../src/index.js';
import {
  DeadlineRegistry,
  Heartbeat,
  IdleTracker,
  LeaseKeeper,
  withDeadline,
} from '../src/patterns/index.js';
import { RedisIdempotencyStore } from '../src/idempotent/redis.js';

function refused(run: () => unknown, name: string, guess?: string): Promise<void> {
  const check = (err: unknown) => {
    expect(err).toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
    const message = (err as Error).message;
    expect(message).toContain(`no option "${name}"`);
    if (guess !== undefined) expect(message).toContain(`did you mean "${guess}"?`);
  };
  try {
    const result = run();
    if (result instanceof Promise) {
      return result.then(
        () => expect.fail(`${name} was accepted`),
        (err: unknown) => check(err),
      );
    }
  } catch (err) {
    check(err);
    return Promise.resolve();
  }
  return Promise.reject(new Error(`${name} was accepted`));
}

describe('unknown options', () => {
  it('are refused by the queue, its receive, consume and nack', async () => {
    await refused(
      () => DelayQueue.open({ store: new MemoryStore(), horizonMS: 5 } as never),
      'horizonMS',
      'horizonMs',
    );
    await refused(
      () => DelayQueue.open({ redis: 'redis://127.0.0.1:1', partitons: 4 } as never),
      'partitons',
      'partitions',
    );
    const queue = await DelayQueue.open({ store: new MemoryStore() });
    try {
      await refused(() => queue.receive('t', { wait: 10 } as never), 'wait', 'waitMs');
      await refused(
        () => queue.consume('t', () => {}, { concurency: 4 } as never),
        'concurency',
        'concurrency',
      );
      await queue.schedule({ topic: 't', payload: 1 });
      const [message] = await queue.receive('t', { waitMs: 5_000 });
      await refused(() => queue.nack(message.receipt, { delay: 5 } as never), 'delay', 'delayMs');
    } finally {
      await queue.close();
    }
  });

  it('of the embedded queue are refused by a queue on Valkey/Redis, each by name', async () => {
    const embeddedOnly = {
      dir: '/tmp/never-made',
      store: new MemoryStore(),
      fsync: 'always',
      rememberFinished: 10,
      clock: new ManualClock(0),
    };
    for (const [name, value] of Object.entries(embeddedOnly)) {
      await expect(
        DelayQueue.open({ redis: 'redis://127.0.0.1:1', queue: 'q', [name]: value } as never),
      ).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
        message: expect.stringContaining(`${name} is an option of the embedded queue`),
      });
    }
  });

  it('of the data directory are refused beside a store, and bad values before any connection', async () => {
    const directoryOnly = {
      fsync: 'bogus',
      segmentBytes: 1 << 20,
      windowMs: 1_000,
      checkpointIntervalMs: 100,
      snapshotBytes: 0,
      repair: true,
      listScanRecords: 10,
    };
    for (const [name, value] of Object.entries(directoryOnly)) {
      await expect(
        DelayQueue.open({ store: new MemoryStore(), [name]: value } as never),
      ).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_INVALID_OPTION',
        message: `${name} is an option of the data directory (dir); a queue on the store given does not take it`,
      });
    }
    await expect(
      DelayQueue.open({ store: new MemoryStore(), dir: '/tmp/never-made' }),
    ).rejects.toMatchObject({
      message: 'give dir or store, not both: the queue lives in one of them',
    });
    await expect(
      DelayQueue.open({ dir: '/tmp/never-made', repair: 'yes' } as never),
    ).rejects.toMatchObject({ message: 'repair must be true or false, got the string "yes"' });
    // Nothing listens on port 1: an error that is not the option's would come from connecting.
    const shared = [
      [{ windowMs: 1000.5 }, 'windowMs must be an integer'],
      [{ onError: 'log' }, 'onError must be a function'],
    ] as const;
    const postgresOnly = [
      [{ poolSize: 1001 }, 'poolSize must be an integer from 1 to 1000'],
      [{ statementTimeoutMs: 2 ** 31 }, 'statementTimeoutMs must be an integer from 1 to 86400000'],
    ] as const;
    for (const [options, message] of [...shared, ...postgresOnly]) {
      await expect(
        DelayQueue.open({ postgres: 'postgres://127.0.0.1:1/x', ...options } as never),
      ).rejects.toMatchObject({ message: expect.stringContaining(message) });
    }
    for (const [options, message] of shared) {
      await expect(
        DelayQueue.open({ redis: 'redis://127.0.0.1:1', ...options } as never),
      ).rejects.toMatchObject({ message: expect.stringContaining(message) });
    }
  });

  it('are refused by the timers and the patterns', async () => {
    await refused(() => new TimerWheel({ resoluton: 1 } as never), 'resoluton', 'resolution');
    await refused(
      () => new HashedWheelTimer({ tickDurration: 10 } as never),
      'tickDurration',
      'tickDuration',
    );
    await refused(() => new SystemTimer({ tickMS: 1 } as never), 'tickMS', 'tickMs');
    await refused(() => new DeadlineRegistry({ clok: undefined } as never), 'clok', 'clock');
    await refused(
      () => new Heartbeat({ intervalMs: 1000, send() {}, onDead() {}, maxMised: 2 } as never),
      'maxMised',
      'maxMissed',
    );
    await refused(
      () => new IdleTracker({ readerIdleMs: 5, onIdle() {}, unrf: true } as never),
      'unrf',
      'unref',
    );
    const keeper = new LeaseKeeper();
    try {
      await refused(
        () => keeper.hold({ leaseMs: 1000, renew: () => true, renewEvery: 5 } as never),
        'renewEvery',
        'renewEveryMs',
      );
    } finally {
      keeper.close();
    }
    await refused(
      () => withDeadline(Promise.resolve(1), 100, { signl: undefined } as never),
      'signl',
      'signal',
    );
    await refused(() => new SystemClock({ epoc: true } as never), 'epoc', 'epoch');
  });

  it('are refused by sleep() and register(), synchronously, as are bad values', () => {
    const clock = new ManualClock();
    const timers = new TimerWheel({ clock });
    const requests = new DeadlineRegistry({ clock });
    const option = (run: () => unknown, message: RegExp) =>
      expect(run).toThrowError(
        expect.objectContaining({
          code: 'ERR_TICKWHEEL_INVALID_OPTION',
          message: expect.stringMatching(message),
        }),
      );
    option(() => timers.sleep(5, { singal: undefined } as never), /no option "singal".*"signal"/);
    option(() => timers.sleep(5, { ref: 'no' } as never), /ref must be true or false/);
    option(() => timers.sleep(5, null as never), /sleep\(\) options must be an object/);
    option(() => timers.sleep(5, 5 as never), /sleep\(\) options must be an object/);
    option(() => requests.register(1, 5, { singal: 1 } as never), /no option "singal".*"signal"/);
    option(() => new SystemClock({ epoch: 1 } as never), /epoch must be true or false/);
    option(() => new SystemClock(null as never), /SystemClock options must be an object/);
    expect(timers.size).toBe(0);
    expect(requests.size).toBe(0);
    // The right names still work.
    const nap = timers.sleep(5, { signal: new AbortController().signal, ref: false });
    clock.advance(5);
    return nap;
  });

  it('are refused by the client, the push listener and the stores', async () => {
    await refused(() => new TickwheelClient({ tokn: 'x' } as never), 'tokn', 'token');
    await refused(
      () => pushListener({ secret: 's', maxByte: 5 } as never, () => {}),
      'maxByte',
      'maxBytes',
    );
    await refused(
      () => FileStore.open({ dir: '/tmp/never-made', fsyc: 'batch' } as never),
      'fsyc',
      'fsync',
    );
    await refused(
      () => RedisIdempotencyStore.open({ redis: 'redis://127.0.0.1:1', claimMS: 5 } as never),
      'claimMS',
      'claimMs',
    );
  });
});

describe('deliverAt', () => {
  it('in seconds is refused against a wall clock, with the milliseconds it may have meant', async () => {
    const queue = await DelayQueue.open({ store: new MemoryStore() });
    try {
      await expect(
        queue.schedule({ topic: 't', payload: 1, deliverAt: 1_767_225_600 }),
      ).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_INVALID_DELAY',
        message: expect.stringMatching(/looks like seconds.*1767225600000/),
      });
      await queue.schedule({ topic: 't', payload: 1, deliverAt: Date.now() + 60_000 });
    } finally {
      await queue.close();
    }
  });
});
