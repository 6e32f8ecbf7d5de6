/**
 * A disk that fails under a running queue (no space left, then I/O errors): every call the
 * failure touches is rejected with ERR_TICKWHEEL_IO, nothing crashes or hangs, the store takes
 * no more changes until it is reopened, and after a reopen every acknowledged schedule is
 * delivered (no earlier than due) unless its cancel or ack was acknowledged.
 */

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import { DelayQueue } from '../../src/delay-queue.js';
import { FileStore } from '../../src/store/file/file-store.js';
import type { LogIo } from '../../src/store/log/index.js';
import { T0, advance, settle } from './harness.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('disk');

function diskError(code: string): Error {
  return Object.assign(new Error(`${code}: simulated disk failure`), { code });
}

/** Log file operations that work until `failing` says how they fail. */
function flakyDisk() {
  const disk = { failing: undefined as 'write' | 'sync' | undefined };
  const io: Partial<LogIo> = {
    async write(handle, buffer, offset, length, position) {
      if (disk.failing === 'write') throw diskError('ENOSPC');
      const { bytesWritten } = await handle.write(buffer, offset, length, position);
      return bytesWritten;
    },
    async sync(handle) {
      if (disk.failing === 'sync') throw diskError('EIO');
      await handle.datasync();
    },
  };
  return { disk, io };
}

async function openQueue(
  dir: string,
  clock: ManualClock,
  io?: Partial<LogIo>,
  onFault: (fault: { code: string }) => void = () => {},
) {
  const store = await FileStore.open({
    dir,
    fsync: 'batch',
    windowMs: 500,
    ...(io === undefined ? {} : { logIo: io }),
  });
  return DelayQueue.open({ store, clock, horizonMs: 1000, onFault });
}

/** Settles every promise, returning the rejections' codes (undefined for fulfilled ones). */
async function outcomes(promises: Array<Promise<unknown>>): Promise<Array<string | undefined>> {
  const settled = await Promise.allSettled(promises);
  return settled.map((s) =>
    s.status === 'fulfilled' ? undefined : String((s.reason as { code?: string }).code),
  );
}

describe.each(['write', 'sync'] as const)('a disk whose %s fails under a running queue', (how) => {
  it('rejects what it touches, stops taking changes, and loses nothing acknowledged', async () => {
    const dir = tempDir();
    const clock = new ManualClock(T0);
    const { disk, io } = flakyDisk();
    const faults: Array<{ code: string }> = [];
    const queue = await openQueue(dir, clock, io, (fault) => faults.push(fault));

    // Acknowledged before the failure: near and far schedules, one cancel, one ack.
    const near = await queue.scheduleMany(
      Array.from({ length: 50 }, (_, i) => ({ topic: 'near', payload: i, delayMs: 100 + i })),
    );
    const far = await queue.scheduleMany(
      Array.from({ length: 50 }, (_, i) => ({ topic: 'far', payload: i, delayMs: 5000 + i })),
    );
    expect(await queue.cancel(far[0].id)).toBe(true);
    await advance(clock, 200, 50, queue);
    const [acked, ...inFlight] = await queue.receive('near', { max: 5 });
    expect(await queue.ack(acked.receipt, { durable: true })).toBe(true);

    disk.failing = how;
    const touched = await outcomes([
      queue.schedule({ topic: 'near', payload: 'during', delayMs: 10 }),
      queue.scheduleMany([{ topic: 'far', payload: 'during', delayMs: 5000 }]),
      queue.cancel(far[1].id),
      queue.reschedule(far[2].id, { delayMs: 50_000 }),
      // Durable: an ack or nack that is not waits for no write (ack-durability.test.ts).
      queue.ack(inFlight[0].receipt, { durable: true }),
      queue.nack(inFlight[1].receipt, { delayMs: 10, durable: true }),
    ]);
    expect(touched).toEqual(Array(6).fill('ERR_TICKWHEEL_IO'));

    // Healed, the store still takes no changes (its tables may be ahead of the log) and says
    // what to do; reads keep working.
    disk.failing = undefined;
    const after = queue.schedule({ topic: 'near', payload: 'after', delayMs: 10 });
    await expect(after).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_IO' });
    await expect(after).rejects.toThrow(/open it again/);
    expect((await queue.get(far[3].id))?.status).toBe('scheduled');
    expect((await queue.stats()).store?.stopped).toBe(1);
    // An ack or nack that waits for no write is refused too, not answered as applied: the
    // delivery stays as it was (it comes back after a reopen).
    const later = await outcomes([
      queue.ack(inFlight[2].receipt),
      queue.nack(inFlight[3].receipt, { delayMs: 10 }),
    ]);
    expect(later).toEqual(Array(2).fill('ERR_TICKWHEEL_IO'));
    expect((await queue.get(inFlight[2].id))?.status).toBe('inflight');
    // Their visibility runs out; the store refuses each expiry, and tells it once.
    await advance(clock, 60_000, 1_000, queue);
    await settle();
    expect(faults.filter((f) => f.code === 'ERR_TICKWHEEL_IO').length).toBeLessThanOrEqual(1);
    await queue.close();

    // Reopened on the same data: every acknowledged schedule is delivered exactly when due or
    // later, except the acknowledged cancel and the acknowledged ack.
    const reopened = await openQueue(dir, clock);
    try {
      await advance(clock, 6000, 100, reopened);
      await settle();
      const got = [
        ...(await reopened.receive('near', { max: 1000 })),
        ...(await reopened.receive('far', { max: 1000 })),
      ];
      for (const message of got) expect(message.deliverAt).toBeLessThanOrEqual(clock.now());
      const delivered = new Set(got.map((m) => m.id));
      const expected = [...near, ...far]
        .map((r) => r.id)
        .filter((id) => id !== far[0].id && id !== acked.id);
      expect([...delivered].sort()).toEqual(expected.sort());
      // Nothing the failure rejected came back as if it had been accepted.
      expect(got.some((m) => m.payload === 'during' || m.payload === 'after')).toBe(false);
    } finally {
      await reopened.close();
    }
  });
});

describe('a write that fails while a checkpoint copies the tables for a snapshot', () => {
  it('stops the checkpoint: no segment whose messages the log still holds is deleted', async () => {
    const dir = tempDir();
    const { disk, io } = flakyDisk();
    const open = () =>
      FileStore.open({
        dir,
        fsync: 'never',
        segmentBytes: 1 << 20,
        logIo: io,
        checkpointIntervalMs: 3_600_000,
      });
    const store = await open();
    await store.recover(T0, () => {});
    const message = (id: string) => ({
      id,
      topic: 't',
      deliverAt: T0 + 86_400_000,
      attempts: 0,
      maxAttempts: 5,
      backoff: undefined,
      payloadKind: 0,
      payload: undefined,
      payloadText: '1',
      ref: 0,
    });
    // The victim alone is live in segment 1 (the others there are cancelled, and their
    // cancels fill it); enough others in later segments that the snapshot's copy of the
    // IdTable takes several turns of the event loop.
    const victim = message('victim');
    await store.add(victim, false);
    const filler = Array.from({ length: 12_000 }, (_, i) => message(`gone-${i}`));
    await Promise.all(filler.map((m) => store.add(m, false)));
    await Promise.all(filler.map((m) => store.finish(m, 'cancelled')));
    const many = Array.from({ length: 300_000 }, (_, i) => message(`live-${i}`));
    for (let i = 0; i < many.length; i += 10_000) {
      await Promise.all(many.slice(i, i + 10_000).map((m) => store.add(m, false)));
    }
    expect(existsSync(join(dir, 'log', '0000000001.seg'))).toBe(true);

    const checkpoint = store.checkpoint('always'); // begins copying the IdTable
    disk.failing = 'write';
    // Applied to the tables at once (segment 1 then looks empty), lost on the disk.
    await expect(store.finish(victim, 'cancelled')).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_IO',
    });
    await checkpoint;
    expect(existsSync(join(dir, 'log', '0000000001.seg'))).toBe(true);
    disk.failing = undefined;
    await store.close();

    const reopened = await open();
    await reopened.recover(T0, () => {});
    expect((await reopened.lookup('victim'))?.status).toBe('scheduled');
    await reopened.close();
  }, 60_000);
});
