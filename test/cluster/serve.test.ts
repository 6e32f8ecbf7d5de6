/**
 * `tickwheel serve --redis` as users run it: three server processes over a real Valkey Cluster
 * of 3 primaries + 3 replicas, one queue. A message scheduled over HTTP on one server is
 * received on another, on time; every server shows the same nodes and partitions in
 * /v1/dashboard and /metrics; a server killed with SIGKILL has its partitions taken over and
 * its scheduled messages delivered by the others. And a plain `node` script that opens a queue
 * on Valkey, schedules, receives and closes, exits by itself.
 */

import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TickwheelClient } from '../../src/client/index.js';
import { startServer, type ServerProcess } from '../server/process.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startCluster } from '../../scripts/valkey.mjs';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const tempDir = useTempDirs('redis-script');

const PARTITIONS = 12;
const DIST = new URL('../../dist/delay-queue.js', import.meta.url).href;

describe.runIf(installed('valkey-server'))('tickwheel serve --redis on a Valkey Cluster', () => {
  let cluster: { urls: string[]; stop(): Promise<void> };
  const servers = new Map<string, ServerProcess>();
  const clients = new Map<string, TickwheelClient>();

  const serve = async (node: string) => {
    const server = await startServer(
      [
        '--redis',
        cluster.urls.join(','),
        '--queue',
        'served',
        '--partitions',
        String(PARTITIONS),
        '--node-id',
        node,
      ],
      { timeoutMs: 30_000 },
    );
    servers.set(node, server);
    clients.set(node, new TickwheelClient({ url: server.url }));
    return server;
  };

  /** /v1/dashboard's cluster part as `server` sees it. */
  async function clusterOf(node: string) {
    const response = await fetch(`${servers.get(node)!.url}/v1/dashboard`);
    const body = (await response.json()) as {
      cluster: { nodes: Array<{ node: string; partitions: number[]; alive: boolean }> };
    };
    return body.cluster;
  }

  /**
   * Waits until the live nodes own every partition between them and are the nodes it sees alive,
   * as `node` sees it (a node's view of the members follows its heartbeats, of the leases its
   * lease rounds: one may come a round after the other).
   */
  async function spread(node: string, live: string[], timeoutMs = 20_000) {
    const want = [...live].sort().join();
    return waitFor(
      async () => {
        const { nodes } = await clusterOf(node);
        const owning = nodes.filter((n) => n.partitions.length > 0).map((n) => n.node);
        const alive = nodes.filter((n) => n.alive).map((n) => n.node);
        const owned = nodes.reduce(
          (sum, n) => sum + (n.node === '(none)' ? 0 : n.partitions.length),
          0,
        );
        if (owned === PARTITIONS && owning.sort().join() === want && alive.sort().join() === want)
          return nodes;
        throw new Error(`partitions not spread: ${JSON.stringify(nodes)}`);
      },
      { timeoutMs, intervalMs: 200 },
    );
  }

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicas: 1 });
  }, 60_000);

  afterAll(async () => {
    for (const client of clients.values()) await client.close().catch(() => {});
    for (const server of servers.values()) await server.kill();
    await cluster?.stop();
  });

  it('starts three servers that share the partitions and say so', async () => {
    const started = await Promise.all(['srv-a', 'srv-b', 'srv-c'].map(serve));
    for (const server of started) {
      expect(server.stdout()).toMatch(/queue served on redis:\/\/127\.0\.0\.1:\d+/);
      expect(server.stdout()).toMatch(/joined as node srv-[abc]/);
    }
    const nodes = await spread('srv-a', ['srv-a', 'srv-b', 'srv-c']);
    expect(nodes.filter((n) => n.alive).map((n) => n.node)).toEqual(['srv-a', 'srv-b', 'srv-c']);
    const metrics = await (await fetch(`${servers.get('srv-b')!.url}/metrics`)).text();
    expect(metrics).toMatch(/^tickwheel_cluster_nodes 3$/m);
    const perNode = [
      ...metrics.matchAll(/^tickwheel_cluster_partitions\{node="srv-[abc]"\} (\d+)$/gm),
    ];
    expect(perNode.reduce((sum, m) => sum + Number(m[1]), 0)).toBe(PARTITIONS);
  }, 60_000);

  it('delivers on one server what another scheduled, on time and never early', async () => {
    const a = clients.get('srv-a')!;
    const b = clients.get('srv-b')!;
    const start = Date.now();
    const sent = await a.scheduleMany(
      Array.from({ length: 60 }, (_, i) => ({
        topic: 'orders',
        id: `o-${i}`,
        payload: { i },
        deliverAt: start + 1_000 + i * 10,
      })),
    );
    expect(sent).toHaveLength(60);
    expect(await b.get('o-7')).toMatchObject({ status: 'scheduled', deliverAt: start + 1_070 });
    const got = new Map<string, number>();
    const until = Date.now() + 15_000;
    while (got.size < 60 && Date.now() < until) {
      for (const message of await b.receive('orders', { max: 50, waitMs: 1_000 })) {
        const at = Date.now();
        expect(at).toBeGreaterThanOrEqual(message.deliverAt);
        expect(message.payload).toEqual({ i: Number(message.id.slice(2)) });
        got.set(message.id, at);
        expect(await b.ack(message.receipt)).toBe(true);
      }
    }
    expect(got.size).toBe(60);
  }, 30_000);

  it('takes over a server killed with SIGKILL: its partitions move, its messages arrive', async () => {
    const a = clients.get('srv-a')!;
    const start = Date.now();
    await a.scheduleMany(
      Array.from({ length: 120 }, (_, i) => ({
        topic: 'after-kill',
        id: `k-${i}`,
        payload: i,
        deliverAt: start + 1_500 + (i % 20) * 25,
      })),
    );
    const victim = servers.get('srv-c')!;
    await victim.kill();
    expect((await victim.exited).signal).toBe('SIGKILL');
    const nodes = await spread('srv-a', ['srv-a', 'srv-b']);
    expect(nodes.find((n) => n.node === 'srv-c')?.alive ?? false).toBe(false);
    const b = clients.get('srv-b')!;
    const got = new Set<string>();
    const until = Date.now() + 20_000;
    while (got.size < 120 && Date.now() < until) {
      for (const message of await b.receive('after-kill', { max: 100, waitMs: 1_000 })) {
        expect(Date.now()).toBeGreaterThanOrEqual(message.deliverAt);
        got.add(message.id);
        await b.ack(message.receipt);
      }
    }
    expect(got.size).toBe(120);
  }, 60_000);

  it('lets a plain node script open a queue on Valkey, use it, close it and exit', async () => {
    const dir = tempDir();
    const script = join(dir, 'script.mjs');
    writeFileSync(
      script,
      `import { DelayQueue } from ${JSON.stringify(DIST)};
const queue = await DelayQueue.open({ redis: ${JSON.stringify(cluster.urls)}, queue: 'script', partitions: 4 });
const { id, deliverAt } = await queue.schedule({ topic: 'ping', payload: 'hello', delayMs: 300 });
const [message] = await queue.receive('ping', { waitMs: 10000 });
console.log(JSON.stringify({ same: message.id === id, early: Date.now() < deliverAt, payload: message.payload, acked: await queue.ack(message.receipt) }));
await queue.close();
`,
    );
    const result = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 30_000 });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({
      same: true,
      early: false,
      payload: 'hello',
      acked: true,
    });
  }, 40_000);

  it('refuses bad cluster flags with a clear message and a non-zero exit', () => {
    const cli = new URL('../../dist/cli/main.js', import.meta.url).pathname;
    const bad = spawnSync(
      process.execPath,
      [cli, 'serve', '--port', '0', '--redis', cluster.urls[0], '--durability', 'sometimes'],
      { encoding: 'utf8', timeout: 20_000 },
    );
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toMatch(/durability/);
    const nowhere = spawnSync(
      process.execPath,
      [cli, 'serve', '--port', '0', '--redis', 'redis://127.0.0.1:1'],
      { encoding: 'utf8', timeout: 40_000, env: { ...process.env } },
    );
    expect(nowhere.status).not.toBe(0);
    expect(nowhere.stderr + nowhere.stdout).toMatch(
      /could not reach Valkey\/Redis at redis:\/\/127\.0\.0\.1:1/,
    );
  }, 60_000);
});
