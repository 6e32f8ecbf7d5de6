/**
 * The stores the chaos harness (scripts/chaos.mjs) runs its nodes on, and how it kills them:
 *
 *   - valkey: a Valkey Cluster of 3 primaries + 3 replicas (AOF on). A kill is a SIGKILL of a
 *     primary whose replica is synced: the Cluster promotes the replica, the killed process is
 *     started again on its data and rejoins as a replica (with --lose-primary, the first one
 *     killed is lost for good);
 *   - postgres: one PostgreSQL. A kill is a SIGKILL of the postmaster and every server process;
 *     it is started again on its data 0.2-1.5 s later (crash recovery), on the same port. With
 *     `replica` (sync or async), a primary and a streaming standby behind one address; every other
 *     kill is a failover to the standby, the first one included (scripts/postgres-pair.mjs).
 *
 * Each store: { kind, urls, kill(k, random, note, say), postMortem(missing, scheduled, note,
 * say), summary(), stop() }.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import { startPostgres } from './postgres.mjs';
import { startPostgresPair } from './postgres-pair.mjs';
import { cli, startCluster } from './valkey.mjs';

export async function waitFor(condition, ms, what) {
  const until = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

/** The primaries that have a replica up and synced. */
function replicatedPrimaries(cluster) {
  return cluster.primaries().filter((p) => {
    const info = cli(p.binary, p.port, 'INFO', 'replication');
    return /connected_slaves:[1-9]/.test(info) && /slave0:.*state=online/.test(info);
  });
}

const mean = (list) =>
  list.length ? Math.round(list.reduce((a, b) => a + b, 0) / list.length) : null;

export async function valkeyStore(options) {
  const cluster = await startCluster({ primaries: 3, replicas: 1 });
  /** Ports of primaries killed and never started again (--lose-primary). */
  const lost = [];
  const failovers = [];
  return {
    kind: 'primary',
    urls: cluster.urls,
    async kill(k, random, note, say) {
      // A primary whose replica is not synced yet is not killed: that would be a double
      // failure. A shard whose primary was lost for good has no replica any more, and is spared.
      const replicated = () => replicatedPrimaries(cluster).length === 3 - lost.length;
      await waitFor(replicated, 60_000, 'every shard to have a synced replica');
      const primaries = replicatedPrimaries(cluster);
      const victim = primaries[Math.floor(random() * primaries.length)];
      const t0 = Date.now();
      note(`kill primary :${victim.port}`);
      await victim.crash();
      // The Cluster promotes its replica (node timeout 2 s).
      await waitFor(() => cluster.primaries().length === 3, 30_000, 'a replica to be promoted');
      const promotedMs = Date.now() - t0;
      failovers.push(promotedMs);
      if (options.losePrimary && lost.length === 0) {
        lost.push(victim.port);
        note(`promoted after ${promotedMs} ms; :${victim.port} lost for good`);
        say(
          `chaos: kill ${k + 1}: primary :${victim.port} lost for good, replica promoted in ${promotedMs} ms`,
        );
        return;
      }
      note(`promoted after ${promotedMs} ms; restarting :${victim.port}`);
      await victim.restart();
      note(`restarted :${victim.port}`);
      say(`chaos: kill ${k + 1}: primary :${victim.port}, replica promoted in ${promotedMs} ms`);
    },
    /** Each message never delivered: its state in Valkey now and its partition's meta. */
    async postMortem(missing, scheduled, note, say) {
      const { Valkey } = await import('../dist/valkey/connection.js');
      const { placeOf } = await import('../dist/partitioned/record.js');
      const { metaKey } = await import('../dist/cluster/keys.js');
      const valkey = await Valkey.connect(cluster.urls);
      try {
        for (const id of missing.slice(0, 20)) {
          const { partition, bucket } = placeOf(id, 16);
          const meta = metaKey('chaos', partition);
          const state = await valkey.fcall('tw_get', meta, [id, bucket]);
          const info = await valkey.command(meta, ['HGETALL', meta]);
          const line = `missing ${id} due ${scheduled.get(id).deliverAt}: partition ${partition}, state ${state}, meta ${JSON.stringify(info)}`;
          say(line);
          note(line);
        }
      } finally {
        await valkey.close();
      }
    },
    summary: () => ({
      primaryPromotionMs: {
        max: failovers.length ? Math.max(...failovers) : null,
        mean: mean(failovers),
      },
      durability: options.durability,
      primariesLostForGood: lost.length,
    }),
    stop: () => cluster.stop(),
  };
}

export async function postgresStore(options) {
  const server =
    options.replica === undefined
      ? await startPostgres()
      : await startPostgresPair({ synchronous: options.replica === 'sync' });
  const downs = [];
  const failovers = [];
  return {
    kind: 'postgres',
    urls: [server.url],
    async kill(k, random, note, say) {
      // With a standby, every other PostgreSQL kill is a failover, the first one included.
      if (options.replica !== undefined && downs.length >= failovers.length) {
        note('failover');
        const { promotedMs, standbyMs } = await server.failover();
        failovers.push(promotedMs);
        note(`promoted after ${promotedMs} ms, new standby after ${standbyMs} ms more`);
        say(`chaos: kill ${k + 1}: postgres failover, standby promoted in ${promotedMs} ms`);
        return;
      }
      note('kill postgres');
      const t0 = Date.now();
      await server.crash();
      await sleep(200 + random() * 1_300);
      await server.restart();
      const downMs = Date.now() - t0;
      downs.push(downMs);
      note(`postgres up again after ${downMs} ms`);
      say(`chaos: kill ${k + 1}: postgres, up again after ${downMs} ms (crash recovery)`);
    },
    /** Each message never delivered: its state as tw_get answers it now. */
    async postMortem(missing, scheduled, note, say) {
      const { default: pg } = await import('pg');
      const { placeOf } = await import('../dist/partitioned/record.js');
      const client = new pg.Client({ connectionString: server.url });
      await client.connect();
      try {
        for (const id of missing.slice(0, 20)) {
          const { partition, bucket } = placeOf(id, 16);
          const state = await client.query('SELECT tickwheel_chaos.tw_get($1, $2, $3) AS v', [
            partition,
            id,
            bucket,
          ]);
          // Where its state row says its record is, and whether that record is there.
          const place = await client.query(
            `SELECT s.seg, s.idx, s.status, s.attempts,
               EXISTS (SELECT 1 FROM tickwheel_chaos.records r
                       WHERE r.seg = s.seg AND r.part = s.part AND r.idx = s.idx) AS record
             FROM tickwheel_chaos.states s WHERE s.part = $1 AND s.id = $2`,
            [partition, id],
          );
          const line = `missing ${id} due ${scheduled.get(id).deliverAt}: partition ${partition}, state ${JSON.stringify(state.rows[0]?.v)}, row ${JSON.stringify(place.rows[0] ?? null)}`;
          say(line);
          note(line);
        }
        // What the nodes' sessions wait for and since when, whether a standby streams (commits
        // wait for a synchronous one), and who holds each partition's lease by the store's clock.
        const sessions = await client.query(
          `SELECT state, wait_event_type AS type, wait_event AS event,
             (extract(epoch FROM now() - xact_start) * 1000)::int AS xact_ms,
             left(query, 60) AS query
           FROM pg_stat_activity
           WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
             AND (state <> 'idle' OR xact_start IS NOT NULL)`,
        );
        const standbys = await client.query(
          'SELECT state, sync_state, replay_lag::text AS replay_lag FROM pg_stat_replication',
        );
        const leases = await client.query(
          `SELECT part, owner, epoch, until - tickwheel_chaos.now_ms() AS left_ms
           FROM tickwheel_chaos.leases ORDER BY part`,
        );
        const members = await client.query(
          `SELECT node, until - tickwheel_chaos.now_ms() AS left_ms
           FROM tickwheel_chaos.members ORDER BY node`,
        );
        for (const line of [
          `sessions not idle ${JSON.stringify(sessions.rows)}`,
          `standbys ${JSON.stringify(standbys.rows)}`,
          `leases ${JSON.stringify(leases.rows.map((l) => `${l.part}:${l.owner}/${l.epoch}/${l.left_ms}`))}`,
          `members ${JSON.stringify(members.rows)}`,
        ]) {
          say(line);
          note(line);
        }
      } finally {
        await client.end();
      }
    },
    summary: () => ({
      postgresDownMs: { max: downs.length ? Math.max(...downs) : null, mean: mean(downs) },
      replica: options.replica ?? 'none',
      failovers: failovers.length,
      failoverPromotionMs: {
        max: failovers.length ? Math.max(...failovers) : null,
        mean: mean(failovers),
      },
    }),
    stop: () => server.stop(),
  };
}
