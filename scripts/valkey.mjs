/**
 * Real Valkey and Redis servers for tests, the chaos harness and the cluster benchmark: a
 * standalone server, a primary with replicas, Sentinel, and a Cluster of primaries with
 * replicas, all on loopback ports, in a scratch directory, stopped (or SIGKILLed) on demand.
 *
 *   const cluster = await startCluster({ primaries: 3, replicas: 1 });
 *   cluster.urls      // ['redis://127.0.0.1:23001', ...]
 *   await cluster.stop();
 *
 * Nothing here is shipped: it is for what the project runs against real servers.
 */

import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clearInterval, setInterval } from 'node:timers';

/** Whether `binary` (valkey-server, redis-server) is installed. */
export function installed(binary) {
  return spawnSync(binary, ['--version']).status === 0;
}

/** The server's version as [major, minor, patch]. */
export function versionOf(binary) {
  const out = spawnSync(binary, ['--version'], { encoding: 'utf8' }).stdout ?? '';
  const match = /v=(\d+)\.(\d+)\.(\d+)/.exec(out);
  return match === null ? [0, 0, 0] : match.slice(1).map(Number);
}

async function portIsFree(port) {
  const probe = createServer();
  try {
    probe.listen(port, '127.0.0.1');
    await once(probe, 'listening');
    return true;
  } catch {
    return false;
  } finally {
    probe.close();
  }
}

let nextPort = 20_000 + Math.floor(Math.random() * 9_000);

/** A loopback port that is free, and whose cluster bus port (+10,000) is free too. */
export async function freePort() {
  for (let tries = 0; tries < 1_000; tries++) {
    const port = nextPort;
    nextPort = nextPort >= 29_990 ? 20_000 : nextPort + 1;
    if ((await portIsFree(port)) && (await portIsFree(port + 10_000))) return port;
  }
  throw new Error('no free loopback port for a test server');
}

/**
 * One server process. `args` are extra `--name value` settings. Resolves once it accepts
 * connections; `stop()` ends it with SIGTERM, `kill()` with SIGKILL (no chance to save).
 */
export async function startServer({
  binary = 'valkey-server',
  port,
  dir,
  args = [],
  ready = 'Ready to accept connections',
} = {}) {
  const own = dir === undefined;
  const home = dir ?? mkdtempSync(join(tmpdir(), 'tickwheel-valkey-'));
  const listen = port ?? (await freePort());
  const argv = [
    '--port',
    String(listen),
    '--bind',
    '127.0.0.1',
    '--dir',
    home,
    '--save',
    '',
    '--protected-mode',
    'no',
    ...args,
  ];
  let child;
  let exited;
  const launch = async () => {
    child = spawn(binary, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const started = child;
    await new Promise((resolve, reject) => {
      const onData = (chunk) => {
        output += chunk;
        if (output.includes(ready)) {
          started.stdout.off('data', onData);
          resolve();
        }
      };
      started.stdout.on('data', onData);
      started.once('exit', (code) =>
        reject(new Error(`${binary} on port ${listen} exited (${code}): ${output.slice(-2_000)}`)),
      );
    });
    // Keep draining its output so that it never blocks on a full pipe.
    started.stdout.resume();
    started.stderr.resume();
    exited = once(started, 'exit');
  };
  await launch();
  const server = {
    binary,
    port: listen,
    dir: home,
    url: `redis://127.0.0.1:${listen}`,
    get process() {
      return child;
    },
    get running() {
      return child.exitCode === null && child.signalCode === null;
    },
    async stop(signal = 'SIGTERM') {
      if (server.running) {
        child.kill(signal);
        // A replica whose primary is gone sometimes lets a SIGTERM pass and keeps running
        // (seen with Valkey 8.0 after a failover); a second one ends it, SIGKILL in the end.
        let tries = 0;
        const escalate = setInterval(() => {
          tries++;
          if (server.running) child.kill(tries < 3 ? signal : 'SIGKILL');
        }, 2_000);
        await exited.finally(() => clearInterval(escalate));
      }
      if (own) rmSync(home, { recursive: true, force: true });
    },
    kill() {
      return server.stop('SIGKILL');
    },
    /** SIGKILL, keeping its data directory (its AOF, its cluster config) for restart(). */
    async crash() {
      if (server.running) {
        child.kill('SIGKILL');
        await exited;
      }
    },
    /** Starts it again on the same port and directory, after crash(). */
    async restart() {
      if (server.running) throw new Error(`${binary} on port ${listen} is running`);
      await launch();
    },
  };
  return server;
}

/** Runs a command through the matching CLI and returns its output (throws on failure). */
export function cli(binary, port, ...command) {
  const tool = binary.replace('-server', '-cli');
  const result = spawnSync(tool, ['-h', '127.0.0.1', '-p', String(port), ...command], {
    encoding: 'utf8',
  });
  if (result.status !== 0) throw new Error(`${tool} ${command.join(' ')}: ${result.stderr}`);
  return result.stdout.trim();
}

async function until(check, what, timeoutMs = 20_000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Settings every durable server of a test gets: an AOF fsynced every second. */
const AOF = ['--appendonly', 'yes', '--appendfsync', 'everysec'];

/** A primary with `replicas` replicas, replication running. */
export async function startReplicated({ binary = 'valkey-server', replicas = 1, args = [] } = {}) {
  const primary = await startServer({ binary, args: [...AOF, ...args] });
  const followers = [];
  for (let i = 0; i < replicas; i++) {
    followers.push(
      await startServer({
        binary,
        args: [...AOF, ...args, '--replicaof', '127.0.0.1', String(primary.port)],
      }),
    );
  }
  for (const replica of followers) {
    await until(
      () => cli(binary, replica.port, 'INFO', 'replication').includes('master_link_status:up'),
      `replica ${replica.port} to sync`,
    );
  }
  return {
    primary,
    replicas: followers,
    async stop() {
      await Promise.all([primary, ...followers].map((s) => s.stop()));
    },
  };
}

/**
 * A primary, `replicas` replicas and `sentinels` Sentinel processes watching them under the
 * name `master`, with a quick failover (down after 1 s).
 */
export async function startSentinel({
  binary = 'valkey-server',
  replicas = 1,
  sentinels = 3,
  downAfterMs = 1_000,
} = {}) {
  const set = await startReplicated({ binary, replicas });
  const watchers = [];
  for (let i = 0; i < sentinels; i++) {
    const port = await freePort();
    const home = mkdtempSync(join(tmpdir(), 'tickwheel-sentinel-'));
    const config = join(home, 'sentinel.conf');
    writeFileSync(
      config,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${home}`,
        `sentinel monitor master 127.0.0.1 ${set.primary.port} ${Math.min(2, sentinels)}`,
        `sentinel down-after-milliseconds master ${downAfterMs}`,
        'sentinel failover-timeout master 5000',
        'sentinel parallel-syncs master 1',
        '',
      ].join('\n'),
    );
    const child = spawn(binary, [config, '--sentinel'], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.resume();
    child.stderr.resume();
    const exited = once(child, 'exit');
    await until(() => cli(binary, port, 'PING') === 'PONG', `sentinel ${port}`);
    watchers.push({
      port,
      url: `redis://127.0.0.1:${port}`,
      process: child,
      async stop() {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGTERM');
          await exited;
        }
        rmSync(home, { recursive: true, force: true });
      },
    });
  }
  for (const sentinel of watchers) {
    await until(
      () => cli(binary, sentinel.port, 'SENTINEL', 'replicas', 'master').includes('127.0.0.1'),
      `sentinel ${sentinel.port} to see the replicas`,
    );
  }
  return {
    ...set,
    sentinels: watchers,
    name: 'master',
    /** The primary's port as the Sentinels report it now. */
    primaryPort() {
      const out = cli(binary, watchers[0].port, 'SENTINEL', 'get-master-addr-by-name', 'master');
      return Number(out.split('\n')[1]);
    },
    async stop() {
      await Promise.all(watchers.map((w) => w.stop()));
      await set.stop();
    },
  };
}

/**
 * A Cluster of `primaries` primaries with `replicas` replicas each, every slot covered and
 * `cluster_state:ok` on every node before it resolves.
 */
export async function startCluster({
  binary = 'valkey-server',
  primaries = 3,
  replicas = 1,
  nodeTimeoutMs = 2_000,
} = {}) {
  const servers = [];
  for (let i = 0; i < primaries * (1 + replicas); i++) {
    const port = await freePort();
    servers.push(
      await startServer({
        binary,
        port,
        args: [
          ...AOF,
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          `nodes-${port}.conf`,
          '--cluster-node-timeout',
          String(nodeTimeoutMs),
        ],
      }),
    );
  }
  cli(
    binary,
    servers[0].port,
    '--cluster',
    'create',
    ...servers.map((s) => `127.0.0.1:${s.port}`),
    '--cluster-replicas',
    String(replicas),
    '--cluster-yes',
  );
  for (const server of servers) {
    await until(
      () => cli(binary, server.port, 'CLUSTER', 'INFO').includes('cluster_state:ok'),
      `cluster node ${server.port} to be ok`,
    );
  }
  // Replicas sync a few seconds after the Cluster forms; until then a WAIT on a primary cannot
  // be answered (and a replica that never synced is not promoted).
  if (replicas > 0) {
    for (const server of servers) {
      if (cli(binary, server.port, 'ROLE').split('\n')[0] !== 'master') continue;
      await until(() => {
        const info = cli(binary, server.port, 'INFO', 'replication');
        const online = info.match(/state=online/g) ?? [];
        return online.length >= replicas;
      }, `the replicas of ${server.port} to sync`);
    }
  }
  return {
    servers,
    urls: servers.map((s) => s.url),
    /** The servers that are primaries now (this changes after a failover). */
    primaries() {
      return servers.filter(
        (s) => s.running && cli(binary, s.port, 'ROLE').split('\n')[0] === 'master',
      );
    },
    async stop() {
      await Promise.all(servers.map((s) => s.stop()));
    },
  };
}
