/**
 * How the producer (src/partitioned/producer.ts) sends messages without ids: runs of the driver's
 * locatedRun to one partition, a run ended early once its records pass LOCATED_RUN_BYTES, and
 * a schedule in a caller's transaction followed by the next partition's turn. A driver that only
 * records the calls it is given stands in for the store.
 */

import { describe, expect, it } from 'vitest';
import type { PartitionDriver, ScheduleEntry } from '../../src/partitioned/driver.js';
import { LOCATED_RUN_BYTES, Producer } from '../../src/partitioned/producer.js';
import { parseLocated } from '../../src/partitioned/record.js';
import { checkRequest } from '../../src/queue/message.js';
import type { TransactionClient } from '../../src/queue/types.js';

const PARTITIONS = 64;
const MAX_PAYLOAD = 1 << 20;

interface Call {
  partition: number;
  records: number;
  bytes: number;
  inTransaction: boolean;
}

/** A driver recording each schedule call: its partition, records and their bytes. */
function recordingDriver(locatedRun: number) {
  const calls: Call[] = [];
  const answer = (partition: number, entries: readonly ScheduleEntry[], inTransaction: boolean) => {
    let records = 0;
    let bytes = 0;
    const where: Array<{ segment: string; first: number }> = [];
    for (const entry of entries) {
      if (entry.kind !== 'run') continue;
      where.push({ segment: 'w1', first: records });
      records += entry.records.length;
      for (const record of entry.records) bytes += record.length;
    }
    calls.push({ partition, records, bytes, inTransaction });
    return { existing: [], loadedUntil: 0, where };
  };
  const driver = {
    locatedRun,
    schedule: async (partition: number, entries: readonly ScheduleEntry[]) =>
      answer(partition, entries, false),
    scheduleIn: async (_client: unknown, partition: number, entries: readonly ScheduleEntry[]) =>
      answer(partition, entries, true),
    durable: async () => {},
  };
  return { calls, driver: driver as unknown as PartitionDriver };
}

const producerOver = (driver: PartitionDriver) =>
  new Producer(driver, { partitions: PARTITIONS, windowMs: 30_000, maxPayloadBytes: MAX_PAYLOAD });

const requests = (count: number, payload: unknown) => {
  const deliverAt = Date.now() + 3_600_000;
  return Array.from({ length: count }, () =>
    checkRequest({ topic: 'runs', payload, deliverAt }, Date.now(), MAX_PAYLOAD),
  );
};

describe('producer: messages without ids', () => {
  it("sends a batch of 1,000 as one or two calls when the driver's run is 1,024", async () => {
    const { calls, driver } = recordingDriver(1_024);
    const made = await producerOver(driver).scheduleMany(requests(1_000, { small: true }));
    expect(calls.length).toBeLessThanOrEqual(2);
    expect(calls.reduce((sum, call) => sum + call.records, 0)).toBe(1_000);
    const partitions = new Set(made.map(({ id }) => parseLocated(id)?.partition));
    expect([...partitions].sort()).toEqual([...new Set(calls.map((c) => c.partition))].sort());
  });

  it('ends a run once its records pass LOCATED_RUN_BYTES, whatever its count', async () => {
    const { calls, driver } = recordingDriver(1_024);
    // 40 messages of about 900 kB: 36 MB, more than two runs' worth of bytes.
    const made = await producerOver(driver).scheduleMany(requests(40, 'x'.repeat(900_000)));
    expect(made).toHaveLength(40);
    expect(calls.length).toBeGreaterThanOrEqual(3);
    for (const call of calls) expect(call.bytes).toBeLessThan(LOCATED_RUN_BYTES + MAX_PAYLOAD);
    expect(new Set(calls.map((call) => call.partition)).size).toBe(calls.length);
  });

  it("gives the next partition's turn to the messages after a caller's transaction", async () => {
    const { calls, driver } = recordingDriver(1_024);
    const producer = producerOver(driver);
    await producer.scheduleIn({} as TransactionClient, requests(3, 'in a transaction'));
    await producer.scheduleMany(requests(3, 'after it'));
    expect(calls.map((call) => call.inTransaction)).toEqual([true, false]);
    expect(calls[1].partition).not.toBe(calls[0].partition);
  });
});
