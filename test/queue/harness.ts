import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { ManualClock } from '../../src/index.js';
import { DelayQueue, MemoryStore, type DelayQueueOpenOptions } from '../../src/delay-queue.js';

/** A fixed epoch time so that test runs are repeatable. */
export const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);

/** Lets pending promise chains (store writes, loads) run. */
export async function settle(rounds = 3): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
}

export interface QueueKind {
  name: string;
  /** Opens a queue; for the file kind, on the same directory each time within one test. */
  open(clock: ManualClock, options?: Partial<DelayQueueOpenOptions>): Promise<DelayQueue>;
  cleanup(): void;
  durable: boolean;
  /** The data directory of a file kind. */
  dir?: string;
}

export function memoryKind(): QueueKind {
  return {
    name: 'memory store',
    durable: false,
    open: (clock, options = {}) =>
      DelayQueue.open({ store: new MemoryStore(), clock, horizonMs: 1000, ...options }),
    cleanup: () => {},
  };
}

export function fileKind(): QueueKind {
  const dir = mkdtempSync(join(tmpdir(), 'tickwheel-queue-'));
  return {
    name: 'file store',
    durable: true,
    dir,
    open: (clock, options = {}) =>
      DelayQueue.open({
        dir,
        clock,
        horizonMs: 1000,
        windowMs: 500,
        fsync: 'never',
        ...options,
      }),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * Advances a ManualClock in steps, letting the queue's async work (store writes, horizon loads)
 * finish between them, and firing what a finished load brought in. Work under way when it is
 * called finishes first, at the time it began: a store write takes no virtual time.
 */
export async function advance(
  clock: ManualClock,
  ms: number,
  step = 100,
  queue?: { settled(): Promise<void> },
): Promise<void> {
  let left = ms;
  if (queue !== undefined) await queue.settled();
  while (left > 0) {
    const by = Math.min(step, left);
    clock.advance(by);
    left -= by;
    await settle();
    if (queue !== undefined) {
      await queue.settled();
      clock.advance(0);
      await settle();
    }
  }
  await settle();
}

/**
 * openQueue() for a test file: a queue of the given kind on a ManualClock at T0, closed (and its
 * directory removed) after each test.
 */
export function useQueues(): (
  makeKind?: () => QueueKind,
) => Promise<{ clock: ManualClock; queue: DelayQueue; kind: QueueKind }> {
  const kinds: QueueKind[] = [];
  const queues: DelayQueue[] = [];
  afterEach(async () => {
    for (const queue of queues.splice(0)) await queue.close();
    for (const kind of kinds.splice(0)) kind.cleanup();
  });
  return async (makeKind = memoryKind) => {
    const kind = makeKind();
    kinds.push(kind);
    const clock = new ManualClock(T0);
    const queue = await kind.open(clock);
    queues.push(queue);
    return { clock, queue, kind };
  };
}
