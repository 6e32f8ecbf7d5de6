/**
 * Errors of the node's LISTEN connection reach onError named (ERR_TICKWHEEL_*), as every other
 * background error does: a real PostgreSQL killed with SIGKILL and started again.
 */

import { afterAll, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import type { Queue } from '../../src/queue/api.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled, startPostgres } from '../../scripts/postgres.mjs';
import { waitFor } from '../support/wait-for.js';

interface Server {
  url: string;
  crash(): Promise<void>;
  restart(): Promise<void>;
  stop(): Promise<void>;
}

const closers: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

describe.skipIf(!postgresInstalled())('the LISTEN connection', () => {
  it('tells its failures to onError as named errors, and reconnects', async () => {
    const server = (await startPostgres()) as Server;
    closers.push(() => server.stop());
    const errors: Error[] = [];
    const queue: Queue = await DelayQueue.open({
      postgres: server.url,
      queue: 'listen',
      partitions: 2,
      leaseMs: 1_000,
      onError: (err) => errors.push(err as Error),
    });
    closers.push(() => queue.close());
    // A long poll: the node listens for its topic's deliveries.
    const polled = queue.receive('t', { waitMs: 60_000 }).catch(() => []);
    await server.crash();
    await waitFor(() => errors.some((err) => /LISTEN/.test(err.message)), { timeoutMs: 30_000 });
    await server.restart();
    await queue.schedule({ topic: 't', payload: 1 });
    expect((await polled).length + (await queue.receive('t', { waitMs: 30_000 })).length).toBe(1);
    expect(
      errors.filter(
        (err) => !String((err as { code?: unknown }).code).startsWith('ERR_TICKWHEEL_'),
      ),
    ).toEqual([]);
  }, 120_000);
});
