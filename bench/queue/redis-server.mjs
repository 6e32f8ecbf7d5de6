/**
 * A private redis-server for the BullMQ peer: loopback only, on a free port, in a temp
 * directory of its own, persisting the way a production BullMQ deployment usually does
 * (AOF, fsync once a second, no RDB snapshots).
 *
 * The runner starts one per BullMQ cell, so used_memory starts from an empty server and the
 * crash cell can SIGKILL it and start it again on the same directory.
 */

import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Every server started and not yet stopped, so an error or Ctrl-C can stop them all. */
const running = new Set();

export function redisServerVersion() {
  const found = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (found.error !== undefined || found.status !== 0) return undefined;
  return /v=(\S+)/.exec(found.stdout)?.[1] ?? found.stdout.trim();
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

/** Sends one inline command over a fresh socket and returns the raw reply (no client needed). */
export function redisCommand(port, command, timeoutMs = 2000) {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let reply = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`redis on port ${port} did not answer ${command}`));
    }, timeoutMs);
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (chunk) => {
      reply += chunk;
      if (complete(reply)) {
        clearTimeout(timer);
        socket.end();
        resolve(reply);
      }
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** True once a RESP reply (simple string, error, integer or one bulk string) is whole. */
function complete(reply) {
  const lineEnd = reply.indexOf('\r\n');
  if (lineEnd < 0) return false;
  if (reply[0] !== '$') return true;
  const length = Number(reply.slice(1, lineEnd));
  return length < 0 || reply.length >= lineEnd + 2 + length + 2;
}

/** INFO <section> as an object of strings. */
export async function redisInfo(port, section) {
  const reply = await redisCommand(port, `INFO ${section}`);
  const info = {};
  for (const line of reply.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) info[line.slice(0, colon)] = line.slice(colon + 1);
  }
  return info;
}

/**
 * Starts redis-server. `dir` reuses a data directory (restart after a crash); otherwise a new
 * temp directory is made. Resolves once the server answers PING with its data loaded.
 */
export async function startRedis({ dir, port } = {}) {
  const dataDir = dir ?? mkdtempSync(join(tmpdir(), 'tickwheel-bench-redis-'));
  const listenPort = port ?? (await freePort());
  const started = performance.now();
  const child = spawn(
    'redis-server',
    [
      '--bind',
      '127.0.0.1',
      '--port',
      String(listenPort),
      '--dir',
      dataDir,
      '--appendonly',
      'yes',
      '--appendfsync',
      'everysec',
      '--save',
      '',
      '--protected-mode',
      'yes',
      '--maxmemory-policy',
      'noeviction',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const server = {
    port: listenPort,
    dir: dataDir,
    pid: child.pid,
    /** Wall time from spawn until the server answered with its data loaded. */
    readyMs: 0,
    async stop({ removeDir = true } = {}) {
      running.delete(server);
      if (child.exitCode === null && child.signalCode === null) {
        await redisCommand(listenPort, 'SHUTDOWN NOSAVE').catch(() => child.kill('SIGKILL'));
        await exited;
      }
      if (removeDir) rmSync(dataDir, { recursive: true, force: true });
    },
    /** The crash: SIGKILL, no chance to write anything more. */
    async kill() {
      running.delete(server);
      child.kill('SIGKILL');
      await exited;
    },
  };
  running.add(server);
  const spawnFailed = new Promise((_, reject) => {
    child.once('error', (err) => reject(new Error(`cannot start redis-server: ${err.message}`)));
    exited.then((code) =>
      reject(new Error(`redis-server exited with ${code} before it was ready: ${stderr.trim()}`)),
    );
  });
  spawnFailed.catch(() => {});
  await Promise.race([waitUntilLoaded(listenPort), spawnFailed]);
  server.readyMs = performance.now() - started;
  return server;
}

async function waitUntilLoaded(port) {
  for (;;) {
    try {
      const reply = await redisCommand(port, 'PING', 1000);
      // While loading the AOF the server answers -LOADING to everything.
      if (reply.startsWith('+PONG')) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/** Stops every server still running; for error paths and signals. */
export async function stopAllRedis() {
  await Promise.allSettled([...running].map((server) => server.stop()));
}
