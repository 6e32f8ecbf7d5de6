/**
 * bench:queue's cell processes: each workload on each peer runs in a forked cell.mjs, with a
 * data directory (tickwheel), a data directory served by `tickwheel serve` (tickwheel-http) or
 * a redis-server (BullMQ) of its own, removed or stopped when it ends, also on errors and
 * Ctrl-C (cleanup()). A cell with a server is told its pid (`serverPid`), to read its CPU time.
 */

import { fork } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { URL, fileURLToPath } from 'node:url';
import { startServer } from '../push/server.mjs';
import { startRedis, stopAllRedis } from './redis-server.mjs';

const CELL = fileURLToPath(new URL('./cell.mjs', import.meta.url));

// ---- progress ------------------------------------------------------------------------------

const runStarted = performance.now();

export function log(line) {
  const seconds = (performance.now() - runStarted) / 1000;
  const clock = `${String(Math.floor(seconds / 60)).padStart(2, '0')}:${String(Math.floor(seconds % 60)).padStart(2, '0')}`;
  process.stdout.write(`[${clock}] ${line}\n`);
}

// ---- cells ---------------------------------------------------------------------------------

const children = new Set();
const dataDirs = new Set();
/** `tickwheel serve` processes started for cells and not yet stopped. */
const servers = new Set();

export function makeDataDir(options, label) {
  mkdirSync(options.dataDir, { recursive: true });
  const dir = mkdtempSync(join(options.dataDir, `tickwheel-bench-${label}-`));
  dataDirs.add(dir);
  return dir;
}

export function removeDataDir(dir) {
  dataDirs.delete(dir);
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Forks a cell. `onMessage` sees every message that is not progress, result or error.
 * Returns { child, result, closed }: result settles with the cell's answer, closed once the
 * process is gone and every message it sent has been read.
 */
export function startCell(options, label, request, onMessage = () => {}) {
  const execArgv = ['--expose-gc'];
  if (options.profile && request.peer === 'tickwheel') {
    const dir = join(options.out, 'profiles');
    mkdirSync(dir, { recursive: true });
    execArgv.push('--cpu-prof', '--cpu-prof-dir', dir, '--cpu-prof-name', `${label}.cpuprofile`);
  }
  const child = fork(CELL, [], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.add(child);
  let settle;
  const result = new Promise((resolve, reject) => (settle = { resolve, reject }));
  result.catch(() => {});
  child.on('message', (message) => {
    if (message.type === 'progress') log(`${label}: ${message.text}`);
    else if (message.type === 'result') settle.resolve(message.result);
    else if (message.type === 'error') settle.reject(new Error(message.message));
    else onMessage(message);
  });
  const closed = new Promise((resolve) =>
    child.once('close', (code, signal) => {
      children.delete(child);
      settle.reject(new Error(`cell exited (${signal ?? code}) without a result`));
      resolve();
    }),
  );
  child.send(request);
  return { child, result, closed };
}

export async function runCell(options, label, request) {
  const cell = startCell(options, label, request);
  try {
    return await cell.result;
  } finally {
    await cell.closed;
  }
}

/** Runs fn(server) against `tickwheel serve` on `dir`, stopped afterwards whatever happens. */
export async function withTickwheelServer(dir, fn) {
  const server = await startServer({ dir });
  servers.add(server);
  try {
    return await fn(server);
  } finally {
    servers.delete(server);
    await server.stop();
  }
}

/** Runs fn(redis) against a fresh redis-server, stopped afterwards whatever happens. */
export async function withRedis(fn) {
  const redis = await startRedis();
  try {
    return await fn(redis);
  } finally {
    await redis.stop();
  }
}

export async function runPeerCell(
  options,
  workload,
  peer,
  cellOptions,
  label = `${workload} ${peer}`,
) {
  log(`${label}: start`);
  const started = performance.now();
  try {
    let result;
    if (peer === 'bullmq') {
      result = await withRedis((redis) =>
        runCell(options, label, {
          peer,
          workload,
          options: { ...cellOptions, port: redis.port, serverPid: redis.pid },
        }),
      );
    } else if (peer === 'tickwheel-http') {
      const dir = makeDataDir(options, workload);
      try {
        result = await withTickwheelServer(dir, (server) =>
          runCell(options, label, {
            peer,
            workload,
            options: { ...cellOptions, url: server.url, serverPid: server.pid },
          }),
        );
      } finally {
        removeDataDir(dir);
      }
    } else {
      const dir = makeDataDir(options, workload);
      try {
        result = await runCell(options, label, {
          peer,
          workload,
          options: { ...cellOptions, dir },
        });
      } finally {
        removeDataDir(dir);
      }
    }
    log(`${label}: done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    return result;
  } catch (err) {
    log(`${label}: FAILED: ${err.message.split('\n')[0]}`);
    return { error: err.message };
  }
}

export async function cleanup() {
  for (const child of children) child.kill('SIGKILL');
  await Promise.allSettled([...servers].map((server) => server.stop()));
  await stopAllRedis();
  for (const dir of [...dataDirs]) removeDataDir(dir);
}
