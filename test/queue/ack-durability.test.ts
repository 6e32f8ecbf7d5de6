/**
 * Acks and nacks that resolve once applied (docs/storage.md, "Durability"): with the log's fsync
 * held, an ack resolves, its message is acked and never handed out again; `{ durable: true }`
 * and `durableAcks` wait for the fsync; a write that fails after a resolved ack goes to onFault.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/index.js';
import { DelayQueue } from '../../src/delay-queue.js';
import { FileStore } from '../../src/store/file/file-store.js';
import type { QueueFault } from '../../src/queue/faults.js';
import { T0, advance, settle } from './harness.js';
import { waitFor } from '../support/wait-for.js';
import { useTempDirs } from '../support/temp-dir.js';
import { heldDisk } from '../support/held-disk.js';

const tempDir = useTempDirs('ack-durability');

const open: DelayQueue[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((queue) => queue.close().catch(() => {})));
});

async function queueWithDue(count: number, options: { durableAcks?: boolean } = {}) {
  const disk = heldDisk();
  const faults: QueueFault[] = [];
  const clock = new ManualClock(T0);
  const store = await FileStore.open({ dir: tempDir(), fsync: 'batch', logIo: disk.io });
  const queue = await DelayQueue.open({
    store,
    clock,
    horizonMs: 1000,
    onFault: (fault) => faults.push(fault),
    ...options,
  });
  open.push(queue);
  await queue.scheduleMany(
    Array.from({ length: count }, (_, i) => ({ topic: 't', payload: i, delayMs: 10 })),
  );
  await advance(clock, 20, 10, queue);
  const received = await queue.receive('t', { max: count, visibilityMs: 1000 });
  expect(received).toHaveLength(count);
  return { queue, clock, disk, faults, received };
}

/** Whether `promise` settles within a few turns of the event loop (it waits for nothing else). */
async function settlesSoon(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await settle(10);
  return settled;
}

describe('an ack that is not durable', () => {
  it('resolves while the group commit waits for its fsync, and the message is done at once', async () => {
    const { queue, clock, disk, received } = await queueWithDue(3);
    disk.hold();
    const acks = [queue.ack(received[0].receipt), queue.ackMany([received[1].receipt])];
    // Something must be waiting on the held fsync, or this proves nothing.
    await waitFor(() => disk.disk.waiting > 0);
    expect(await settlesSoon(Promise.all(acks))).toBe(true);
    expect(await acks[0]).toBe(true);
    expect(await acks[1]).toEqual([true]);
    expect((await queue.get(received[0].id))?.status).toBe('acked');
    expect(await queue.ack(received[0].receipt)).toBe(false);
    // Past its visibility timeout it is not handed out again; the one not acked is (its retry
    // is written before it is due again, so the fsync is let go first).
    disk.release();
    await advance(clock, 120_000, 500, queue);
    // The retry's write is real I/O: due by now, it is ready once written.
    let again: Array<{ id: string }> = [];
    await waitFor(async () => (again = await queue.receive('t', { max: 10 })).length > 0);
    expect(again.map((m) => m.id)).toEqual([received[2].id]);
  });

  it('with { durable: true } waits for the fsync', async () => {
    const { queue, disk, received } = await queueWithDue(2);
    disk.hold();
    const durable = queue.ack(received[0].receipt, { durable: true });
    const many = queue.ackMany([received[1].receipt], { durable: true });
    await waitFor(() => disk.disk.waiting > 0);
    expect(await settlesSoon(durable)).toBe(false);
    expect(await settlesSoon(many)).toBe(false);
    disk.release();
    expect(await durable).toBe(true);
    expect(await many).toEqual([true]);
  });

  it('durableAcks: true makes every ack wait, unless a call says durable: false', async () => {
    const { queue, disk, received } = await queueWithDue(3, { durableAcks: true });
    disk.hold();
    const acked = queue.ack(received[0].receipt);
    const nacked = queue.nack(received[1].receipt, { delayMs: 10 });
    await waitFor(() => disk.disk.waiting > 0);
    expect(await settlesSoon(acked)).toBe(false);
    expect(await settlesSoon(nacked)).toBe(false);
    expect(await settlesSoon(queue.ack(received[2].receipt, { durable: false }))).toBe(true);
    disk.release();
    expect(await acked).toBe(true);
    expect(await nacked).toBe(true);
  });
});

describe('a nack that is not durable', () => {
  it('resolves once the delivery has ended, before its retry is on disk', async () => {
    const { queue, disk, received } = await queueWithDue(2);
    disk.hold();
    const nacked = queue.nack(received[0].receipt, { delayMs: 10, durable: false });
    const durable = queue.nack(received[1].receipt, { delayMs: 10, durable: true });
    await waitFor(() => disk.disk.waiting > 0);
    expect(await settlesSoon(nacked)).toBe(true);
    expect(await nacked).toBe(true);
    // Its receipt is spent: a second nack or ack finds no delivery.
    expect(await queue.ack(received[0].receipt)).toBe(false);
    expect(await settlesSoon(durable)).toBe(false);
    disk.release();
    expect(await durable).toBe(true);
  });
});

describe('a delivery', () => {
  it('waits for no write: its hand-out record rides the next group commit', async () => {
    const { queue, clock, disk, received } = await queueWithDue(1);
    await queue.scheduleMany([1, 2].map((n) => ({ topic: 't', payload: n, delayMs: 10 })));
    disk.hold();
    // Something waits on the held fsync (an ack's commit, with the hand-out of the first).
    void queue.ack(received[0].receipt);
    await waitFor(() => disk.disk.waiting > 0);
    await advance(clock, 20, 10, queue);
    const next = queue.receive('t', { max: 10 });
    expect(await settlesSoon(next)).toBe(true);
    expect(await next).toHaveLength(2);
    disk.release();
  });
});

describe('a write that fails after its ack resolved', () => {
  it('goes to onFault once, and the store stops taking changes', async () => {
    const { queue, disk, faults, received } = await queueWithDue(3);
    disk.disk.failing = true;
    expect(await queue.ack(received[0].receipt)).toBe(true);
    expect(await queue.ack(received[1].receipt)).toBe(true);
    await waitFor(() => faults.some((f) => f.level === 'error'));
    const told = faults.filter((f) => f.code === 'ERR_TICKWHEEL_IO' && f.level === 'error');
    expect(told).toHaveLength(1);
    expect(told[0].message).toMatch(/could not be written/);
    await expect(queue.schedule({ topic: 't', payload: 'x', delayMs: 10 })).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_IO',
    });
    expect((await queue.stats()).store?.stopped).toBe(1);
  });
});

describe('the checked facade', () => {
  it('refuses a durable that is not a boolean, and unknown ack options', async () => {
    const { queue, received } = await queueWithDue(1);
    const bad = { durable: 'yes' } as unknown as { durable: boolean };
    await expect(queue.ack(received[0].receipt, bad)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    await expect(queue.ackMany([received[0].receipt], bad)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    await expect(queue.nack(received[0].receipt, bad)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    const unknown = { durible: true } as unknown as { durable: boolean };
    await expect(queue.ack(received[0].receipt, unknown)).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
    });
    await expect(
      DelayQueue.open({ dir: tempDir(), durableAcks: 1 as unknown as boolean }),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
  });
});
