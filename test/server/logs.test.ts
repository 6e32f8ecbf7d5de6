/**
 * What `tickwheel serve` logs, read as a log pipeline reads it (a real process, stdout piped):
 * JSON lines with level, time and msg; the queue's faults as lines with their code; requests
 * without their Authorization header; --log-level and --log-format; and the short form for
 * people on a terminal (a pseudo-terminal made by `script`).
 */

import { spawn, spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, runCli, useServers } from './process.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const dataDir = useTempDirs('logs');

const serve = useServers();

interface LogRecord {
  level: number;
  time: number;
  msg: string;
  code?: string;
  req?: { method: string; url: string };
  res?: { statusCode: number };
  [field: string]: unknown;
}

/** Every line of `text` as a JSON log record; fails on a line that is not one. */
function records(text: string): LogRecord[] {
  return text
    .trim()
    .split('\n')
    .map((line) => {
      let record: LogRecord;
      try {
        record = JSON.parse(line) as LogRecord;
      } catch {
        throw new Error(`not a JSON line: ${line}`);
      }
      expect(typeof record.level, line).toBe('number');
      expect(typeof record.time, line).toBe('number');
      expect(typeof record.msg, line).toBe('string');
      return record;
    });
}

/** Deletes the data directory's LOCK and makes the queue notice (a change of topic settings). */
async function loseTheLock(url: string, dir: string, token?: string): Promise<void> {
  rmSync(join(dir, 'LOCK'));
  const answer = await fetch(`${url}/v1/topics/jobs/pause`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
    },
    body: '{}',
  });
  expect(answer.status).toBe(503);
}

describe('tickwheel serve with stdout piped', () => {
  it('logs JSON lines only: start-up, requests without their token, a fault with its code', async () => {
    const dir = dataDir();
    const token = 'a-token-that-must-never-be-logged';
    const server = await serve(['--dir', dir, '--token', token]);
    const stats = await fetch(`${server.url}/v1/stats`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(stats.status).toBe(200);
    await loseTheLock(server.url, dir, token);
    await waitFor(() => server.stdout().includes('ERR_TICKWHEEL_LOCK_LOST'));
    await waitFor(() => server.stdout().includes('/pause'));
    server.child.kill('SIGTERM');
    await server.exited;

    const lines = records(server.stdout());
    expect(lines.filter((r) => /^tickwheel listening on http/.test(r.msg))).toHaveLength(1);
    expect(lines.some((r) => /^recovered 0 live messages/.test(r.msg))).toBe(true);
    // One line per request, once answered.
    const requests = lines.filter((r) => r.req !== undefined);
    expect(requests.map((r) => [r.level, r.req?.method, r.req?.url, r.res?.statusCode])).toEqual([
      [30, 'GET', '/v1/stats', 200],
      [30, 'POST', '/v1/topics/jobs/pause', 503],
    ]);
    expect(typeof requests[0].responseTime).toBe('number');
    // The fault, as the queue told it: warn, with its code and the directory.
    const fault = lines.find((r) => r.code === 'ERR_TICKWHEEL_LOCK_LOST' && r.req === undefined);
    expect(fault).toMatchObject({ level: 40, dir });
    expect(fault?.msg).toMatch(/LOCK was deleted/);
    expect(server.stdout()).not.toContain(token);
    // Requests are logged by the fields picked for them: no header, no body.
    for (const r of requests)
      expect(Object.keys(r.req ?? {}).sort()).toEqual(['method', 'remoteAddress', 'url']);
    expect(lines.filter((r) => /authorization/i.test(JSON.stringify(r)))).toEqual([
      expect.objectContaining({ msg: expect.stringMatching(/^token required/) }),
    ]);
    expect(lines.some((r) => /SIGTERM, shutting down/.test(r.msg))).toBe(true);
    expect(server.stderr()).toBe('');
  });

  it('logs and counts a stream once it ends, as any other request', async () => {
    const server = await serve(['--dir', dataDir()]);
    const streams = [
      { method: 'GET', path: '/v1/events', route: '/v1/events' },
      { method: 'POST', path: '/v1/topics/jobs/stream', route: '/v1/topics/:topic/stream' },
    ];
    for (const { method, path } of streams) {
      const reader = new AbortController();
      const response = await fetch(`${server.url}${path}`, {
        method,
        signal: reader.signal,
        ...(method === 'POST'
          ? { headers: { 'content-type': 'application/json' }, body: '{"window":10}' }
          : {}),
      });
      expect(response.status).toBe(200);
      // The stream's first line is written at once: read it, then hang up.
      await response.body?.getReader().read();
      reader.abort();
    }
    const completed = () =>
      records(server.stdout()).filter((r) => r.msg === 'request completed' && r.req !== undefined);
    await waitFor(() => streams.every(({ path }) => completed().some((r) => r.req?.url === path)));
    for (const { method, path } of streams) {
      const line = completed().find((r) => r.req?.url === path);
      expect(line).toMatchObject({ level: 30, req: { method }, res: { statusCode: 200 } });
      expect(typeof line?.responseTime).toBe('number');
    }
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    for (const { method, route } of streams) {
      expect(metrics).toContain(
        `tickwheel_http_requests_total{method="${method}",route="${route}",status="200"} 1`,
      );
    }
    server.child.kill('SIGTERM');
    await server.exited;
  });

  it('--log-level warn hides every info line and keeps the fault', async () => {
    const dir = dataDir();
    // The only start-up line at warn: it says where the server listens.
    const server = await serve(['--dir', dir, '--host', '0.0.0.0', '--log-level', 'warn'], {
      until: /"url":"(http:\/\/[^"]+)"/,
    });
    expect((await fetch(`${server.url}/v1/stats`)).status).toBe(200);
    await loseTheLock(server.url, dir);
    await waitFor(() => server.stdout().includes('ERR_TICKWHEEL_LOCK_LOST'));
    server.child.kill('SIGTERM');
    await server.exited;
    const lines = records(server.stdout());
    expect(lines.filter((r) => r.level < 40)).toEqual([]);
    expect(lines[0].msg).toMatch(/^no token and listening on 0\.0\.0\.0/);
    expect(
      lines.filter((r) => r.code === 'ERR_TICKWHEEL_LOCK_LOST' && r.req === undefined),
    ).toEqual([expect.objectContaining({ level: 40, dir })]);
    // Besides: the failed request, logged at error by the server, with its error.
    expect(lines.slice(1).every((r) => r.code !== undefined || r.err !== undefined)).toBe(true);
  });

  it('refuses a log level it does not know, saying which it takes', async () => {
    const result = await runCli(['serve', '--dir', dataDir(), '--log-level', 'loud']);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/--log-level/);
    expect(result.stderr).toMatch(/fatal, error, warn, info, debug, trace, silent/);
    expect(result.stdout).toBe('');
    const fromEnv = await runCli(['serve', '--dir', dataDir()], {
      env: { TICKWHEEL_LOG_LEVEL: 'verbose' },
    });
    expect(fromEnv.code).not.toBe(0);
    expect(fromEnv.stderr).toMatch(/TICKWHEEL_LOG_LEVEL/);
  });

  it('--log-format pretty: short lines for people, the same facts', async () => {
    const server = await serve(['--dir', dataDir(), '--log-format', 'pretty']);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${server.url}/v1/stats`)).status).toBe(200);
    await waitFor(() => server.stdout().includes('GET /v1/stats 200'));
    const lines = server.stdout().trim().split('\n');
    for (const line of lines) expect(line).toMatch(/^\d\d:\d\d:\d\d\.\d{3} (INFO |WARN |ERROR)/);
    expect(lines.some((line) => line.includes(`tickwheel listening on ${server.url}`))).toBe(true);
    expect(lines.some((line) => /Ctrl-C/.test(line))).toBe(true);
    // Probes log at debug: not at the default level.
    expect(server.stdout()).not.toContain('/healthz');
  });
});

const hasScript = spawnSync('script', ['--version']).status === 0;

describe.runIf(hasScript)('tickwheel serve on a terminal', () => {
  it('logs the short form by default', async () => {
    // `script` runs the server on a pseudo-terminal and copies what it writes there.
    const command = `exec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} serve --dir ${JSON.stringify(dataDir())} --port 0`;
    const child = spawn('script', ['-qfc', command, '/dev/null'], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    const exited = new Promise((resolve) => child.on('exit', resolve));
    let url: string | undefined;
    try {
      await waitFor(() => /tickwheel listening on (http:\/\/\S+)/.test(out), { timeoutMs: 15_000 });
      url = /tickwheel listening on (http:\/\/\S+)/.exec(out)![1];
      const lines = out.replace(/\r/g, '').trim().split('\n');
      for (const line of lines) expect(line).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO {2}/);
      expect(out).not.toMatch(/"level"/);
    } finally {
      // The terminal closes with `script`: the server gets SIGHUP and ends.
      child.kill('SIGKILL');
      await exited;
    }
    await waitFor(
      async () => {
        try {
          await fetch(`${url}/healthz`);
          return false;
        } catch {
          return true;
        }
      },
      { timeoutMs: 15_000 },
    );
  });
});
