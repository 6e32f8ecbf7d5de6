/**
 * The consumer (src/partitioned/consumer.ts) and messages fired ahead of their due time (`a <at>
 * <topic>`, as a queue on PostgreSQL tells them): a long poll takes them when they are due,
 * woken then rather than by its next scan, never asking before; a take that left some for later
 * tells when (as the store's take does) and the poll takes those at their time too.
 */

import { describe, expect, it } from 'vitest';
import { Consumer } from '../../src/partitioned/consumer.js';
import type { PartitionDriver } from '../../src/partitioned/driver.js';
import { encodeRecord } from '../../src/partitioned/record.js';

const HOUR = 3_600_000;

function recordOf(id: string) {
  const fields = {
    id,
    topic: 'mail',
    maxAttempts: 3,
    backoff: { type: 'fixed' as const, delayMs: 10 },
    payloadKind: 0,
    payload: '{}',
  };
  return encodeRecord(fields, 0);
}

/**
 * A store of one partition's ready messages, each handed out once due by the caller's clock;
 * a take short of its count tells the earliest due time it left, as the PostgreSQL driver does.
 */
function storeOf(ready: Array<{ id: string; due: number }>) {
  const takes: Array<{ at: number; got: string[] }> = [];
  const driver = {
    // As PostgreSQL's: partitions with ready messages, fired ahead or not (all in partition 0).
    readyPartitions: async () => (ready.length > 0 ? [0] : []),
    take: async (partition: number, _topic: string, max: number) => {
      const now = Date.now();
      const due = ready.filter((m) => m.due <= now).slice(0, max);
      for (const m of due) ready.splice(ready.indexOf(m), 1);
      takes.push({ at: now, got: due.map((m) => m.id) });
      const later = Math.min(...ready.map((m) => m.due));
      if (due.length < max && later < Infinity) consumer.onReadyAt(partition, `${later} mail`);
      return due.map((m) => ({ id: m.id, attempts: 1, deliverAt: m.due, record: recordOf(m.id) }));
    },
  } as unknown as PartitionDriver;
  // No scan within the test: a wake that is missed shows as a receive that does not end.
  const consumer: Consumer = new Consumer(driver, {
    partitions: 4,
    windowMs: 30_000,
    visibilityMs: 30_000,
    scanMs: HOUR,
    rescanMs: HOUR,
  });
  return { consumer, takes };
}

describe('a consumer and messages fired ahead of their due time', () => {
  it('takes them at their due time, woken by the event that told it', async () => {
    const due = Date.now() + 150;
    const { consumer, takes } = storeOf([{ id: 'm-1', due }]);
    const receiving = consumer.receive('mail', { max: 10, waitMs: HOUR });
    // The first look (a scan) found nothing; then the owner's fire tells of the message.
    await new Promise((resolve) => setImmediate(resolve));
    consumer.onReadyAt(0, `${due} mail`);
    const got = await receiving;
    expect(got.map((m) => m.id)).toEqual(['m-1']);
    // At most the first look's take before the due time, none while waiting for it.
    expect(takes.filter((take) => take.at < due).length).toBeLessThanOrEqual(1);
    expect(takes.filter((take) => take.got.length > 0).map((take) => take.at >= due)).toEqual([
      true,
    ]);
    consumer.close();
  });

  it('takes those a take left for later when they are due', async () => {
    const now = Date.now();
    const ready = [
      { id: 'm-1', due: now + 100 },
      { id: 'm-2', due: now + 250 },
    ];
    const { consumer, takes } = storeOf(ready);
    const first = consumer.receive('mail', { max: 10, waitMs: HOUR });
    await new Promise((resolve) => setImmediate(resolve));
    consumer.onReadyAt(0, `${now + 100} mail`);
    expect((await first).map((m) => m.id)).toEqual(['m-1']);
    const second = await consumer.receive('mail', { max: 10, waitMs: HOUR });
    expect(second.map((m) => m.id)).toEqual(['m-2']);
    expect(takes.filter((take) => take.got.includes('m-2'))[0].at).toBeGreaterThanOrEqual(
      now + 250,
    );
    // Woken at the due times: a take or two (the first look's) before them, no more.
    expect(takes.filter((take) => take.got.length === 0).length).toBeLessThanOrEqual(2);
    consumer.close();
  });

  it('takes at their due time those fired ahead before it first looked', async () => {
    const due = Date.now() + 150;
    const { consumer, takes } = storeOf([{ id: 'm-1', due }]);
    // Fired, and told, before this node received from the topic: its first look finds them.
    consumer.onReadyAt(0, `${due} mail`);
    const got = await consumer.receive('mail', { max: 10, waitMs: HOUR });
    expect(got.map((m) => m.id)).toEqual(['m-1']);
    expect(takes.map((take) => take.got)).toEqual([[], ['m-1']]);
    expect(takes[1].at).toBeGreaterThanOrEqual(due);
    consumer.close();
  });
});
