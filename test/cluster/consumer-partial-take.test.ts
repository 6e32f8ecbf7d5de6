/**
 * A receive that asks several partitions at once, one of whose takes fails: the messages the
 * other takes put in flight are handed out, not left to wait out their visibility unseen (which
 * would also count an attempt no consumer made, a dead letter on a message's last one).
 */

import { describe, expect, it } from 'vitest';
import { Consumer } from '../../src/partitioned/consumer.js';
import type { PartitionDriver } from '../../src/partitioned/driver.js';
import { encodeRecord } from '../../src/partitioned/record.js';
import { TickwheelUnavailableError } from '../../src/errors.js';

function recordOf(id: string): Buffer {
  const fields = { id, topic: 't', maxAttempts: 1, backoff: undefined, payloadKind: 1 };
  return encodeRecord({ ...fields, payload: Buffer.from('"x"') }, 0);
}

/** A store of two partitions, both holding a ready message; partition 1's take fails. */
function storeFailingOn(failing: ReadonlySet<number>): PartitionDriver {
  const store = {
    readyPartitions: async () => [0, 1],
    take: async (partition: number) => {
      if (failing.has(partition)) {
        throw new TickwheelUnavailableError('ERR_TICKWHEEL_UNAVAILABLE', 'too many clients');
      }
      const id = `m${partition}`;
      return [{ id, attempts: 1, deliverAt: Date.now(), record: recordOf(id) }];
    },
  };
  return store as unknown as PartitionDriver;
}

function consumerOf(driver: PartitionDriver): Consumer {
  return new Consumer(driver, { partitions: 2, windowMs: 1_000, visibilityMs: 30_000 });
}

describe('a receive over several partitions', () => {
  it('hands out what the takes that answered put in flight when another take fails', async () => {
    const consumer = consumerOf(storeFailingOn(new Set([1])));
    try {
      const got = await consumer.receive('t', { max: 10 });
      expect(got.map((m) => [m.id, m.receipt])).toEqual([['m0', 'c0.1.m0']]);
    } finally {
      consumer.close();
    }
  });

  it('fails with the take error when no take answered', async () => {
    const consumer = consumerOf(storeFailingOn(new Set([0, 1])));
    try {
      await expect(consumer.receive('t', { max: 10 })).rejects.toMatchObject({
        code: 'ERR_TICKWHEEL_UNAVAILABLE',
      });
    } finally {
      consumer.close();
    }
  });
});
