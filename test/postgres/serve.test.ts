/**
 * `tickwheel serve --postgres` as users run it: two server processes on one database share one
 * queue; what one schedules, the other delivers. SIGTERM stops a node cleanly. A PostgreSQL that
 * is not there is tried until --connect-timeout, then named (ERR_TICKWHEEL_UNAVAILABLE) with its
 * password hidden; a refusal that waiting does not cure (no such database) fails at once.
 * Without pg installed, serve names the command that installs it.
 */

import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TickwheelClient } from '../../src/client/index.js';
import { runCli, useServers, type ServerProcess } from '../server/process.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled, startPostgres } from '../../scripts/postgres.mjs';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { freePort } from '../../scripts/valkey.mjs';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const tempDir = useTempDirs('serve-pg');
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const PARTITIONS = 8;

interface StatsCluster {
  node: string;
  queue: string;
  partitions: number;
  members: string[];
  durabilityOption: string;
}

describe.runIf(postgresInstalled())('tickwheel serve --postgres', () => {
  let postgres: { url: string; stop(): Promise<void> };
  const serve = useServers();

  beforeAll(async () => {
    postgres = await startPostgres();
  }, 60_000);

  afterAll(async () => {
    await postgres?.stop();
  });

  const node = (id: string, queue: string) =>
    serve(
      ['--postgres', postgres.url, '--queue', queue, '--partitions', String(PARTITIONS)].concat([
        '--node-id',
        id,
        '--pool-size',
        '4',
      ]),
      { timeoutMs: 30_000 },
    );

  async function clusterOf(server: ServerProcess): Promise<StatsCluster> {
    const response = await fetch(`${server.url}/v1/stats`);
    expect(response.status).toBe(200);
    return ((await response.json()) as { cluster: StatsCluster }).cluster;
  }

  it('runs two nodes on one database: one schedules, the other delivers', async () => {
    const [a, b] = await Promise.all([node('pg-a', 'served'), node('pg-b', 'served')]);
    for (const server of [a, b]) {
      expect(server.stdout()).toMatch(/queue served on PostgreSQL postgres:\/\/[^ ]*127\.0\.0\.1/);
      expect(server.stdout()).toMatch(/joined as node pg-[ab]/);
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    }
    await waitFor(
      async () => {
        const cluster = await clusterOf(a);
        expect(cluster).toMatchObject({ node: 'pg-a', queue: 'served', partitions: PARTITIONS });
        expect(cluster.members.sort()).toEqual(['pg-a', 'pg-b']);
        return true;
      },
      { timeoutMs: 40_000, intervalMs: 200 },
    );
    expect((await clusterOf(b)).durabilityOption).toBe('synchronous_commit');
    // The dashboard's nodes are read from the partitions' owners: both, once each holds some.
    await waitFor(
      async () => {
        const dashboard = (await (await fetch(`${b.url}/v1/dashboard`)).json()) as {
          cluster: {
            node: string;
            durability: string;
            nodes: Array<{ node: string; alive: boolean }>;
          };
        };
        expect(dashboard.cluster.node).toBe('pg-b');
        expect(dashboard.cluster.durability).toMatch(/^synchronous_commit \w+$/);
        // Partitions not yet leased show under "(none)", which is not a node.
        const live = dashboard.cluster.nodes.filter((n) => n.alive).map((n) => n.node);
        expect(live.sort()).toEqual(['pg-a', 'pg-b']);
        return true;
      },
      { timeoutMs: 40_000, intervalMs: 200 },
    );

    const sender = new TickwheelClient({ url: a.url });
    const receiver = new TickwheelClient({ url: b.url });
    const start = Date.now();
    await sender.scheduleMany(
      Array.from({ length: 20 }, (_, i) => ({
        topic: 'orders',
        id: `o-${i}`,
        payload: { i },
        deliverAt: start + 500 + i * 10,
      })),
    );
    expect(await receiver.get('o-3')).toMatchObject({ status: 'scheduled' });
    const got = new Set<string>();
    const early: string[] = [];
    await waitFor(
      async () => {
        for (const message of await receiver.receive('orders', { max: 20, waitMs: 1_000 })) {
          if (Date.now() < message.deliverAt) early.push(message.id);
          expect(message.payload).toEqual({ i: Number(message.id.slice(2)) });
          expect(await receiver.ack(message.receipt)).toBe(true);
          got.add(message.id);
        }
        expect(got.size).toBe(20);
        return true;
      },
      { timeoutMs: 20_000, intervalMs: 0 },
    );
    expect(early).toEqual([]);
    await sender.close();
    await receiver.close();
  }, 60_000);

  it('stops on SIGTERM and exits 0', async () => {
    const server = await node('pg-stop', 'stopping');
    server.child.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.stdout()).toContain('"msg":"stopped"');
  }, 60_000);

  it('keeps trying an absent PostgreSQL until --connect-timeout, then names it, password hidden', async () => {
    const port = (await freePort()) as number;
    const url = `postgres://tickwheel:s3cret@127.0.0.1:${port}/postgres`;
    const failed = await runCli(
      ['serve', '--port', '0', '--postgres', url, '--connect-timeout', '1s'],
      {},
    );
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('ERR_TICKWHEEL_UNAVAILABLE');
    expect(failed.stderr).toContain(
      `could not reach PostgreSQL at postgres://tickwheel:***@127.0.0.1:${port}/postgres ` +
        '(kept trying for 1000 ms, the connect timeout)',
    );
    expect(failed.stdout).toContain('tickwheel:***@');
    expect(failed.stdout + failed.stderr).not.toContain('s3cret');
  }, 30_000);

  it('waits at start for a PostgreSQL that comes up within --connect-timeout', async () => {
    const port = (await freePort()) as number;
    const httpPort = (await freePort()) as number;
    const url = `postgres://tickwheel@127.0.0.1:${port}/postgres`;
    const starting = serve(
      [
        '--port',
        String(httpPort),
        '--postgres',
        url,
        '--queue',
        'late',
        '--connect-timeout',
        '60s',
      ],
      { timeoutMs: 60_000 },
    );
    starting.catch(() => undefined);
    // Up, and answering 503 while it keeps trying.
    await waitFor(
      async () => (await fetch(`http://127.0.0.1:${httpPort}/v1/stats`)).status === 503,
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    const late = (await startPostgres({ port })) as typeof postgres;
    try {
      const server = await starting;
      expect(server.stdout()).toMatch(/joined as node/);
      expect((await clusterOf(server)).queue).toBe('late');
    } finally {
      await late.stop();
    }
  }, 90_000);

  it('fails at once, with what PostgreSQL said, on a database that does not exist', async () => {
    const url = postgres.url.replace(/\/postgres$/, '/no_such_db');
    const failed = await runCli(
      ['serve', '--port', '0', '--postgres', url, '--connect-timeout', '10m'],
      {},
    );
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('database "no_such_db" does not exist');
    expect(failed.stderr).toContain('ERR_TICKWHEEL_INVALID_STATE');
  }, 60_000);

  it('without pg installed, exits 1 naming the command that installs it', () => {
    // dist/ where node_modules has everything but pg.
    const dir = tempDir();
    cpSync(join(ROOT, 'dist'), join(dir, 'dist'), { recursive: true });
    cpSync(join(ROOT, 'package.json'), join(dir, 'package.json'));
    mkdirSync(join(dir, 'node_modules'));
    for (const name of readdirSync(join(ROOT, 'node_modules'))) {
      if (name === 'pg') continue;
      symlinkSync(join(ROOT, 'node_modules', name), join(dir, 'node_modules', name));
    }
    const cli = join(dir, 'dist', 'cli', 'main.js');
    const args = ['serve', '--port', '0', '--postgres', postgres.url];
    const run = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 30_000 });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('needs pg');
    expect(run.stderr).toContain('`npm install pg@8` (ERR_TICKWHEEL_MISSING_DEPENDENCY)');
  });

  it('refuses --postgres with --dir', async () => {
    const refused = await runCli(['serve', '--postgres', postgres.url, '--dir', '/tmp/x']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('option --dir cannot be used together with --postgres');
  });
});
