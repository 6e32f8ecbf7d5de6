/**
 * A throwaway PostgreSQL server for tests and examples: a fresh cluster in a temporary directory
 * on a free loopback port, trust authentication, gone after stop().
 *
 *   const pg = await startPostgres();   // pg.url: postgres://tickwheel@127.0.0.1:<port>/postgres
 *   await pg.stop();
 *
 * `pid` is the postmaster's (as root, `runuser` stands between this process and it), the parent
 * of every server process: what a benchmark reads to count PostgreSQL's CPU. `dataDir` is the
 * cluster's data directory. crash() SIGKILLs every server process and restart() starts it
 * again on its data (crash recovery), on the same port.
 *
 * PostgreSQL refuses to run as root: as root, initdb and postgres run as the `postgres` user that
 * Debian's package creates (runuser). Nothing here is shipped.
 */

import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import {
  chownSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clearInterval, setInterval } from 'node:timers';
import { freePort } from './valkey.mjs';

/** The directory of PostgreSQL's server binaries (Debian: /usr/lib/postgresql/<major>/bin). */
export function postgresBin() {
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    const majors = readdirSync(root)
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    for (const major of majors) {
      const bin = join(root, major, 'bin');
      if (existsSync(join(bin, 'initdb'))) return bin;
    }
  }
  const found = spawnSync('sh', ['-c', 'command -v initdb'], { encoding: 'utf8' }).stdout.trim();
  return found === '' ? undefined : join(found, '..');
}

/** Whether a PostgreSQL server can be started here. */
export function postgresInstalled() {
  if (postgresBin() === undefined) return false;
  if (process.getuid?.() !== 0) return true;
  return spawnSync('id', ['-u', 'postgres']).status === 0;
}

export function asPostgres(binary, args) {
  if (process.getuid?.() === 0) return ['runuser', ['-u', 'postgres', '--', binary, ...args]];
  return [binary, args];
}

export function binOrThrow() {
  const bin = postgresBin();
  if (bin === undefined) throw new Error('PostgreSQL is not installed (initdb not found)');
  return bin;
}

/** A temporary directory the server's user owns. */
export function serverDir() {
  const dir = mkdtempSync(join(tmpdir(), 'tickwheel-pg-'));
  if (process.getuid?.() === 0) {
    const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout);
    const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout);
    chownSync(dir, uid, gid);
  }
  return dir;
}

/**
 * `port`: where to listen (default: a free one), e.g. where a client already waits for it.
 * `settings`: server settings (`-c name=value`), e.g. { synchronous_commit: 'remote_apply' }.
 * `password`: user tickwheel's, asked of every connection (scram-sha-256) instead of trust.
 */
export async function startPostgres({ port: wanted, settings = {}, password } = {}) {
  const bin = binOrThrow();
  const dir = serverDir();
  const data = join(dir, 'data');
  const auth = ['-A', 'trust'];
  if (password !== undefined) {
    const file = join(dir, 'password');
    writeFileSync(file, `${password}\n`);
    if (process.getuid?.() === 0) chownSync(file, statSync(dir).uid, statSync(dir).gid);
    auth.splice(0, 2, '-A', 'scram-sha-256', `--pwfile=${file}`);
  }
  const [initdb, initArgs] = asPostgres(join(bin, 'initdb'), [
    '-D',
    data,
    ...auth,
    '-U',
    'tickwheel',
    '--no-sync',
    '-E',
    'UTF8',
  ]);
  const init = spawnSync(initdb, initArgs, { encoding: 'utf8' });
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr || init.stdout}`);
  const handle = await serve(bin, dir, data, wanted ?? (await freePort()), settings);
  if (password !== undefined) {
    handle.url = handle.url.replace('//tickwheel@', `//tickwheel:${encodeURIComponent(password)}@`);
  }
  return handle;
}

/** Runs a server on `data` and answers its handle. */
export async function serve(bin, dir, data, port, settings) {
  let server = await runPostgres(bin, data, dir, port, settings);
  const handle = {
    port,
    pid: server.pid,
    dataDir: data,
    url: `postgres://tickwheel@127.0.0.1:${port}/postgres`,
    /** SIGKILL of the postmaster and every server process: a crash, as of the machine. */
    async crash() {
      await killServer(server);
    },
    /** Starts it again on its data directory after crash(): PostgreSQL's crash recovery. */
    async restart() {
      server = await runPostgres(bin, data, dir, port, settings);
      handle.pid = server.pid;
    },
    async stop() {
      await stopServer(bin, data, server);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return handle;
}

/** Runs `call` again while PostgreSQL is down (a harness kills it), every 100 ms up to `ms`. */
export async function whileDown(call, ms = 60_000) {
  const until = Date.now() + ms;
  for (;;) {
    try {
      return await call();
    } catch (err) {
      if (Date.now() > until) throw err;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** A postgres on `data`, once it accepts connections: { child, exited, pid }. */
async function runPostgres(bin, data, dir, port, settings) {
  const [postgres, args] = asPostgres(join(bin, 'postgres'), [
    '-D',
    data,
    '-p',
    String(port),
    '-k',
    dir,
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'max_connections=50',
    ...Object.entries(settings).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
  ]);
  const child = spawn(postgres, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = once(child, 'exit');
  let output = '';
  await new Promise((resolve, reject) => {
    const onData = (chunk) => {
      output += chunk;
      // A standby is "ready to accept read-only connections".
      if (/ready to accept (read-only )?connections/.test(output)) resolve();
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) =>
      reject(new Error(`postgres exited (${code}): ${output.slice(-2_000)}`)),
    );
  });
  child.stdout.resume();
  child.stderr.resume();
  // The first line of postmaster.pid, written before the server is ready for connections.
  const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  return { child, exited, pid };
}

/** The pids whose parent is `pid`. */
function childrenOf(pid) {
  const found = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid)
        found.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

async function killServer(server) {
  const all = [server.pid, ...childrenOf(server.pid)];
  for (const pid of all) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
  await server.exited;
  // Until the last server process is gone, its shared memory blocks a new postmaster.
  while (all.some((pid) => existsSync(`/proc/${pid}`))) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function stopServer(bin, data, server) {
  const { child, exited } = server;
  if (child.exitCode !== null || child.signalCode !== null) return;
  // pg_ctl's fast shutdown, waited for: a signal to the runuser in between would not
  // reach postgres, and a SIGKILL of runuser would leave postgres running.
  const [pgctl, args] = asPostgres(join(bin, 'pg_ctl'), ['stop', '-D', data, '-m', 'fast', '-w']);
  const stopped = spawnSync(pgctl, args, { encoding: 'utf8', timeout: 30_000 });
  if (stopped.status !== 0) {
    const [pgctl2, args2] = asPostgres(join(bin, 'pg_ctl'), [
      'stop',
      '-D',
      data,
      '-m',
      'immediate',
      '-w',
    ]);
    spawnSync(pgctl2, args2, { timeout: 30_000 });
  }
  let tries = 0;
  const escalate = setInterval(() => {
    if (++tries >= 5 && child.exitCode === null) child.kill('SIGKILL');
  }, 2_000);
  await exited.finally(() => clearInterval(escalate));
}

/**
 * Ends a pg.Pool and waits until each of its connections is closed. pool.end() resolves when
 * its clients are let go, before their connections are: a server stopped right after it
 * terminates them, and pg emits that as 'error' on the pool.
 */
export async function endPool(pool) {
  const open = pool.totalCount;
  let closed = 0;
  const all = new Promise((resolve) => {
    if (open === 0) resolve();
    pool.on('remove', () => {
      if (++closed >= open) resolve();
    });
  });
  await pool.end();
  await all;
}
