/**
 * A PostgreSQL primary with a streaming standby behind one address, for failover tests and the
 * chaos harness: what a virtual IP (or a proxy) in front of a replicated PostgreSQL is.
 *
 *   const pair = await startPostgresPair();   // pair.url: the front door (scripts/relay.mjs)
 *   await pair.failover();   // SIGKILL of the primary, standby promoted, door moved to it,
 *                            // a new standby made from the new primary
 *   await pair.crash(); await pair.restart();   // the primary's crash recovery, no failover
 *   await pair.stop();
 *
 * `synchronous` (default true): `synchronous_standby_names = '*'` and `synchronous_commit =
 * remote_apply`: a commit is answered once the standby has applied it, so a failover loses no
 * answered commit (and commits wait while no standby is connected). With false the standby is
 * asynchronous: a failover can lose the commits it had not received yet. Nothing here is shipped.
 */

import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { asPostgres, binOrThrow, serve, serverDir, startPostgres } from './postgres.mjs';
import { startRelay } from './relay.mjs';
import { freePort } from './valkey.mjs';

function run(bin, tool, args) {
  const [binary, argv] = asPostgres(join(bin, tool), args);
  const done = spawnSync(binary, argv, { encoding: 'utf8', timeout: 60_000 });
  if (done.status !== 0) throw new Error(`${tool} failed: ${done.stderr || done.stdout}`);
}

/** A standby of `primary`, streaming from it (pg_basebackup -R), once it accepts reads. */
async function startStandby(bin, primary, settings) {
  const dir = serverDir();
  const data = join(dir, 'data');
  run(bin, 'pg_basebackup', [
    ...['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'tickwheel'],
    ...['-D', data, '-R', '-X', 'stream', '--no-sync', '-c', 'fast'],
  ]);
  return serve(bin, dir, data, await freePort(), settings);
}

/** Waits until `primary` streams to a standby (and counts it synchronous, if it should). */
async function streaming(primary, synchronous) {
  const { default: pg } = await import('pg');
  const until = Date.now() + 60_000;
  for (;;) {
    const client = new pg.Client({ connectionString: primary.url });
    try {
      await client.connect();
      const { rows } = await client.query(
        "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'",
      );
      if (rows.some((row) => !synchronous || row.sync_state === 'sync')) return;
    } catch {
      // Not up yet.
    } finally {
      await client.end().catch(() => {});
    }
    if (Date.now() > until) throw new Error('the standby did not start streaming within 60 s');
    await sleep(50);
  }
}

export async function startPostgresPair({ synchronous = true } = {}) {
  const bin = binOrThrow();
  const settings = synchronous
    ? { synchronous_standby_names: '*', synchronous_commit: 'remote_apply' }
    : {};
  let primary = await startPostgres({ settings });
  let standby = await startStandby(bin, primary, settings);
  await streaming(primary, synchronous);
  const door = await startRelay(primary.port);
  const pair = {
    url: primary.url.replace(`:${primary.port}/`, `:${door.port}/`),
    port: door.port,
    synchronous,
    /** The server behind the door now. */
    get primary() {
      return primary;
    },
    /**
     * SIGKILL of the primary, promotion of the standby, the door moved to it; then a new standby
     * from the new primary. Answers how long each part took (ms).
     */
    async failover() {
      const t0 = Date.now();
      await primary.crash();
      run(bin, 'pg_ctl', ['promote', '-D', standby.dataDir, '-w', '-t', '60']);
      door.retarget(standby.port);
      const promotedMs = Date.now() - t0;
      const old = primary;
      primary = standby;
      await old.stop();
      standby = await startStandby(bin, primary, settings);
      await streaming(primary, synchronous);
      return { promotedMs, standbyMs: Date.now() - t0 - promotedMs };
    },
    /** SIGKILL of the primary; restart() runs its crash recovery (no failover). */
    async crash() {
      await primary.crash();
    },
    async restart() {
      await primary.restart();
      await streaming(primary, synchronous);
    },
    async stop() {
      door.close();
      await Promise.all([primary.stop(), standby.stop()]);
    },
  };
  return pair;
}
