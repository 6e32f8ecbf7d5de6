/**
 * A partition lease lost on Valkey/Redis is a fault with its code in the log of `tickwheel
 * serve --redis` (src/queue/faults.ts, src/server/logging.ts): a server process stalled
 * (SIGSTOP) until another node has taken its partitions over finds, when it runs again, that
 * its leases ran out, and says so as a JSON line with ERR_TICKWHEEL_LEASE_LOST.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import type { QueueFault } from '../../src/queue/faults.js';
import { startServer, type ServerProcess } from '../server/process.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startServer as startValkey } from '../../scripts/valkey.mjs';
import { nodeOf } from './checking.js';
import { waitFor } from '../support/wait-for.js';

const PARTITIONS = 4;

describe.runIf(installed('valkey-server'))('a lease lost by a stalled server', () => {
  let valkey: { url: string; stop(): Promise<void> };
  let server: ServerProcess | undefined;
  let other: DelayQueue | undefined;

  beforeAll(async () => {
    valkey = await startValkey();
  }, 30_000);

  afterAll(async () => {
    if (server !== undefined) {
      server.child.kill('SIGCONT');
      await server.kill();
    }
    await other?.close().catch(() => undefined);
    await valkey?.stop();
  });

  it('is logged with its code, node and partition once the server runs again', async () => {
    server = await startServer(
      [
        '--redis',
        valkey.url,
        '--queue',
        'leases',
        '--partitions',
        String(PARTITIONS),
        '--node-id',
        'stalled',
      ],
      { timeoutMs: 30_000 },
    );
    const faults: QueueFault[] = [];
    other = await DelayQueue.open({
      redis: valkey.url,
      queue: 'leases',
      partitions: PARTITIONS,
      nodeId: 'other',
      onFault: (fault) => faults.push(fault),
    });
    const owned = () => nodeOf(other!).ownedPartitions().length;
    // Both own some: the server has leases to lose.
    await waitFor(() => owned() > 0 && owned() < PARTITIONS, { timeoutMs: 20_000 });

    server.child.kill('SIGSTOP');
    await waitFor(() => owned() === PARTITIONS, { timeoutMs: 30_000 });
    server.child.kill('SIGCONT');
    await waitFor(() => server!.stdout().includes('ERR_TICKWHEEL_LEASE_LOST'), {
      timeoutMs: 20_000,
    });

    const lines = server
      .stdout()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const lost = lines.filter((line) => line.code === 'ERR_TICKWHEEL_LEASE_LOST');
    expect(lost.length).toBeGreaterThan(0);
    for (const line of lost) {
      expect(line).toMatchObject({ level: 40, node: 'stalled' });
      expect(line.partition).toEqual(expect.any(Number));
      expect(['expired', 'refused', 'fenced']).toContain(line.reason);
      expect(line.msg).toMatch(/^node stalled lost the lease of partition \d+/);
    }
    // The node that took them over lost none.
    expect(faults.filter((fault) => fault.code === 'ERR_TICKWHEEL_LEASE_LOST')).toEqual([]);
  }, 120_000);
});
