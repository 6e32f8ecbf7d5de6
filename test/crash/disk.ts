/**
 * Helpers for the on-disk damage and recovery tests: real data directories, the record layout
 * of log segments (see src/store/log/format.ts), and consuming a queue driven by a ManualClock.
 */

import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { ManualClock } from '../../src/index.js';
import {
  DelayQueue,
  type DelayQueueOpenOptions,
  type ReceivedMessage,
} from '../../src/delay-queue.js';
import { RECORD_HEADER_BYTES, RECORD_MAGIC } from '../../src/store/log/index.js';
import { decodeSchedule, SCHEDULE } from '../../src/store/file/records.js';
import { afterEach } from 'vitest';
import { advance } from '../queue/harness.js';
import { useTempDirs } from '../support/temp-dir.js';

export const TOPIC = 'disk';

/**
 * Queues a test file opens: `track(open(...))` registers one, `close(queue)` closes it early;
 * after each test every queue still open is closed (before its temp dirs are removed).
 */
export function trackQueues(): {
  track(queue: Promise<DelayQueue>): Promise<DelayQueue>;
  close(queue: DelayQueue): Promise<void>;
} {
  const open: DelayQueue[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((queue) => queue.close().catch(() => undefined)));
  });
  return {
    async track(queue) {
      const q = await queue;
      open.push(q);
      return q;
    },
    async close(queue) {
      open.splice(open.indexOf(queue), 1);
      await queue.close();
    },
  };
}

/** A scratch directory, removed after its test (or after the file's last test). */
export const tempDir = useTempDirs('disk');

export function openQueue(
  dir: string,
  clock: ManualClock,
  options: Partial<DelayQueueOpenOptions> = {},
): Promise<DelayQueue> {
  return DelayQueue.open({
    dir,
    clock,
    horizonMs: 1000,
    windowMs: 500,
    fsync: 'never',
    checkpointIntervalMs: 1_000_000,
    ...options,
  });
}

/** Segment files of a data directory, oldest first, as full paths. */
export function segmentFiles(dir: string): string[] {
  const logDir = join(dir, 'log');
  return readdirSync(logDir)
    .filter((name) => /^\d{10}\.seg$/.test(name))
    .sort()
    .map((name) => join(logDir, name));
}

export function indexFiles(dir: string): string[] {
  const indexDir = join(dir, 'index');
  return readdirSync(indexDir)
    .filter((name) => name.endsWith('.idx'))
    .sort((a, b) => Number.parseInt(a, 10) - Number.parseInt(b, 10))
    .map((name) => join(indexDir, name));
}

export interface SegmentRecord {
  /** Byte offset of the record's header in its segment file. */
  offset: number;
  /** Header plus body. */
  size: number;
  type: number;
  /** The message id, for SCHEDULE records. */
  id: string | undefined;
}

/** The records of an intact segment file, in order. */
export function segmentRecords(file: string): SegmentRecord[] {
  const bytes = readFileSync(file);
  const records: SegmentRecord[] = [];
  let offset = 0;
  while (offset < bytes.length) {
    if (bytes[offset] !== RECORD_MAGIC) throw new Error(`${file}: no record at byte ${offset}`);
    const type = bytes[offset + 1];
    const length = bytes.readUInt32LE(offset + 2);
    const body = bytes.subarray(
      offset + RECORD_HEADER_BYTES,
      offset + RECORD_HEADER_BYTES + length,
    );
    records.push({
      offset,
      size: RECORD_HEADER_BYTES + length,
      type,
      id: type === SCHEDULE ? decodeSchedule(body).id : undefined,
    });
    offset += RECORD_HEADER_BYTES + length;
  }
  return records;
}

/**
 * Advances the clock by `ms` in steps, receiving and acking everything that comes due.
 * Returns every delivery, with the clock's time when it was received.
 */
export async function consume(
  queue: DelayQueue,
  clock: ManualClock,
  ms: number,
  step = 100,
): Promise<Array<ReceivedMessage & { receivedAt: number }>> {
  const got: Array<ReceivedMessage & { receivedAt: number }> = [];
  const take = async () => {
    for (;;) {
      const batch = await queue.receive(TOPIC, { max: 1000 });
      if (batch.length === 0) return;
      for (const message of batch) {
        got.push({ ...message, receivedAt: clock.now() });
        await queue.ack(message.receipt);
      }
    }
  };
  await take();
  for (let left = ms; left > 0; left -= step) {
    await advance(clock, Math.min(step, left), step, queue);
    await take();
  }
  return got;
}
