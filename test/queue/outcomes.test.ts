/**
 * Ambiguous outcomes (docs/http-api.md, Retries): a write that fails after it reached the disk
 * says so (err.outcome 'unknown', the id it was written under, retry 'same-id'), and repeating
 * it with that id makes no second message; a write refused before anything was written says
 * nothing of the kind. The faults are real writes followed by a failure: a store whose write
 * goes through to the file store and then reports an I/O error, as a failed fsync would.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import { DelayQueue } from '../../src/delay-queue.js';
import { TickwheelOutcomeError } from '../../src/errors.js';
import { FileStore } from '../../src/store/file/file-store.js';
import type { LogIo } from '../../src/store/log/index.js';
import { failingAfterWrite } from './failing-store.js';
import { T0, advance } from './harness.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('outcomes');

const open: DelayQueue[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((queue) => queue.close().catch(() => {})));
});

async function openQueue(dir: string, clock: ManualClock, io?: Partial<LogIo>) {
  const store = await FileStore.open({
    dir,
    fsync: 'batch',
    windowMs: 500,
    ...(io === undefined ? {} : { logIo: io }),
  });
  const failing = failingAfterWrite(store);
  const queue = await DelayQueue.open({ store: failing.store, clock, horizonMs: 1000 });
  open.push(queue);
  return { queue, fault: failing.fault };
}

async function deliveries(queue: DelayQueue, clock: ManualClock, topic: string) {
  await advance(clock, 5_000, 100, queue);
  const received = await queue.receive(topic, { max: 100 });
  for (const message of received) await queue.ack(message.receipt);
  return received.map((message) => message.id);
}

describe('a write that fails after it reached the disk', () => {
  it('schedule: says outcome unknown with the id; scheduling that id again makes no second message', async () => {
    const dir = tempDir();
    const clock = new ManualClock(T0);
    const first = await openQueue(dir, clock);
    first.fault.failing = 'add';
    const err = await first.queue
      .schedule({ topic: 't', payload: 'once', delayMs: 2_000 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TickwheelOutcomeError);
    const { id } = err as TickwheelOutcomeError;
    expect(err).toMatchObject({
      code: 'ERR_TICKWHEEL_IO',
      outcome: 'unknown',
      retry: 'same-id',
    });
    expect(typeof id).toBe('string');
    expect((err as Error).message).toContain(`repeating it with id ${id as string} is safe`);
    await first.queue.close();

    // It was written: after a restart it is there, and the retry with its id finds it.
    const second = await openQueue(dir, clock);
    expect(await second.queue.get(id as string)).toMatchObject({ status: 'scheduled' });
    const again = await second.queue.schedule({
      topic: 't',
      payload: 'once',
      delayMs: 2_000,
      id: id as string,
    });
    expect(again.id).toBe(id);
    expect(await deliveries(second.queue, clock, 't')).toEqual([id]);
  });

  it('scheduleMany: names every message whose write may have happened', async () => {
    const clock = new ManualClock(T0);
    const { queue, fault } = await openQueue(tempDir(), clock);
    fault.failing = 'add';
    const err = await queue
      .scheduleMany([
        { topic: 't', payload: 1, delayMs: 2_000 },
        { topic: 't', payload: 2, delayMs: 2_000 },
      ])
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ outcome: 'unknown', retry: 'same-id', id: undefined });
    expect((err as TickwheelOutcomeError).ids).toHaveLength(2);
  });

  it('pause: says outcome unknown with the topic, and the pause is in force after a restart', async () => {
    const dir = tempDir();
    const clock = new ManualClock(T0);
    const first = await openQueue(dir, clock);
    first.fault.failing = 'writeTopicSettings';
    await expect(first.queue.pause('orders')).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_IO',
      outcome: 'unknown',
      id: 'orders',
      retry: 'same-id',
    });
    await first.queue.close();
    const second = await openQueue(dir, clock);
    expect((await second.queue.topicInfo('orders')).paused).toBe(true);
  });

  it('putSchedule: says outcome unknown with the name, and the schedule is in force after a restart', async () => {
    const dir = tempDir();
    const clock = new ManualClock(T0);
    const first = await openQueue(dir, clock);
    first.fault.failing = 'writeSchedules';
    const spec = { topic: 't', payload: 'tick', everyMs: 60_000 };
    await expect(first.queue.putSchedule('s1', spec)).rejects.toMatchObject({
      outcome: 'unknown',
      id: 's1',
      retry: 'same-id',
    });
    await first.queue.close();
    const second = await openQueue(dir, clock);
    expect(await second.queue.getSchedule('s1')).toMatchObject({ name: 's1' });
  });
});

describe('a write refused before anything was written', () => {
  it('has no outcome: a bad argument, and a store that stopped taking changes', async () => {
    const clock = new ManualClock(T0);
    const disk = { failing: false };
    const io: Partial<LogIo> = {
      async sync(handle) {
        if (disk.failing) throw Object.assign(new Error('EIO: simulated'), { code: 'EIO' });
        await handle.datasync();
      },
    };
    const { queue } = await openQueue(tempDir(), clock, io);
    const bad = await queue.schedule({ topic: '', payload: 1 }).catch((e: unknown) => e);
    expect(bad).not.toBeInstanceOf(TickwheelOutcomeError);
    expect((bad as { outcome?: unknown }).outcome).toBeUndefined();

    // The failed fsync: the record was written, so its outcome is unknown...
    disk.failing = true;
    await expect(queue.schedule({ topic: 't', payload: 1, id: 'a' })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_IO',
      outcome: 'unknown',
      id: 'a',
    });
    // ...and then the store takes no more changes: refused before writing, outcome 'none'.
    const refused = await queue.schedule({ topic: 't', payload: 2, id: 'b' }).catch((e) => e);
    expect(refused).toMatchObject({ code: 'ERR_TICKWHEEL_IO', outcome: 'none' });
    expect(refused).not.toBeInstanceOf(TickwheelOutcomeError);
  });
});
