/**
 * Compaction (src/store/file/compaction.ts): a few long-lived messages no longer keep the whole
 * log on disk, and a message carried forward is the same message: state, payload, dead or not,
 * its place among equal due times, after a reopen too.
 */

import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import type { MessageState } from '../../src/queue/message.js';
import { FileStore } from '../../src/store/file/file-store.js';
import { MessageLog } from '../../src/store/log/index.js';
import { RELOCATE } from '../../src/store/file/records.js';
import { segmentFiles as segmentPaths, segmentRecords } from '../crash/disk.js';
import { useClosing, useTempDirs, waitFor } from '../support/index.js';

const tempDir = useTempDirs('compaction');
const closing = useClosing();

const T0 = Date.UTC(2026, 11, 1, 12, 0, 0);
const DAY = 86_400_000;

function message(id: string, deliverAt: number, payload = `payload of ${id}`): MessageState {
  return {
    id,
    topic: 'jobs',
    deliverAt,
    attempts: 0,
    maxAttempts: 3,
    backoff: undefined,
    payloadKind: 1,
    payload: Buffer.from(payload),
    ref: 0,
  };
}

function openStore(dir: string, segmentBytes = 512): Promise<FileStore> {
  return FileStore.open({
    dir,
    fsync: 'never',
    windowMs: 1000,
    segmentBytes,
    checkpointIntervalMs: 1_000_000,
    snapshotBytes: Infinity,
  });
}

/** Messages scheduled and acked at once: log bytes that hold nothing live. */
async function churn(store: FileStore, count: number, prefix: string): Promise<void> {
  for (let i = 0; i < count; i++) {
    const m = message(`${prefix}-${i}`, T0);
    await store.add(m, true);
    await store.finish(m, 'acked');
  }
}

/**
 * A pass that only notes the oldest segment: compaction reads a segment once a pass saw it with
 * the live count it still has (it stopped draining by itself).
 */
async function notice(store: FileStore): Promise<void> {
  const before = store.stats().relocated;
  await store.checkpoint('never');
  expect(store.stats().relocated).toBe(before);
}

function segmentFiles(dir: string): number {
  return readdirSync(join(dir, 'log')).filter((name) => name.endsWith('.seg')).length;
}

describe('compaction', () => {
  it('keeps a carried message in its place among messages of the same due time', async () => {
    const dir = tempDir();
    const store = await openStore(dir);
    await store.recover(T0 + 1000, () => {});
    const due = T0 + DAY;
    await store.add(message('first', due), false);
    await churn(store, 100, 'a');
    await store.add(message('second', due), false);
    await churn(store, 100, 'b');
    await notice(store);
    // One pass carries the oldest segment's live message forward: 'first' now sits after 'second'.
    await store.checkpoint('never');
    expect(store.stats().relocated).toBe(1);
    const order: string[] = [];
    await store.loadUntil(due + 1, (m) => order.push(m.id));
    expect(order).toEqual(['first', 'second']);
    await store.close();
  });

  it('a segment whose messages are still being acked is not read until it stops draining', async () => {
    const store = await openStore(tempDir());
    await store.recover(T0 + 1000, () => {});
    const draining = [0, 1, 2, 3].map((i) => message(`d${i}`, T0 + DAY));
    for (const m of draining) await store.add(m, false);
    await store.add(message('kept', T0 + DAY), false);
    await churn(store, 100, 'a');
    await notice(store);
    for (const m of draining.slice(0, 2)) await store.finish(m, 'acked');
    await notice(store); // two of its messages ended since the last pass: still draining
    for (const m of draining.slice(2)) await store.finish(m, 'acked');
    await notice(store);
    await store.checkpoint('never'); // settled: 'kept' carried forward
    expect(store.stats().relocated).toBe(1);
    await store.checkpoint('never');
    expect(store.stats().segments).toBeLessThanOrEqual(2);
    await store.close();
  });

  it('a listing paged across a move lists each message once, in the same order', async () => {
    const store = await openStore(tempDir());
    await store.recover(T0 + 1000, () => {});
    const due = T0 + DAY;
    await store.add(message('first', due), false);
    await churn(store, 100, 'a');
    await store.add(message('second', due), false);
    const query = { topic: 'jobs', from: -Infinity, until: Infinity, limit: 1, after: undefined };
    const page = await store.listWaiting(query); // (one more than the limit: the queue's to cut)
    expect(page.items.map(({ message }) => message.id)).toEqual(['first', 'second']);
    await notice(store);
    await store.checkpoint('never'); // carries 'first' forward, past 'second'
    expect(store.stats().relocated).toBe(1);
    const after = page.items[0].key;
    const next = await store.listWaiting({ ...query, limit: 10, after });
    expect(next.items.map(({ message }) => message.id)).toEqual(['second']);
    const whole = await store.listWaiting({ ...query, limit: 10 });
    expect(whole.items.map(({ message }) => message.id)).toEqual(['first', 'second']);
    await store.close();
  });

  it('a change written with a state read before its message moved lands on the moved message', async () => {
    const dir = tempDir();
    const store = await openStore(dir);
    await store.recover(T0 + 1000, () => {});
    await store.add(message('kept', T0 + DAY), false);
    await churn(store, 100, 'a');
    const read = await store.lookup('kept');
    await notice(store);
    await store.checkpoint('never'); // carries 'kept' forward
    expect(store.stats().relocated).toBe(1);
    await store.finish(read!, 'cancelled');
    await store.checkpoint('never');
    expect(store.stats()).toMatchObject({ live: 0, segments: 1 });
    await store.close();
    const again = await openStore(dir);
    await again.recover(T0 + 1000, () => {});
    expect(await again.lookup('kept')).toBeUndefined();
    expect(again.counts().topics.size).toBe(0);
    await again.close();
  });

  it('dead letters stay in the order they died, after a reopen too', async () => {
    const dir = tempDir();
    const store = await openStore(dir);
    await store.recover(T0 + 1000, () => {});
    const letters = ['a', 'b', 'c'].map((id) => message(id, T0 + DAY));
    for (const m of letters) await store.add(m, false);
    for (const i of [2, 0, 1]) {
      const state = (await store.lookup(letters[i].id))!;
      await store.bury({ ...state, attempts: 3, lastError: `died ${state.id}` });
    }
    await churn(store, 100, 'c');
    await notice(store);
    await store.checkpoint('never'); // carries them forward, in the order they were scheduled
    await store.checkpoint('never');
    expect(store.stats()).toMatchObject({ relocated: 3, dead: 3 });
    const order = async (s: FileStore) => (await s.dead('jobs', 10)).map((m) => m.id);
    expect(await order(store)).toEqual(['c', 'a', 'b']);
    await store.close();
    const again = await openStore(dir);
    await again.recover(T0 + 1000, () => {});
    expect(await order(again)).toEqual(['c', 'a', 'b']);
    expect((await again.dead('jobs', 10)).map((m) => m.lastError)).toEqual([
      'died c',
      'died a',
      'died b',
    ]);
    await again.close();
  });

  it('messages it carried are carried on without reading their segment again, unless it holds others', async () => {
    const dir = tempDir();
    const store = await openStore(dir);
    await store.recover(T0 + 1000, () => {});
    const scans = vi.spyOn(MessageLog.prototype, 'scanClosed');
    const kept = [0, 1, 2].map((i) => message(`kept-${i}`, T0 + DAY, `kept payload ${i}`));
    for (const m of kept) await store.add(m, false);
    /** Churn and passes until the kept messages were carried `times` more times. */
    const carryOn = async (times: number) => {
      const target = store.stats().relocated! + 3 * times;
      for (let round = 0; store.stats().relocated! < target; round++) {
        expect(round, 'the kept messages were not carried on').toBeLessThan(50);
        await churn(store, 20, `c${target}-${round}`);
        await store.checkpoint('never');
      }
    };
    await carryOn(1); // read the segment that held their SCHEDULEs
    const first = scans.mock.calls.length;
    expect(first).toBeGreaterThan(0);
    await carryOn(3);
    expect(scans.mock.calls.length).toBe(first);
    // One of them moved: its RELOCATE is not its latest record any more, so the segment is read.
    const moved = (await store.lookup('kept-1'))!;
    moved.deliverAt = kept[1].deliverAt = T0 + 2 * DAY;
    await store.move(moved, false, T0 + DAY);
    await carryOn(1);
    expect(scans.mock.calls.length).toBeGreaterThan(first);
    scans.mockRestore();
    await store.close();
    const again = await openStore(dir);
    await again.recover(T0 + 1000, () => {});
    for (const [i, m] of kept.entries()) {
      const found = await again.lookup(m.id);
      expect(found).toMatchObject({ deliverAt: m.deliverAt, status: 'scheduled' });
      expect(Buffer.from(await again.payloadOf(found!)).toString()).toBe(`kept payload ${i}`);
    }
    await again.close();
  });

  it('one pass empties several segments: a log written fast still shrinks', async () => {
    const store = await openStore(tempDir());
    await store.recover(T0 + 1000, () => {});
    for (let i = 0; i < 10; i++) {
      await store.add(message(`keep-${i}`, T0 + DAY), false); // one in each of ten segments
      await churn(store, 10, `c${i}`);
    }
    await churn(store, 200, 'tail');
    const before = store.stats().segments!;
    await notice(store);
    await store.checkpoint('never');
    expect(store.stats().relocated).toBeGreaterThan(1);
    await store.checkpoint('never');
    expect(before - store.stats().segments!).toBeGreaterThan(2);
    await store.close();
  });

  it('an idle log of large live messages is not copied over and over', async () => {
    const store = await openStore(tempDir(), 4096);
    await store.recover(T0 + 1000, () => {});
    for (let i = 0; i < 4; i++) {
      await store.add(message(`big-${i}`, T0 + DAY, 'b'.repeat(3000)), false);
    }
    await churn(store, 300, 'small');
    const relocated: number[] = [];
    for (let i = 0; i < 12; i++) {
      await store.checkpoint('never');
      relocated.push(store.stats().relocated!);
    }
    // Carried while it freed the churn's segments; then nothing: copying would free nothing.
    expect(relocated[0]).toBe(0);
    expect(relocated[1]).toBeGreaterThan(0);
    expect(new Set(relocated.slice(6)).size).toBe(1);
    await store.close();
  });

  it('a segment with more live messages than one pass carries is emptied by the next passes', async () => {
    const store = await openStore(tempDir(), 1024 * 1024);
    await store.recover(T0 + 1000, () => {});
    for (let i = 0; i < 5000; i++) await store.add(message(`far-${i}`, T0 + DAY, 'f'), false);
    await churn(store, 8000, 'c');
    for (let i = 0; i < 4 && store.stats().relocated! < 5000; i++) {
      await store.checkpoint('never');
    }
    expect(store.stats().relocated).toBe(5000);
    await store.checkpoint('never');
    expect(store.stats().segments).toBeLessThanOrEqual(2);
    await store.close();
  });

  it('a damaged RELOCATE whose older records are gone: open refuses, repair drops that message by name', async () => {
    const dir = tempDir();
    const store = await openStore(dir);
    await store.recover(T0 + 1000, () => {});
    await store.add(message('damaged', T0 + DAY), false);
    await store.add(message('intact', T0 + DAY), false);
    await churn(store, 100, 'a');
    await notice(store);
    await store.checkpoint('never'); // carries both forward
    await store.checkpoint('never'); // deletes the segments they were in
    expect(store.stats()).toMatchObject({ relocated: 2, segments: 1 });
    await store.close();
    const [file] = segmentPaths(dir);
    const relocations = segmentRecords(file).filter((r) => r.type === RELOCATE);
    expect(relocations).toHaveLength(2);
    const bytes = readFileSync(file);
    bytes[relocations[0].offset + relocations[0].size - 3] ^= 0xff; // in its payload
    writeFileSync(file, bytes);

    const refused = await openStore(dir);
    await expect(refused.recover(T0 + 1000, () => {})).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_CORRUPT',
      message: expect.stringMatching(/CRC mismatch/),
    });
    await refused.close();

    const repaired = await FileStore.open({
      dir,
      windowMs: 1000,
      segmentBytes: 512,
      snapshotBytes: Infinity,
      repair: true,
    });
    const report = await repaired.recover(T0 + 1000, () => {});
    expect(report.repair?.dropped).toEqual([
      expect.objectContaining({ id: 'damaged', reason: expect.stringMatching(/damaged/) }),
    ]);
    const intact = await repaired.lookup('intact');
    expect(intact).toMatchObject({ status: 'scheduled', deliverAt: T0 + DAY });
    expect(Buffer.from(await repaired.payloadOf(intact!)).toString()).toBe('payload of intact');
    expect(await repaired.lookup('damaged')).toBeUndefined();
    await repaired.close();
  });

  it('a damaged RELOCATE that a later record points at: repair drops that message by name, and its old segment goes', async () => {
    const dir = tempDir();
    const store = await openStore(dir);
    await store.recover(T0 + 1000, () => {});
    const pin = message('pin', T0); // held by the queue: keeps the first segment
    await store.add(pin, true);
    await store.add(message('moved', T0 + DAY), false);
    await store.add(message('intact', T0 + DAY), false);
    await churn(store, 100, 'a');
    await notice(store);
    await store.checkpoint('never');
    expect(store.stats().relocated).toBe(2);
    const read = (await store.lookup('moved'))!;
    await store.move({ ...read, deliverAt: T0 + 2 * DAY }, false, read.deliverAt);
    await store.close();
    const files = segmentPaths(dir);
    const file = files.find((f) => segmentRecords(f).some((r) => r.type === RELOCATE))!;
    const [relocation] = segmentRecords(file).filter((r) => r.type === RELOCATE);
    const bytes = readFileSync(file);
    bytes[relocation.offset + relocation.size - 3] ^= 0xff;
    writeFileSync(file, bytes);

    const repaired = await FileStore.open({
      dir,
      windowMs: 1000,
      segmentBytes: 512,
      snapshotBytes: Infinity,
      checkpointIntervalMs: 1_000_000,
      repair: true,
    });
    const held: MessageState[] = [];
    const report = await repaired.recover(T0 + 1000, (m) => held.push(m));
    expect(report.repair?.dropped).toEqual([
      expect.objectContaining({ id: 'moved', reason: expect.stringMatching(/relocation record/) }),
    ]);
    expect(await repaired.lookup('moved')).toBeUndefined();
    const intact = (await repaired.lookup('intact'))!;
    expect(Buffer.from(await repaired.payloadOf(intact)).toString()).toBe('payload of intact');
    // Its old payload's segment is released: once the pin goes, the log shrinks.
    expect(held.map((m) => m.id)).toEqual(['pin']);
    await repaired.finish(held[0], 'acked');
    await churn(repaired, 100, 'b');
    await notice(repaired);
    await repaired.checkpoint('never');
    await repaired.checkpoint('never');
    expect(repaired.stats().segments).toBeLessThanOrEqual(2);
    await repaired.close();
  });

  it('frees the segments a dead letter and a far-future message kept, and they stay whole', async () => {
    const dir = tempDir();
    const open = () => DelayQueue.open({ dir, segmentBytes: 16 * 1024, checkpointIntervalMs: 20 });
    const queue = await closing(open());
    await queue.schedule({ topic: 'far', id: 'far', delayMs: 365 * DAY, payload: { far: 1 } });
    await queue.schedule({
      topic: 'poison',
      id: 'poison',
      payload: { poison: true },
      maxAttempts: 1,
    });
    const [poisoned] = await queue.receive('poison', { waitMs: 5000 });
    await queue.nack(poisoned.receipt, { reason: 'cannot parse it' });
    await waitFor(async () => (await queue.get('poison'))?.status === 'dead');
    const payload = { text: 'x'.repeat(300) };
    for (let round = 0; round < 3000; round++) {
      await queue.schedule({ topic: 'work', id: `w${round}`, payload });
      const [got] = await queue.receive('work', { waitMs: 5000 });
      await queue.ack(got.receipt);
    }
    // ~2.5 MB of churn: without compaction every segment since the first stays (over 150).
    await waitFor(() => segmentFiles(dir) <= 4, { timeoutMs: 20_000 });
    expect((await queue.stats()).store?.relocated).toBeGreaterThan(0);
    await queue.close();

    const again = await closing(open());
    const far = await again.get('far');
    expect(far).toMatchObject({ status: 'scheduled', attempts: 0, topic: 'far' });
    expect(await again.get('poison')).toMatchObject({
      status: 'dead',
      attempts: 1,
      lastError: 'cannot parse it',
    });
    expect(await again.requeue('poison')).toBe(true);
    const [back] = await again.receive('poison', { waitMs: 5000 });
    expect(back).toMatchObject({ id: 'poison', payload: { poison: true } });
    await again.ack(back.receipt);
    expect(await again.reschedule('far', { delayMs: 0 })).toBe(true);
    const [near] = await again.receive('far', { waitMs: 5000 });
    expect(near).toMatchObject({ id: 'far', payload: { far: 1 } });
    await again.ack(near.receipt);
    expect((await again.stats()).store).toMatchObject({ live: 0, dead: 0 });
  });
});
