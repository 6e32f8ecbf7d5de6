/**
 * A write the disk refuses is the server's trouble, for a while: 503 ERR_TICKWHEEL_IO with
 * Retry-After, never 500 ERR_TICKWHEEL_INTERNAL. The faults are real: a running `tickwheel
 * serve` finds a directory where it writes a file (EISDIR), and, where this machine lets the
 * test mount one, a full tmpfs (ENOSPC).
 */

import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { toErrorResponse } from '../../src/server/errors.js';
import { runCli, startServer, type ServerProcess } from './process.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('io-errors');

const mounts: string[] = [];
const servers: ServerProcess[] = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.kill()));
  for (const mount of mounts.splice(0)) execFileSync('umount', [mount]);
});

/** A temporary directory with a tmpfs of `size` mounted on it; the test is skipped if it cannot be. */
function smallDisk(size: string, context: { skip(): void }): string {
  const dir = tempDir();
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'ignore' });
  } catch {
    context.skip(); // mounting needs privileges this machine does not give the test
  }
  mounts.push(dir);
  return dir;
}

async function serve(dir: string): Promise<ServerProcess> {
  const server = await startServer(['--dir', dir]);
  servers.push(server);
  return server;
}

async function call(
  server: ServerProcess,
  method: string,
  path: string,
  body: unknown,
): Promise<{ status: number; retryAfter: string | null; body: { error: { code: string } } }> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    body: (await response.json()) as { error: { code: string } },
  };
}

function expectIoError(answer: Awaited<ReturnType<typeof call>>): void {
  expect(answer.status).toBe(503);
  expect(answer.body.error.code).toBe('ERR_TICKWHEEL_IO');
  expect(Number(answer.retryAfter)).toBeGreaterThan(0);
}

const SCHEDULE = { topic: 'reports', everyMs: 3_600_000 };

describe('a write the disk refuses', () => {
  it('answers 503 ERR_TICKWHEEL_IO with Retry-After for topic settings and schedules', async () => {
    const dir = tempDir();
    const server = await serve(dir);
    expect((await call(server, 'PATCH', '/v1/topics/emails', { paused: true })).status).toBe(200);
    // Where the settings are written before they are renamed into place, and the schedules' log.
    mkdirSync(join(dir, 'topics.json.tmp'));
    mkdirSync(join(dir, 'schedules.log'));

    expectIoError(await call(server, 'PATCH', '/v1/topics/emails', { paused: false }));
    expectIoError(await call(server, 'POST', '/v1/topics/emails/resume', {}));
    expectIoError(await call(server, 'PUT', '/v1/schedules/nightly', SCHEDULE));

    // Once the fault is gone, the same requests succeed.
    rmSync(join(dir, 'topics.json.tmp'), { recursive: true });
    rmSync(join(dir, 'schedules.log'), { recursive: true });
    expect((await call(server, 'PATCH', '/v1/topics/emails', { paused: false })).status).toBe(200);
    expect((await call(server, 'PUT', '/v1/schedules/nightly', SCHEDULE)).status).toBe(200);
  });

  it('answers 503 ERR_TICKWHEEL_IO with Retry-After on a full disk', async (context) => {
    const dir = smallDisk('1m', context);
    const server = await serve(dir);
    // Fill the disk to its last byte.
    let size = 1 << 20;
    for (let i = 0; size >= 1; i++) {
      try {
        writeFileSync(join(dir, `filler-${i}`), Buffer.alloc(size));
      } catch {
        size >>= 1;
      }
    }
    expectIoError(await call(server, 'PATCH', '/v1/topics/emails', { paused: true }));
    expectIoError(await call(server, 'PUT', '/v1/schedules/nightly', SCHEDULE));
  });

  it('refuses a restart on a full disk with ERR_TICKWHEEL_IO naming the directory', async (context) => {
    const dir = join(smallDisk('2m', context), 'data');
    const server = await serve(dir);
    // Messages until the disk refuses one: the log and its index fill the disk.
    let status = 201;
    for (let i = 0; status === 201; i++) {
      const message = { id: `m${i}`, payload: 'x'.repeat(10_000), delayMs: (i % 2) * 3_600_000 };
      status = (await call(server, 'POST', '/v1/topics/fill/messages', message)).status;
    }
    expect(status).toBe(503);
    // The store stopped at that write: the next is refused before it writes anything.
    const refused = await call(server, 'POST', '/v1/topics/fill/messages', { payload: 1 });
    expectIoError(refused);
    expect(refused.body.error).toMatchObject({ outcome: 'none' });
    expect(JSON.stringify(refused.body)).toContain('takes no more writes');
    server.child.kill('SIGTERM');
    expect((await server.exited).code).toBe(0);
    const restart = await runCli(['serve', '--dir', dir, '--port', '0']);
    expect(restart.code).toBe(1);
    expect(restart.stderr).toContain('ERR_TICKWHEEL_IO');
    expect(restart.stderr).toContain(`recovering the data directory ${dir}`);
  });
});

describe('the status of a system error that reached the server unwrapped', () => {
  it.each(['EMFILE', 'ENOSPC', 'EIO', 'EACCES', 'EISDIR'])('%s: 503 ERR_TICKWHEEL_IO', (code) => {
    const err = Object.assign(new Error(`${code}: open 'x'`), { code, errno: -1, syscall: 'open' });
    const { statusCode, body } = toErrorResponse(err);
    expect(statusCode).toBe(503);
    expect(body.error.code).toBe('ERR_TICKWHEEL_IO');
    const wrapped = toErrorResponse(new Error('could not save', { cause: err }));
    expect(wrapped.statusCode).toBe(503);
    expect(wrapped.body.error.code).toBe('ERR_TICKWHEEL_IO');
  });
});
