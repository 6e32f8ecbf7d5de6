/**
 * A node killed with SIGKILL, in a process of its own, on a real Valkey Cluster: the other
 * nodes take its partitions over once its leases run out, and every message still arrives,
 * none early, the killed node's partitions resuming within 3 s of the kill (lease 1 s here).
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import { Valkey } from '../../src/valkey/connection.js';
import { metaKey } from '../../src/cluster/keys.js';
import { placeOf } from '../../src/partitioned/record.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startCluster } from '../../scripts/valkey.mjs';
import { waitFor } from '../support/wait-for.js';

const PARTITIONS = 16;
const FIXTURE = join(import.meta.dirname, 'fixtures/node.mjs');

describe.runIf(installed('valkey-server'))('a cluster node killed with SIGKILL', () => {
  let cluster: { urls: string[]; stop(): Promise<void> };
  let survivor: DelayQueue;
  const children: ChildProcess[] = [];
  const errors: unknown[] = [];

  function spawnNode(nodeId: string): Promise<{ child: ChildProcess; owned: () => number[] }> {
    const child = spawn(
      process.execPath,
      [FIXTURE, nodeId, cluster.urls.join(','), 'failover', String(PARTITIONS)],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(child);
    let owned: number[] = [];
    let out = '';
    return new Promise((resolve, reject) => {
      child.stdout!.on('data', (chunk: Buffer) => {
        out += chunk;
        const lines = out.split('\n');
        out = lines.pop() ?? '';
        for (const line of lines) {
          if (line === 'ready') resolve({ child, owned: () => owned });
          if (line.startsWith('owned ')) {
            owned = line.slice(6) === '' ? [] : line.slice(6).split(',').map(Number);
          }
        }
      });
      child.stderr!.resume();
      child.once('exit', (code) => reject(new Error(`${nodeId} exited with ${code}`)));
    });
  }

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicas: 1 });
  }, 60_000);

  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await survivor?.close();
    await cluster?.stop();
  });

  it('resumes the killed node’s partitions within 3 s, losing nothing, delivering nothing early', async () => {
    const victim = await spawnNode('victim');
    survivor = await DelayQueue.open({
      redis: cluster.urls,
      queue: 'failover',
      partitions: PARTITIONS,
      windowMs: 1_000,
      horizonMs: 2_000,
      leaseMs: 1_000,
      durability: 'replicated',
      nodeId: 'survivor',
      onError: (err) => errors.push(err),
    });
    // Wait until the victim owns some partitions.
    await waitFor(() => victim.owned().length > 0);
    const victimsPartitions = new Set(victim.owned());
    expect(victimsPartitions.size).toBeGreaterThan(0);

    const start = Date.now();
    const sent = await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        survivor.schedule({
          topic: 'pay',
          id: `pay-${i}`,
          payload: i,
          deliverAt: start + 2_000 + (i % 100) * 20,
        }),
      ),
    );
    const onVictim = sent.filter((m) => victimsPartitions.has(placeOf(m.id, PARTITIONS).partition));
    expect(onVictim.length).toBeGreaterThan(0);
    // Killed once it has taken the windows of its first messages into its wheel.
    const firstDue = Math.min(...onVictim.map((m) => m.deliverAt));
    const valkey = await Valkey.connect(cluster.urls);
    try {
      await waitFor(async () => {
        for (const partition of victimsPartitions) {
          const meta = metaKey('failover', partition);
          if (!(Number(await valkey.command(meta, ['HGET', meta, 'loadedUntil'])) > firstDue)) {
            return false;
          }
        }
        return true;
      });
    } finally {
      await valkey.close();
    }
    const killedAt = Date.now();
    victim.child.kill('SIGKILL');

    const due = new Map(sent.map((m) => [m.id, m.deliverAt]));
    const seen = new Map<string, number>();
    while (seen.size < sent.length && Date.now() < start + 20_000) {
      for (const m of await survivor.receive('pay', { max: 100, waitMs: 200 })) {
        seen.set(m.id, Date.now());
        await survivor.ack(m.receipt);
      }
    }
    expect(seen.size).toBe(sent.length);
    for (const [id, at] of seen) expect(at, `${id} early`).toBeGreaterThanOrEqual(due.get(id)!);
    // The killed node's messages fell due after the kill. Each arrives by
    // the later of its due time and 3 s after the kill (plus a little for the consumer's poll).
    expect(onVictim.every((m) => m.deliverAt > killedAt)).toBe(true);
    const worst = Math.max(
      ...onVictim.map((m) => seen.get(m.id)! - Math.max(m.deliverAt, killedAt + 3_000)),
    );
    const first = Math.min(...onVictim.map((m) => seen.get(m.id)!)) - killedAt;
    console.log(
      `killed node's partitions: first delivery ${first} ms after the kill; ` +
        `worst ${worst} ms past max(due, kill + 3 s)`,
    );
    // The 3 s is the contract; the slack is a loaded CI machine's (466 ms was seen at load 12),
    // well under one more lease period, which a takeover that missed its first chance costs.
    expect(worst).toBeLessThan(1_000);
    expect(errors).toEqual([]);
  }, 60_000);
});
