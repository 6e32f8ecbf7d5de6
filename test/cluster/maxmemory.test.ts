/**
 * Valkey at its maxmemory (noeviction) refuses every function that may write: calls fail with
 * ERR_TICKWHEEL_UNAVAILABLE saying so (outcome none: a refused function did not run), as do
 * the node's background calls told to onError, and problem() (GET /healthz) says it; all heal
 * once memory is given back. A real
 * valkey-server.
 */

import { afterAll, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { cli, installed, startServer } from '../../scripts/valkey.mjs';
import { waitFor } from '../support/wait-for.js';

const closers: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

describe.runIf(installed('valkey-server'))('Valkey at its maxmemory', () => {
  it('refuses writes with a named error, and heals once memory is given back', async () => {
    const server = (await startServer()) as { port: number; url: string; stop(): Promise<void> };
    closers.push(() => server.stop());
    const errors: unknown[] = [];
    const queue = await DelayQueue.open({
      redis: server.url,
      queue: 'oom',
      onError: (err) => errors.push(err),
    });
    closers.push(() => queue.close());
    await queue.schedule({ topic: 't', payload: 'before' });
    const used = Number(
      /used_memory:(\d+)/.exec(cli('valkey-server', server.port, 'INFO', 'memory'))?.[1],
    );
    cli('valkey-server', server.port, 'CONFIG', 'SET', 'maxmemory', String(used));
    const err = (await queue
      .schedule({ topic: 't', payload: 'x'.repeat(100_000) })
      .catch((e: unknown) => e)) as Error & { code?: string; outcome?: string };
    expect(err.code).toBe('ERR_TICKWHEEL_UNAVAILABLE');
    expect(err.outcome).toBe('none');
    expect(err.message).toMatch(/is at its maxmemory and refuses writes: OOM/);
    // GET /healthz says so (503) while the server stays full: the owner's lease renewals are
    // refused too, and keep the refusal fresh.
    await waitFor(async () => /maxmemory and refuses writes/.test((await queue.problem()) ?? ''));
    cli('valkey-server', server.port, 'CONFIG', 'SET', 'maxmemory', '0');
    await queue.schedule({ topic: 't', payload: 'after' });
    const got: unknown[] = [];
    await waitFor(async () => {
      for (const m of await queue.receive('t', { max: 10, waitMs: 1_000 })) {
        got.push(m.payload);
        await queue.ack(m.receipt);
      }
      return got.length >= 2;
    });
    expect(got.sort()).toEqual(['after', 'before']);
    await waitFor(async () => (await queue.problem()) === undefined, { timeoutMs: 20_000 });
    expect(
      errors.filter((e) => !String((e as { code?: unknown }).code).startsWith('ERR_TICKWHEEL_')),
    ).toEqual([]);
  }, 60_000);
});
