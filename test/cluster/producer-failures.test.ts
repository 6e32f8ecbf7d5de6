/**
 * A scheduleMany over several partitions whose write fails in one: the call settles once every
 * partition has answered, and its error names every message that was or may have been written,
 * not only the failed partition's. A driver failing one partition's calls stands in for a store
 * that stopped answering mid-batch.
 */

import { describe, expect, it } from 'vitest';
import { TickwheelOutcomeError, TickwheelUnavailableError } from '../../src/errors.js';
import type { PartitionDriver, ScheduleEntry } from '../../src/partitioned/driver.js';
import { Producer } from '../../src/partitioned/producer.js';
import { placeOf } from '../../src/partitioned/record.js';
import { checkRequest } from '../../src/queue/message.js';

const PARTITIONS = 8;

/** Fails the calls of `failing` with `error`; answers the others once the failure is out. */
function driverFailing(failing: number, error: Error) {
  let failed: () => void = () => undefined;
  const failure = new Promise<void>((resolve) => (failed = resolve));
  const written: number[] = [];
  const driver = {
    locatedRun: 128,
    schedule: async (partition: number, entries: readonly ScheduleEntry[]) => {
      if (partition === failing) {
        failed();
        throw error;
      }
      // The other partitions answer after the failure: the call must wait for them.
      await failure;
      written.push(partition);
      const where = entries
        .filter((entry) => entry.kind === 'run')
        .map(() => ({ segment: 'w1', first: 0 }));
      return { existing: [], loadedUntil: 0, where };
    },
    durable: async () => {},
  };
  return { written, driver: driver as unknown as PartitionDriver };
}

const request = (id?: string) =>
  checkRequest(
    { topic: 't', payload: 1, deliverAt: Date.now() + 60_000, ...(id ? { id } : {}) },
    Date.now(),
    1 << 20,
  );

const ids = Array.from({ length: 40 }, (_, i) => `m-${i}`);
const partitionOf = (id: string) => placeOf(id, PARTITIONS).partition;
const unavailable = () =>
  new TickwheelUnavailableError('ERR_TICKWHEEL_UNAVAILABLE', 'the store did not answer');

/** The error of a scheduleMany whose partition of ids[0] fails with `error`. */
async function failedBatch(error: Error, requests = ids.map((id) => request(id))) {
  const { written, driver } = driverFailing(partitionOf(ids[0]), error);
  const producer = new Producer(driver, {
    partitions: PARTITIONS,
    windowMs: 30_000,
    maxPayloadBytes: 1 << 20,
  });
  const err = await producer.scheduleMany(requests).catch((e: unknown) => e);
  return { err: err as TickwheelOutcomeError, written, producer };
}

describe('producer: a batch failing in one of its partitions', () => {
  it('names every id written or maybe written, and a retry with them is safe', async () => {
    const { err, written } = await failedBatch(unavailable());
    expect(err).toBeInstanceOf(TickwheelOutcomeError);
    expect(written.length).toBeGreaterThan(0);
    // Every id of the batch: those written in other partitions, and the failed partition's.
    expect([...(err.ids ?? [])].sort()).toEqual([...ids].sort());
    expect(err.retry).toBe('same-id');
  });

  it('names the written ones even when the failure itself wrote nothing', async () => {
    const refused = Object.assign(new Error('refused'), { code: 'ERR_TICKWHEEL_INVALID_STATE' });
    const { err } = await failedBatch(refused);
    expect(err).toBeInstanceOf(TickwheelOutcomeError);
    const others = ids.filter((id) => partitionOf(id) !== partitionOf(ids[0]));
    expect([...(err.ids ?? [])].sort()).toEqual(others.sort());
    // Only the partition that failed saw its messages refused: the rest are written.
    expect(err.code).toBe('ERR_TICKWHEEL_INVALID_STATE');
  });

  it('with messages without ids written, says a retry must look them up first', async () => {
    const { err } = await failedBatch(unavailable(), [request(ids[0]), request(), request()]);
    expect(err).toBeInstanceOf(TickwheelOutcomeError);
    expect(err.ids).toContain(ids[0]);
    expect(err.retry).toBeUndefined();
  });

  it('rejects with the failure itself when nothing of the call was written', async () => {
    const refused = Object.assign(new Error('refused'), { code: 'ERR_TICKWHEEL_INVALID_STATE' });
    const { err } = await failedBatch(refused, [request(ids[0])]);
    expect(err).toBe(refused);
  });
});
