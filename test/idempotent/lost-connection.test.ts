/**
 * PostgreSQL lost while an idempotent handler holds its transaction's client: once() fails with
 * the connection's error (the message is delivered again), and the process lives on. pg emits an
 * 'error' event on a checked-out client whose connection ends; with no listener that kills the
 * process. Run as users run it: a plain `node` child, a real PostgreSQL killed with SIGKILL.
 */

import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled, startPostgres } from '../../scripts/postgres.mjs';

const CHILD = fileURLToPath(new URL('./lost-connection-child.mjs', import.meta.url));
const DIST = fileURLToPath(new URL('../../dist', import.meta.url));

describe.runIf(postgresInstalled())('PostgreSQL lost under an idempotent handler', () => {
  let server: {
    url: string;
    crash(): Promise<void>;
    restart(): Promise<void>;
    stop(): Promise<void>;
  };
  beforeAll(async () => {
    server = await startPostgres();
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('fails that once() with the connection error; the process lives', async () => {
    const child = fork(CHILD, [], {
      env: { ...process.env, DATABASE_URL: server.url, TICKWHEEL_DIST: DIST },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    let out = '';
    child.stdout?.setEncoding('utf8').on('data', (text: string) => (out += text));
    child.stderr?.setEncoding('utf8').on('data', (text: string) => (out += text));
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => resolve(code)),
    );
    await new Promise((resolve) => child.once('message', resolve));
    await server.crash();
    // The child sees its connection end (the kernel closed it with the processes); then go on.
    child.send('go');
    const code = await exited;
    expect(out, out).toMatch(/^\{"error":/);
    expect(code, out).toBe(0);
    await server.restart();
  }, 60_000);
});
