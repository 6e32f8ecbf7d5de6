/**
 * Messages without ids on PostgreSQL go to one partition in runs of the driver's locatedRun
 * (1,024): a batch of a thousand is one or two tw_schedule calls, not one per 128 messages. The
 * partition of each is in its located id, `@<partition>.<segment>.<index>.<tag>`; they are
 * delivered like any others.
 */

import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
import { DelayQueue } from '../../src/delay-queue.js';
import { parseLocated } from '../../src/partitioned/record.js';
import { waitFor } from '../support/wait-for.js';
import { withPostgres } from './with-postgres.js';

describe.runIf(postgresInstalled())('PostgreSQL: messages without ids', () => {
  const server = withPostgres();

  it('sends a batch of 1,000 to at most two of 64 partitions, and delivers every one', async () => {
    const queue = await DelayQueue.open({ postgres: server.url, queue: 'runs', partitions: 64 });
    try {
      const deliverAt = Date.now() + 500;
      const made = await queue.scheduleMany(
        Array.from({ length: 1_000 }, (_, n) => ({ topic: 'runs', payload: { n }, deliverAt })),
      );
      const partitions = new Set(made.map(({ id }) => parseLocated(id)?.partition));
      expect(partitions.has(undefined)).toBe(false);
      expect(partitions.size).toBeLessThanOrEqual(2);

      const seen = new Set<number>();
      let early = 0;
      const consumer = queue.consume('runs', (message) => {
        if (Date.now() < message.deliverAt) early++;
        seen.add((message.payload as { n: number }).n);
      });
      try {
        await waitFor(() => seen.size === 1_000, { timeoutMs: 30_000, what: '1,000 deliveries' });
      } finally {
        await consumer.close();
      }
      expect(early).toBe(0);
    } finally {
      await queue.close();
    }
  });
});
