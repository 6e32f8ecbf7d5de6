/**
 * `tickwheel serve` starting, as people and orchestrators see it (real processes): what it
 * prints with the log options (test/server/logs.test.ts has the rest), the port answering 503
 * while a big data directory is recovered, and a slow-loris client cut at the documented 30 s.
 */

import { mkdirSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import type { StatsResponse } from '../../src/protocol/wire.js';
import { LISTENING, runCli, useServers } from './process.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const dataDir = useTempDirs('startup');

const serve = useServers();

describe('what tickwheel serve prints', () => {
  it.each([
    ['no log options (stdout piped)', [], {}],
    ['--log-level info', ['--log-level', 'info'], {}],
    ['TICKWHEEL_LOG_LEVEL=debug', [], { TICKWHEEL_LOG_LEVEL: 'debug' }],
    ['--log-format json and a token', ['--log-format', 'json', '--token', 'tok'], {}],
  ] as Array<[string, string[], Record<string, string>]>)(
    'with %s: JSON lines only on stdout, exactly one listening line',
    async (_what, args, env) => {
      const server = await serve(['--dir', dataDir(), ...args], { env });
      // A request, so that request logs are among the lines checked.
      expect((await fetch(`${server.url}/v1/stats`)).status).toBe(
        args.includes('--token') ? 401 : 200,
      );
      await waitFor(() => server.stdout().includes('/v1/stats'));
      server.child.kill('SIGTERM');
      await server.exited;
      const lines = server.stdout().trim().split('\n');
      const records = lines.map((line) => {
        try {
          return JSON.parse(line) as { msg?: string; level?: number };
        } catch {
          throw new Error(`not a JSON line: ${line}`);
        }
      });
      // Ours, and none of Fastify's own "Server listening at" lines (one per address).
      expect(records.filter((r) => /listening (on|at) http/i.test(r.msg ?? ''))).toHaveLength(1);
      const listening = records.find((r) => LISTENING.test(r.msg ?? '')) as { url?: string };
      expect(listening.url?.replace('0.0.0.0', '127.0.0.1')).toBe(server.url);
      expect(records.some((r) => /dashboard/.test(JSON.stringify(r)))).toBe(true);
      expect(records.some((r) => /recovered/.test(r.msg ?? ''))).toBe(true);
      expect(server.stderr()).toBe('');
    },
  );
});

describe('recovery of a big data directory', () => {
  it('listens first: 503 recovering on /healthz and every route, then serves', async () => {
    const dir = dataDir();
    const queue = await DelayQueue.open({ dir, fsync: 'never' });
    const now = Date.now();
    for (let i = 0; i < 50_000; i += 10_000) {
      await queue.scheduleMany(
        Array.from({ length: 10_000 }, (_, j) => ({
          topic: `t${j % 4}`,
          payload: { n: i + j },
          deliverAt: now + 500 + ((i + j) % 1000),
        })),
      );
    }
    await queue.close();

    const started = performance.now();
    const server = await serve(['--dir', dir], {
      until: /until the queue is open, (http:\/\/\S+) answers 503/,
      timeoutMs: 60_000,
    });
    const health = await fetch(`${server.url}/healthz`);
    expect(health.status).toBe(503);
    expect(await health.json()).toMatchObject({ status: 'recovering' });
    const stats = await fetch(`${server.url}/v1/stats`);
    expect(stats.status).toBe(503);
    expect(stats.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(((await stats.json()) as { error: { code: string } }).error.code).toBe(
      'ERR_TICKWHEEL_RECOVERING',
    );
    const receive = await fetch(`${server.url}/v1/topics/t0/receive`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(receive.status).toBe(503);
    expect(server.stdout()).not.toMatch(LISTENING);

    await waitFor(() => LISTENING.test(server.stdout()), { timeoutMs: 60_000 });
    expect(server.stdout()).toMatch(/recovered 50000 live messages/);
    const ok = await fetch(`${server.url}/healthz`);
    expect(ok.status).toBe(200);
    const stats2 = (await (await fetch(`${server.url}/v1/stats`)).json()) as StatsResponse;
    expect(stats2.store?.live).toBe(50_000);
    // The port was open well before the queue: that is the point.
    expect(performance.now() - started).toBeGreaterThan(0);
  }, 120_000);
});

describe('a recovery that fails', () => {
  it('exits 1 with the error, after answering 503 meanwhile', async () => {
    const dir = dataDir();
    const queue = await DelayQueue.open({ dir, fsync: 'never' });
    await queue.schedule({ topic: 't', payload: 1, delayMs: 60_000 });
    await queue.close();
    // Recovery reads (and replaces) the snapshot: a directory in its place makes it fail.
    rmSync(join(dir, 'snapshot.bin'), { force: true });
    mkdirSync(join(dir, 'snapshot.bin'));
    const result = await runCli(['serve', '--dir', dir, '--port', '0']);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/until the queue is open, http:\/\/127\.0\.0\.1:\d+ answers 503/);
    expect(result.stdout).not.toMatch(LISTENING);
    expect(result.stderr).toMatch(/^tickwheel: .*EISDIR/m);
  });
});

describe('a slow-loris client', () => {
  it('is cut at the documented 30 s (not 60) by the default server', async () => {
    const server = await serve(['--dir', dataDir()]);
    const { port } = new URL(server.url);
    const socket = connect(Number(port), '127.0.0.1');
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('connect', resolve));
    const started = performance.now();
    const head = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ';
    let sent = 0;
    const timer = setInterval(() => {
      if (socket.writable) socket.write(sent < head.length ? head[sent++] : 'a');
    }, 500);
    let answer = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (answer += chunk));
    const elapsed = await new Promise<number>((resolve) =>
      socket.on('close', () => {
        clearInterval(timer);
        resolve(performance.now() - started);
      }),
    );
    expect(elapsed).toBeGreaterThan(29_000);
    expect(elapsed).toBeLessThan(34_000);
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
  }, 70_000);
});
