/**
 * Regressions found while building the crash harness: a cancel or reschedule racing the horizon
 * load, a reopen with a smaller horizon (or a clock set back), and a failed open that damaged
 * the directory for the next one.
 */

import { cpSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import type { DelayQueue } from '../../src/delay-queue.js';
import { advance } from '../queue/harness.js';
import { TOPIC, consume, openQueue, trackQueues, segmentFiles, tempDir } from './disk.js';

const { track, close } = trackQueues();

/** The file store's internals that the race tests slow down, as a slow disk would. */
interface StoreInternals {
  index: { delete(window: number): Promise<void> };
  lookup(id: string): Promise<unknown>;
}

function internals(queue: DelayQueue): StoreInternals {
  return (queue as unknown as { backend: { store: StoreInternals } }).backend.store;
}

/**
 * Makes the index slow to delete a loaded window, so the horizon load takes `ms` longer per
 * window. Resolves when a load has read a window (and holds copies of its messages).
 */
function slowLoads(queue: DelayQueue, ms: number): Promise<void> {
  const index = internals(queue).index;
  const remove = index.delete.bind(index);
  return new Promise((windowRead) => {
    index.delete = async (window) => {
      windowRead();
      await sleep(ms);
      return remove(window);
    };
  });
}

/** Opens a queue (1 s horizon, 500 ms windows) on an aligned clock; one message due at +2 s. */
async function withMessageBeyondHorizon() {
  const t0 = Math.ceil(Date.now() / 1000) * 1000;
  const clock = new ManualClock(t0);
  const queue = await track(openQueue(tempDir(), clock));
  const { id } = await queue.schedule({ topic: TOPIC, payload: 'x', deliverAt: t0 + 2000 });
  // Up to the moment before the load that brings the message's window into memory.
  await advance(clock, 1000, 250, queue);
  expect((await queue.get(id))?.status).toBe('scheduled');
  return { clock, queue, id, t0 };
}

describe('cancel and reschedule racing the horizon load', () => {
  it('a cancel that resolves while a load holds a copy of the message: never delivered', async () => {
    const { clock, queue, id } = await withMessageBeyondHorizon();
    const windowRead = slowLoads(queue, 30);
    clock.advance(250); // the load starts, reads the window, is slow to finish
    await windowRead;
    expect(await queue.cancel(id)).toBe(true);
    const got = await consume(queue, clock, 2000);
    expect(got.map((message) => message.id)).toEqual([]);
    expect((await queue.get(id))?.status).toBe('cancelled');
  });

  it('a cancel whose lookup spans the end of the load: never delivered', async () => {
    const { clock, queue, id } = await withMessageBeyondHorizon();
    void slowLoads(queue, 10);
    const store = internals(queue);
    const lookup = store.lookup.bind(store);
    // (The horizon's own settled(): the queue's waits for this cancel too, under whose lock
    // the lookup runs.)
    const horizon = (queue as unknown as { backend: { horizon: { settled(): Promise<void> } } })
      .backend.horizon;
    store.lookup = async (key) => {
      const found = await lookup(key);
      await horizon.settled(); // the load finishes meanwhile and takes the message into memory
      return found;
    };
    clock.advance(250);
    expect(await queue.cancel(id)).toBe(true);
    const got = await consume(queue, clock, 2000);
    expect(got.map((message) => message.id)).toEqual([]);
  });

  it('a reschedule during the load: delivered at the new time, not the old one', async () => {
    const { clock, queue, id, t0 } = await withMessageBeyondHorizon();
    const windowRead = slowLoads(queue, 30);
    clock.advance(250);
    await windowRead;
    expect(await queue.reschedule(id, { deliverAt: t0 + 4000 })).toBe(true);
    const got = await consume(queue, clock, 4000);
    expect(got.map((message) => [message.id, message.deliverAt])).toEqual([[id, t0 + 4000]]);
    expect(got[0].receivedAt).toBeGreaterThanOrEqual(t0 + 4000);
  });
});

describe('reopening with a nearer frontier than last time', () => {
  it('a smaller horizonMs: messages that were inside the old horizon are still delivered', async () => {
    const dir = tempDir();
    const t0 = Date.now();
    const clock = new ManualClock(t0);
    let queue = await track(openQueue(dir, clock, { horizonMs: 60_000 }));
    const ids: string[] = [];
    for (let i = 1; i <= 10; i++) {
      ids.push((await queue.schedule({ topic: TOPIC, payload: i, delayMs: 3000 * i })).id);
    }
    await close(queue);

    queue = await track(openQueue(dir, clock, { horizonMs: 1000 }));
    const got = await consume(queue, clock, 31_000, 250);
    expect(got.map((message) => message.id)).toEqual(ids);
    for (const message of got) expect(message.receivedAt).toBeGreaterThanOrEqual(message.deliverAt);
  });

  it('a crash after loads deleted index windows, reopened with a smaller horizon: nothing lost', async () => {
    const dir = tempDir();
    const t0 = Math.ceil(Date.now() / 1000) * 1000;
    const clock = new ManualClock(t0);
    let queue = await track(openQueue(dir, clock, { horizonMs: 4000 }));
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      ids.push(
        (await queue.schedule({ topic: TOPIC, payload: i, deliverAt: t0 + 6000 + 100 * i })).id,
      );
    }
    // A checkpoint that lists the index windows of those messages.
    await close(queue);
    queue = await track(openQueue(dir, clock, { horizonMs: 4000 }));
    // Loads bring windows up to t0 + 7500 into memory and delete them from the index.
    await advance(clock, 3500, 250, queue);
    await queue.settled();
    // A crash now: the files as they are, no closing checkpoint.
    const image = tempDir();
    cpSync(dir, image, { recursive: true });

    const later = new ManualClock(clock.now());
    const reopened = await track(openQueue(image, later, { horizonMs: 1000 }));
    const got = await consume(reopened, later, 6000, 250);
    expect(got.map((message) => message.id)).toEqual(ids);
    for (const message of got) expect(message.receivedAt).toBeGreaterThanOrEqual(message.deliverAt);
  });
});

describe('a failed open', () => {
  it('writes no checkpoint and deletes no segment: the next open recovers everything', async () => {
    const dir = tempDir();
    const t0 = Date.now();
    const clock = new ManualClock(t0);
    const queue = await track(openQueue(dir, clock, { segmentBytes: 256 }));
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) {
      ids.push((await queue.schedule({ topic: TOPIC, payload: i, delayMs: 2000 + 10 * i })).id);
    }
    // A crash: the files as they are, without the index entries a close would sync.
    const image = tempDir();
    cpSync(dir, image, { recursive: true });
    rmSync(join(image, 'index'), { recursive: true, force: true });
    const segments = segmentFiles(image);
    expect(segments.length).toBeGreaterThan(2);
    const checkpoint = readFileSync(join(image, 'checkpoint.json'), 'utf8');

    // Recovery fails: something unreadable where the next segment would be.
    const next = Number(segments[segments.length - 1].slice(-14, -4)) + 1;
    const blocker = join(image, 'log', `${String(next).padStart(10, '0')}.seg`);
    mkdirSync(blocker);
    await expect(openQueue(image, clock)).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_IO' });
    expect(readFileSync(join(image, 'checkpoint.json'), 'utf8')).toBe(checkpoint);
    expect(segmentFiles(image)).toEqual([...segments, blocker]);
    rmSync(blocker, { recursive: true });

    const reopened = await track(openQueue(image, clock));
    const got = await consume(reopened, clock, 3000);
    expect(got.map((message) => message.id)).toEqual(ids);
  });
});
