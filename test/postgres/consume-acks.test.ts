/**
 * consume()'s acks on PostgreSQL, which nobody waits for, go out together at most every 10 ms
 * (each call has a fixed price; back to back they carried ~1.5 acks a call at 1,000 deliveries
 * a second); every message is still acked once, none handed out again. queue.ack() is answered
 * by its own call.
 */

import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import { PostgresDriver } from '../../src/postgres/driver.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled, startPostgres } from '../../scripts/postgres.mjs';
import { waitFor } from '../support/wait-for.js';
import type { PostgresServer } from './with-postgres.js';

/** The ackMany calls made while `body` runs: when each started and how many acks it carried. */
function watchAckCalls(): { calls: Array<{ at: number; acks: number }>; restore(): void } {
  const calls: Array<{ at: number; acks: number }> = [];
  const original = PostgresDriver.prototype.ackMany;
  PostgresDriver.prototype.ackMany = function (this: PostgresDriver, batches) {
    const acks = batches.reduce((sum, call) => sum + call.deliveries.length, 0);
    calls.push({ at: performance.now(), acks });
    return original.call(this, batches);
  };
  return { calls, restore: () => (PostgresDriver.prototype.ackMany = original) };
}

describe.runIf(postgresInstalled())('consume() acks on PostgreSQL', () => {
  let server: PostgresServer;
  beforeAll(async () => {
    server = (await startPostgres()) as PostgresServer;
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('go out together, each message acked once', async () => {
    const queue = await DelayQueue.open({ postgres: server.url, queue: 'quiet_acks' });
    onTestFinished(() => queue.close());
    const total = 400;
    // Due over ~400 ms, so that acks come one by one rather than in a few large turns.
    const start = Date.now() + 300;
    await queue.scheduleMany(
      Array.from({ length: total }, (_, n) => ({
        topic: 't',
        payload: { n },
        deliverAt: start + n,
      })),
    );
    const watch = watchAckCalls();
    onTestFinished(() => watch.restore());
    const seen = new Map<number, number>();
    const consumer = queue.consume(
      't',
      (message) => {
        const { n } = message.payload as { n: number };
        seen.set(n, (seen.get(n) ?? 0) + 1);
      },
      { concurrency: 20 },
    );
    onTestFinished(() => consumer.close());
    await waitFor(() => watch.calls.reduce((sum, call) => sum + call.acks, 0) === total, {
      timeoutMs: 30_000,
    });
    await consumer.close();
    expect(seen.size).toBe(total);
    expect([...seen.values()].every((times) => times === 1)).toBe(true);
    // Together: far fewer calls than acks (the 10 ms between calls is the gate's own timing,
    // not asserted here: a loaded machine observes calls later than the gate made them).
    expect(watch.calls.length).toBeLessThan(total / 2);
    // Nothing left in flight or ready: every ack took.
    await waitFor(async () => (await queue.stats()).topics.t === undefined);
  }, 60_000);

  it('answers each queue.ack() for its own receipt', async () => {
    const queue = await DelayQueue.open({ postgres: server.url, queue: 'direct_acks' });
    onTestFinished(() => queue.close());
    await queue.scheduleMany(Array.from({ length: 5 }, (_, n) => ({ topic: 't', payload: { n } })));
    const got = [];
    while (got.length < 5) got.push(...(await queue.receive('t', { max: 5, waitMs: 5_000 })));
    const watch = watchAckCalls();
    onTestFinished(() => watch.restore());
    for (const message of got) expect(await queue.ack(message.receipt)).toBe(true);
    // An ack of a receipt already acked is answered false, not held back.
    expect(await queue.ack(got[0].receipt)).toBe(false);
    expect(watch.calls.map((call) => call.acks)).toEqual([1, 1, 1, 1, 1, 1]);
  }, 60_000);
});
