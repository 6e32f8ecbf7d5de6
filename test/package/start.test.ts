/**
 * `npm start` under a supervisor (systemd, Docker, pm2): the supervisor starts npm and stops
 * it with SIGTERM to npm alone. npm hands the signal to the one process it started, so that
 * process must be the server itself, not a shell waiting for it. In a terminal, Ctrl-C sends
 * SIGINT to npm and the server at once, and npm forwards its own: the server gets it twice and
 * must still shut down gracefully. A start on a built checkout builds nothing
 * (scripts/build-inputs.mjs).
 */

import { spawn } from 'node:child_process';
import { appendFileSync, cpSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('start');

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function portInUse(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(true));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(false)));
  });
}

const leftovers: number[] = [];
let copy: string | undefined;

afterAll(() => {
  for (const pgid of leftovers) if (groupAlive(pgid)) process.kill(-pgid, 'SIGKILL');
});

function copySources(): string {
  // A copy of the sources, so that the build `npm start` runs does not rewrite the dist/
  // that other test files are using.
  const dir = tempDir();
  for (const path of [
    'package.json',
    'package-lock.json',
    'tsconfig.json',
    'tsconfig.build.json',
    'scripts',
    'src',
    'dashboard',
  ]) {
    cpSync(join(ROOT, path), join(dir, path), { recursive: true });
  }
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return dir;
}

/**
 * Runs `npm start` in `dir` until it listens (within `listenMs`, a build included), stops it as a
 * supervisor would (SIGTERM to npm) or as a terminal's Ctrl-C does (SIGINT to the whole group),
 * returns its output.
 */
async function startAndStop(
  dir: string,
  listenMs: number,
  stop: 'supervisor' | 'terminal' = 'supervisor',
): Promise<string> {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.toLowerCase().startsWith('npm_')) env[key] = value;
  }
  // Its own process group, as a supervisor's child has; it lets the test see every process
  // npm started, and clean up if the server outlives npm.
  const npm = spawn('npm', ['start', '--', '--dir', join(dir, 'data'), '--port', '0'], {
    cwd: dir,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  leftovers.push(npm.pid!);
  let out = '';
  npm.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  npm.stderr.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    npm.on('exit', (code, signal) => done({ code, signal })),
  );

  const port = await new Promise<number>((resolve, reject) => {
    // A start that failed takes every process it made with it: one left building would start a
    // server later and hold the data directory the next start needs.
    let listening = false;
    const fail = (why: string) => {
      if (listening) return;
      if (groupAlive(npm.pid!)) process.kill(-npm.pid!, 'SIGKILL');
      reject(new Error(`${why}:\n${out}`));
    };
    const timer = setTimeout(() => fail('npm start did not listen'), listenMs);
    npm.stdout.on('data', () => {
      const match = /tickwheel listening on http:\/\/[^:]+:(\d+)/.exec(out);
      if (match === null || listening) return;
      listening = true;
      clearTimeout(timer);
      resolve(Number(match[1]));
    });
    void exited.then(() => {
      clearTimeout(timer);
      fail('npm start exited');
    });
  });
  expect(await portInUse(port)).toBe(true);

  if (stop === 'supervisor') npm.kill('SIGTERM');
  else process.kill(-npm.pid!, 'SIGINT');
  const exit = await exited;
  expect(exit, out).toEqual({ code: 0, signal: null });
  const deadline = Date.now() + 10_000;
  while (groupAlive(npm.pid!) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(groupAlive(npm.pid!), `a process npm started is still running:\n${out}`).toBe(false);
  expect(await portInUse(port)).toBe(false);
  return out;
}

describe('npm start', () => {
  // One copy for the three starts, each on what the one before left.
  beforeAll(() => {
    copy = copySources();
  });

  it('builds a fresh checkout, and stops the server when the supervisor sends SIGTERM to npm', async () => {
    // A whole build (tsc and vite): minutes on a loaded 2-core machine.
    const first = await startAndStop(copy!, 300_000);
    expect(first).toContain('building tsc and dashboard');
  }, 330_000);

  it('starts a built checkout without building anything', async () => {
    expect(copy, 'the first start built the copy').toBeDefined();
    const second = await startAndStop(copy!, 50_000);
    expect(second).toContain('dist/ is current: nothing to build');
    expect(second).not.toMatch(/building|vite|tsc -p/);
  }, 60_000);

  it('builds only the dashboard when only the dashboard changed', async () => {
    expect(copy, 'the first start built the copy').toBeDefined();
    appendFileSync(join(copy!, 'dashboard', 'index.html'), '\n');
    const third = await startAndStop(copy!, 110_000);
    expect(third).toContain('building dashboard (inputs changed');
  }, 120_000);

  it("shuts down gracefully on a terminal's Ctrl-C, which reaches the server twice", async () => {
    expect(copy, 'the first start built the copy').toBeDefined();
    const out = await startAndStop(copy!, 50_000, 'terminal');
    expect(out).toContain('SIGINT, shutting down');
    expect(out).toContain('"msg":"stopped"');
    expect(out).not.toContain('again, exiting now');
  }, 60_000);
});
