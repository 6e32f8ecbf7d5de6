/**
 * Hand-outs and snapshots: a HANDOUT record is applied to the store's tables only when a
 * snapshot captures them, not as it is written. Whatever happened before and after the
 * snapshot, a crash recovered from the snapshot must count each delivery exactly as a replay of
 * the whole log does. Real data directories; queues on a ManualClock; the "crash" is a copy of
 * the directory taken while the queue is open.
 */

import { cpSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import type { DelayQueue } from '../../src/delay-queue.js';
import type { FileStore } from '../../src/store/file/file-store.js';
import { SNAPSHOT_FILE } from '../../src/store/file/snapshot.js';
import { advance } from '../queue/harness.js';
import { BURY, FINISH, HANDOUT, SCHEDULE } from '../../src/store/file/records.js';
import { TOPIC, openQueue, segmentFiles, segmentRecords, tempDir, trackQueues } from './disk.js';

const { track, close } = trackQueues();

function storeOf(queue: DelayQueue): FileStore {
  return (queue as unknown as { backend: { store: FileStore } }).backend.store;
}

/** The directory as a crash would leave it, once with its snapshot and once without. */
async function crashImages(dir: string, queue: DelayQueue) {
  // Everything appended so far is written (hand-outs too), no snapshot is taken.
  await storeOf(queue).checkpoint('never');
  const image = tempDir();
  cpSync(dir, image, { recursive: true });
  rmSync(join(image, 'LOCK'));
  const plain = tempDir();
  cpSync(image, plain, { recursive: true });
  rmSync(join(plain, SNAPSHOT_FILE), { force: true });
  return { image, plain };
}

/** What a reopened directory says of each message: status, attempts, lastError. */
async function recovered(copy: string, now: number, ids: readonly string[]) {
  const queue = await track(openQueue(copy, new ManualClock(now)));
  const snapshot = queue.recovery!.snapshot;
  const states: Record<string, unknown> = {};
  for (const id of ids) {
    const info = await queue.get(id);
    states[id] =
      info === undefined
        ? 'gone'
        : { status: info.status, attempts: info.attempts, lastError: info.lastError };
  }
  const dead = (await queue.deadLetters(TOPIC)).map((letter) => letter.id).sort();
  await close(queue);
  return { snapshot, states, dead };
}

type Op =
  | { kind: 'receive'; max: number }
  | { kind: 'ack' | 'nack'; which: number }
  | { kind: 'snapshot' }
  | { kind: 'advance' };

const ops: fc.Arbitrary<Op[]> = fc.array(
  fc.oneof(
    fc.record({ kind: fc.constant('receive' as const), max: fc.integer({ min: 1, max: 4 }) }),
    fc.record({ kind: fc.constant('ack' as const), which: fc.nat() }),
    fc.record({ kind: fc.constant('nack' as const), which: fc.nat() }),
    fc.record({ kind: fc.constant('snapshot' as const) }),
    fc.record({ kind: fc.constant('advance' as const) }),
  ),
  { minLength: 1, maxLength: 25 },
);

/** The types of the records in a data directory's log, in order. */
function recordTypes(dir: string): number[] {
  return segmentFiles(dir).flatMap((file) => segmentRecords(file).map((record) => record.type));
}

describe('HANDOUT records ride the next write', () => {
  it('a delivery still in progress at the next write gets one; one acked or nacked before it gets none', async () => {
    const dir = tempDir();
    const clock = new ManualClock(Date.now());
    const queue = await track(openQueue(dir, clock));
    for (const id of ['acked', 'nacked', 'working']) {
      await queue.schedule({ topic: TOPIC, id, payload: id, maxAttempts: 1 });
    }
    const taken = await queue.receive(TOPIC, { max: 3 });
    expect(taken.map((message) => message.id)).toEqual(['acked', 'nacked', 'working']);
    // Ended before anything was written: their FINISH and BURY are their latest records.
    const ack = queue.ack(taken[0].receipt);
    const nack = queue.nack(taken[1].receipt, { reason: 'no' });
    await Promise.all([ack, nack]);
    await storeOf(queue).checkpoint('never');
    expect(recordTypes(dir)).toEqual([SCHEDULE, SCHEDULE, SCHEDULE, FINISH, BURY, HANDOUT]);
    const { image } = await crashImages(dir, queue);
    const after = await recovered(image, clock.now(), ['acked', 'nacked', 'working']);
    expect(after.states).toEqual({
      acked: 'gone',
      nacked: { status: 'dead', attempts: 1, lastError: 'no' },
      working: {
        status: 'dead',
        attempts: 1,
        lastError: expect.stringMatching(/process stopped .* during delivery 1 of 1/),
      },
    });
  });
});

describe('deliveries counted across a snapshot', () => {
  it('a message handed out before a snapshot and never acked: its delivery counts after a crash', async () => {
    const dir = tempDir();
    const clock = new ManualClock(Date.now());
    const queue = await track(openQueue(dir, clock));
    await queue.schedule({ topic: TOPIC, id: 'last-try', payload: 1, maxAttempts: 1 });
    await queue.schedule({ topic: TOPIC, id: 'first-try', payload: 2, maxAttempts: 3 });
    const taken = await queue.receive(TOPIC, { max: 2 });
    expect(taken.map((message) => message.attempts)).toEqual([1, 1]);
    // Their HANDOUT records are written (a checkpoint flushes the log), then a snapshot is taken
    // after them: its recovery does not replay them.
    await storeOf(queue).checkpoint('never');
    await storeOf(queue).checkpoint('always');
    const { image, plain } = await crashImages(dir, queue);
    const ids = ['last-try', 'first-try'];
    const fromSnapshot = await recovered(image, clock.now(), ids);
    const fromLog = await recovered(plain, clock.now(), ids);
    expect(fromSnapshot.snapshot).toBe('used');
    expect(fromLog.snapshot).toBe('none');
    for (const result of [fromSnapshot, fromLog]) {
      expect(result.dead).toEqual(['last-try']);
      expect(result.states['last-try']).toEqual({
        status: 'dead',
        attempts: 1,
        lastError: expect.stringMatching(/process stopped .* during delivery 1 of 1/),
      });
      expect(result.states['first-try']).toEqual({
        status: 'ready',
        attempts: 1,
        lastError: expect.stringMatching(/during delivery 1 of 3/),
      });
    }
  });

  it('uncoveredLogBytes counts the records the hand-over appends, from a snapshot as from the whole log', async () => {
    const dir = tempDir();
    const clock = new ManualClock(Date.now());
    const queue = await track(openQueue(dir, clock));
    await queue.schedule({ topic: TOPIC, id: 'last-try', payload: 1, maxAttempts: 1 });
    await queue.receive(TOPIC);
    await storeOf(queue).checkpoint('never');
    await storeOf(queue).checkpoint('always');
    const { image, plain } = await crashImages(dir, queue);
    for (const copy of [image, plain]) {
      const before = segmentFiles(copy).reduce((sum, file) => sum + statSync(file).size, 0);
      const reopened = await track(openQueue(copy, new ManualClock(clock.now())));
      expect(reopened.recovery!.snapshot).toBe(copy === image ? 'used' : 'none');
      // The hand-over buried the delivery the crash cut short: a BURY record after the replay.
      expect(await reopened.deadLetters(TOPIC)).toHaveLength(1);
      const { logBytes = 0, uncoveredLogBytes } = storeOf(reopened).stats();
      expect(logBytes).toBeGreaterThan(before);
      expect(uncoveredLogBytes).toBe(reopened.recovery!.replayedBytes + logBytes - before);
      await close(reopened);
    }
  });

  it('recovery from a snapshot agrees with a replay of the whole log, whatever ran before and after it', async () => {
    await fc.assert(
      fc.asyncProperty(
        ops,
        fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 6 }),
        async (sequence, maxAttempts) => {
          const dir = tempDir();
          const clock = new ManualClock(Date.now());
          const queue = await track(openQueue(dir, clock));
          const ids = maxAttempts.map((_, i) => `m${i}`);
          for (let i = 0; i < ids.length; i++) {
            await queue.schedule({
              topic: TOPIC,
              id: ids[i],
              payload: i,
              maxAttempts: maxAttempts[i],
              backoff: { type: 'fixed', delayMs: 100 },
            });
          }
          let inFlight: string[] = [];
          let snapshots = 0;
          for (const op of sequence) {
            if (op.kind === 'receive') {
              const taken = await queue.receive(TOPIC, { max: op.max });
              inFlight.push(...taken.map((message) => message.receipt));
            } else if (op.kind === 'ack' || op.kind === 'nack') {
              if (inFlight.length === 0) continue;
              const [receipt] = inFlight.splice(op.which % inFlight.length, 1);
              if (op.kind === 'ack') await queue.ack(receipt);
              else await queue.nack(receipt, { delayMs: 0, reason: 'no' });
            } else if (op.kind === 'snapshot') {
              await storeOf(queue).checkpoint('always');
              snapshots++;
            } else {
              await advance(clock, 200, 100, queue);
            }
          }
          const { image, plain } = await crashImages(dir, queue);
          await close(queue);
          inFlight = [];
          const fromSnapshot = await recovered(image, clock.now(), ids);
          const fromLog = await recovered(plain, clock.now(), ids);
          expect(fromSnapshot.snapshot).toBe(snapshots > 0 ? 'used' : 'none');
          expect(fromSnapshot.states).toEqual(fromLog.states);
          expect(fromSnapshot.dead).toEqual(fromLog.dead);
        },
      ),
      { numRuns: 40 },
    );
  });
});
