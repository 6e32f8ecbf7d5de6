#!/usr/bin/env node
/**
 * Cluster benchmark: tickwheel's queue on Valkey against BullMQ on the same kind of Valkey
 * Cluster (3 primaries + 3 replicas, AOF with fsync every second, started here on loopback
 * ports, a fresh one per peer), in the same run.
 *
 *   npm run bench:cluster [-- --n 200000 --burst 100000 --steady-rate 1000 --steady-seconds 20
 *                             --peers tickwheel,bullmq --durabilities async,replicated,fsynced
 *                             --phases schedule,burst,steady,nodeKill,primaryKill --out bench/results]
 *
 * Phases, per peer (all unless --phases names some):
 *   schedule   N far-future messages (due in a day, 100-byte payload) in batches of 500, four
 *              batches in flight (with 'fsynced', whose every batch waits for the next fsync
 *              of a primary and a replica, at most 50,000 and 16 batches in flight):
 *              messages/s, Valkey CPU per message (all six servers), client CPU, and
 *              Valkey RAM per pending message (used_memory of the primaries, which includes
 *              replication and AOF buffers, and MEMORY USAGE of the queue's keys). tickwheel once
 *              per durability setting; BullMQ has one (a write is acknowledged by the primary).
 *   burst      B messages due within one second, consumed by one Worker (concurrency 64):
 *              lateness of the first delivery of each, and when the last one came.
 *   steady     R messages a second, each due 1 s after it is scheduled: lateness.
 *   node kill  two consumer processes and this one producing (R/5 a second, due 500 ms
 *              ahead); one consumer process is SIGKILLed: lateness of what fell due after.
 *   primary    the same, then the primary that holds BullMQ's slot is SIGKILLed (its replica
 *   kill       is promoted): lateness of what fell due after, and schedule calls that failed.
 *
 * Writes <out>/cluster.json and prints a table. bullmq comes from TICKWHEEL_BENCH_DEPS when it
 * is not in the project (see bench/README.md).
 */

import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { URL, fileURLToPath } from 'node:url';
import { createClient } from '@redis/client';
import { parseFlags } from '../../scripts/flags.mjs';
import { cli, installed, startCluster, versionOf } from '../../scripts/valkey.mjs';
import { redisInfo } from '../queue/redis-server.mjs';
import { LatenessRecorder, ratio } from '../queue/stats.mjs';
import { startLines } from '../consumer-lines.mjs';
import { openPeer } from './peers.mjs';

const CONSUMER = fileURLToPath(new URL('./consumer.mjs', import.meta.url));
const PAYLOAD = 'x'.repeat(100);
const DAY_MS = 86_400_000;

const PHASES = ['schedule', 'burst', 'steady', 'nodeKill', 'primaryKill'];

function parseArgs(argv) {
  const options = {
    n: 200_000,
    burst: 100_000,
    steadyRate: 1_000,
    steadySeconds: 20,
    peers: ['tickwheel', 'bullmq'],
    durabilities: ['async', 'replicated', 'fsynced'],
    phases: PHASES,
    out: fileURLToPath(new URL('../results', import.meta.url)),
  };
  const count = (text) => Number(String(text).replace(/_/g, '').replace(/k$/i, '000'));
  parseFlags(argv, {
    '--n': (v) => (options.n = count(v)),
    '--burst': (v) => (options.burst = count(v)),
    '--steady-rate': (v) => (options.steadyRate = count(v)),
    '--steady-seconds': (v) => (options.steadySeconds = Number(v)),
    '--peers': (v) => (options.peers = v.split(',')),
    '--durabilities': (v) => (options.durabilities = v.split(',')),
    '--phases': (v) => {
      options.phases = v.split(',');
      const unknown = options.phases.filter((p) => !PHASES.includes(p));
      if (unknown.length > 0) throw new Error(`unknown phase ${unknown[0]}: one of ${PHASES}`);
    },
    '--out': (v) => (options.out = v),
  });
  return options;
}

const say = (line) => process.stderr.write(`bench:cluster: ${line}\n`);

async function sum(servers, section, field) {
  let total = 0;
  for (const server of servers) {
    const info = await redisInfo(server.port, section);
    total += Array.isArray(field)
      ? field.reduce((s, f) => s + Number(info[f]), 0)
      : Number(info[field]);
  }
  return total;
}

const valkeyCpu = (cluster) =>
  sum(
    cluster.servers.filter((s) => s.running),
    'cpu',
    ['used_cpu_user', 'used_cpu_sys'],
  );
const primaryMemory = (cluster) => sum(cluster.primaries(), 'memory', 'used_memory');

/**
 * Bytes the keys matching `pattern` take on the primaries, by MEMORY USAGE (SAMPLES 0: every
 * element counted), and how many keys: the records alone, without the server's buffers.
 */
async function keysMemory(cluster, pattern) {
  let bytes = 0;
  let keys = 0;
  for (const server of cluster.primaries()) {
    const client = createClient({ socket: { host: '127.0.0.1', port: server.port } });
    await client.connect();
    try {
      let cursor = '0';
      do {
        const reply = await client.sendCommand(['SCAN', cursor, 'MATCH', pattern, 'COUNT', '1000']);
        cursor = String(reply[0]);
        const found = reply[1];
        const sizes = await Promise.all(
          found.map((key) => client.sendCommand(['MEMORY', 'USAGE', key, 'SAMPLES', '0'])),
        );
        for (const size of sizes) bytes += Number(size ?? 0);
        keys += found.length;
      } while (cursor !== '0');
    } finally {
      await client.close();
    }
  }
  return { bytes, keys };
}
const ownCpu = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
};

/** Schedules `messages` in batches of 500, `inFlight` batches at a time. */
async function scheduleAll(peer, messages, inFlight = 4) {
  let next = 0;
  let failed = 0;
  const lane = async () => {
    while (next < messages.length) {
      const batch = messages.slice(next, next + 500);
      next += 500;
      try {
        await peer.schedule(batch);
      } catch {
        failed += batch.length;
      }
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  return failed;
}

async function schedulePhase(cluster, peer, n, pattern, inFlight = 4) {
  const due = Date.now() + DAY_MS;
  const messages = Array.from({ length: n }, (_, i) => ({ payload: PAYLOAD, due: due + i }));
  const memory = await primaryMemory(cluster);
  const cpu = await valkeyCpu(cluster);
  const own = ownCpu();
  const started = performance.now();
  const failed = await scheduleAll(peer, messages, inFlight);
  const seconds = (performance.now() - started) / 1000;
  const ownSeconds = ownCpu() - own;
  await sleep(1_500); // replicas and AOF rewrites catch up before CPU and memory are read
  const valkeySeconds = (await valkeyCpu(cluster)) - cpu;
  const bytes = (await primaryMemory(cluster)) - memory;
  const held = await keysMemory(cluster, pattern);
  return {
    messages: n,
    batchesInFlight: inFlight,
    failed,
    seconds: round(seconds, 3),
    perSecond: Math.round(n / seconds),
    valkeyCpuSeconds: round(valkeySeconds, 2),
    perValkeyCpuSecond: Math.round(n / valkeySeconds),
    clientCpuSeconds: round(ownSeconds, 2),
    perClientCpuSecond: Math.round(n / ownSeconds),
    valkeyBytesPerMessage: Math.round(bytes / n),
    keyBytesPerMessage: Math.round(held.bytes / n),
    keys: held.keys,
  };
}

function round(value, digits) {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** B messages due within one second, starting once all can be scheduled (rate-based lead). */
async function burstPhase(peer, burst, perSecond) {
  const lead = Math.ceil((burst / perSecond) * 1.5 * 1000) + 3_000;
  const start = Date.now() + lead;
  const recorder = new LatenessRecorder(burst);
  let last = 0;
  let done;
  const all = new Promise((resolve) => (done = resolve));
  const consumer = peer.consume((due) => {
    const now = Date.now();
    recorder.add(now - due);
    last = now;
    if (recorder.count >= burst) done();
  }, 64);
  const messages = Array.from({ length: burst }, (_, i) => ({
    payload: PAYLOAD,
    due: start + Math.floor((i * 1000) / burst),
  }));
  const failed = await scheduleAll(peer, messages);
  const scheduledBy = Date.now() - start;
  const timeout = sleep(lead + 180_000).then(() => 'timeout');
  const outcome = await Promise.race([all, timeout]);
  await consumer.close();
  return {
    messages: burst,
    failed,
    scheduledBeforeDueMs: -scheduledBy,
    timedOut: outcome === 'timeout',
    lateness: recorder.summary(),
    lastDeliveryAfterLastDueMs: last === 0 ? null : last - (start + 999),
  };
}

/** `rate` messages a second for `seconds`, each due 1 s ahead; the first 2 s are warm-up. */
async function steadyPhase(peer, rate, seconds) {
  const recorder = new LatenessRecorder(rate * seconds);
  const begin = Date.now();
  const measureFrom = begin + 1_000 + 2_000;
  const consumer = peer.consume((due) => {
    if (due >= measureFrom) recorder.add(Date.now() - due);
  }, 64);
  const perTick = Math.max(1, Math.round(rate / 100));
  let failed = 0;
  const pending = new Set();
  for (let tick = 0; Date.now() < begin + seconds * 1000; tick++) {
    const at = begin + tick * 10;
    const wait = at - Date.now();
    if (wait > 0) await sleep(wait);
    const due = Date.now() + 1_000;
    const p = peer
      .schedule(Array.from({ length: perTick }, () => ({ payload: PAYLOAD, due })))
      .catch(() => (failed += perTick))
      .finally(() => pending.delete(p));
    pending.add(p);
  }
  await Promise.all(pending);
  await sleep(2_500);
  await consumer.close();
  return { ratePerSecond: rate, seconds, failed, lateness: recorder.summary() };
}

function startConsumer(kind, urls, queue, nodeId, onLine) {
  return startLines([CONSUMER, kind, urls.join(','), queue, nodeId], onLine);
}

/**
 * Two consumer processes, this process producing `rate`/s due 500 ms ahead; at 5 s `kill()`
 * runs; production goes on for 10 s, then 15 s to drain. Lateness of what fell due after the
 * kill, in the 5 s after it and overall, and what never came.
 */
async function killPhase(kind, cluster, peer, queue, rate, kill) {
  const deliveries = new Map(); // due -> first receivedAt (dues are unique here)
  const onLine = (line) => {
    const [due, at] = line.split(' ').map(Number);
    if (!deliveries.has(due)) deliveries.set(due, at);
  };
  const consumers = [0, 1].map((i) =>
    startConsumer(kind, cluster.urls, queue, `${queue}-c${i}`, onLine),
  );
  await Promise.all(consumers.map((c) => c.started));
  await sleep(3_000); // partitions settle among the three tickwheel nodes
  const begin = Date.now();
  const dues = [];
  let failed = 0;
  let killedAt = 0;
  let killInfo;
  let lastDue = 0;
  const interval = 1000 / rate;
  for (let i = 0; Date.now() < begin + 15_000; i++) {
    const wait = begin + i * interval - Date.now();
    if (wait > 0) await sleep(wait);
    if (killedAt === 0 && Date.now() >= begin + 5_000) {
      killedAt = Date.now();
      killInfo = await kill(consumers);
    }
    let due = Date.now() + 500;
    if (due <= lastDue) due = lastDue + 1;
    lastDue = due;
    dues.push(due);
    peer.schedule([{ payload: PAYLOAD, due }]).catch(() => {
      failed++;
      dues.splice(dues.indexOf(due), 1);
    });
  }
  await sleep(15_000);
  for (const c of consumers) c.child.kill('SIGKILL');
  const after = new LatenessRecorder();
  const within = new LatenessRecorder();
  let missing = 0;
  for (const due of dues) {
    if (due < killedAt) continue;
    const at = deliveries.get(due);
    if (at === undefined) {
      missing++;
      continue;
    }
    after.add(at - due);
    if (due < killedAt + 5_000) within.add(at - due);
  }
  return {
    ratePerSecond: rate,
    ...killInfo,
    scheduleFailures: failed,
    dueAfterKill: after.count + missing,
    notDeliveredIn15s: missing,
    latenessDueWithin5sOfKill: within.summary(),
    latenessDueAfterKill: after.summary(),
  };
}

/** The primary that serves BullMQ's `{bench}` slot (tickwheel has partitions there too). */
function primaryOfBenchSlot(cluster) {
  const slot = Number(
    cli('valkey-server', cluster.servers[0].port, 'CLUSTER', 'KEYSLOT', '{bench}'),
  );
  for (const server of cluster.primaries()) {
    const owned = cli('valkey-server', server.port, 'CLUSTER', 'NODES')
      .split('\n')
      .find((line) => line.includes('myself'));
    for (const range of owned.split(' ').slice(8)) {
      const [from, to = from] = range.split('-').map(Number);
      if (slot >= from && slot <= to) return server;
    }
  }
  throw new Error('no primary serves the {bench} slot');
}

async function runPeer(kind, options) {
  const cluster = await startCluster({ primaries: 3, replicas: 1 });
  const result = { peer: kind };
  const want = (phase) => options.phases.includes(phase);
  try {
    if (want('schedule') && kind === 'tickwheel') {
      result.schedule = {};
      for (const durability of options.durabilities) {
        const queue = `s-${durability}`;
        const peer = await openPeer(kind, cluster.urls, { durability, queue });
        say(`tickwheel schedule (${durability})...`);
        const pattern = `tw:{${queue}*`;
        result.schedule[durability] =
          durability === 'fsynced'
            ? await schedulePhase(cluster, peer, Math.min(options.n, 50_000), pattern, 16)
            : await schedulePhase(cluster, peer, options.n, pattern);
        say(`  ${JSON.stringify(result.schedule[durability])}`);
        await peer.close();
      }
    } else if (want('schedule')) {
      const peer = await openPeer(kind, cluster.urls);
      result.version = peer.version;
      say(`${peer.name} schedule...`);
      result.schedule = { async: await schedulePhase(cluster, peer, options.n, '{bench}*') };
      say(`  ${JSON.stringify(result.schedule.async)}`);
      await peer.close();
    }
    if (!['burst', 'steady', 'nodeKill', 'primaryKill'].some(want)) return result;
    const durability = kind === 'tickwheel' ? 'replicated' : undefined;
    // The burst is scheduled ahead of its due second at the measured rate (or a modest guess).
    const rate = result.schedule ? Object.values(result.schedule).at(-1).perSecond : 10_000;
    const peer = await openPeer(kind, cluster.urls, { durability, queue: 'live' });
    if (want('burst')) {
      say(`${kind} burst of ${options.burst}...`);
      result.burst = await burstPhase(peer, options.burst, rate);
      say(`  ${JSON.stringify(result.burst.lateness)}`);
    }
    if (want('steady')) {
      say(`${kind} steady ${options.steadyRate}/s...`);
      result.steady = await steadyPhase(peer, options.steadyRate, options.steadySeconds);
      say(`  ${JSON.stringify(result.steady.lateness)}`);
    }
    const killRate = Math.max(20, Math.round(options.steadyRate / 5));
    if (want('nodeKill')) {
      say(`${kind} node kill...`);
      result.nodeKill = await killPhase(
        kind,
        cluster,
        peer,
        'live',
        killRate,
        async (consumers) => {
          consumers[0].child.kill('SIGKILL');
          return { killed: 'a consumer process (a tickwheel node; a BullMQ worker)' };
        },
      );
      say(`  ${JSON.stringify(result.nodeKill.latenessDueWithin5sOfKill)}`);
    }
    if (want('primaryKill')) {
      say(`${kind} primary kill...`);
      result.primaryKill = await killPhase(kind, cluster, peer, 'live', killRate, async () => {
        const primary = primaryOfBenchSlot(cluster);
        await primary.crash();
        return { killed: `the Valkey primary serving {bench} (:${primary.port})` };
      });
      say(`  ${JSON.stringify(result.primaryKill.latenessDueWithin5sOfKill)}`);
    }
    await peer.close().catch(() => {});
  } finally {
    await cluster.stop();
  }
  return result;
}

/** A ratio with two significant digits, however small (12 ms vs 2,418 ms is 0.005x, not 0). */
function shown(ours, theirs, lowerIsBetter) {
  const r =
    ratio(ours, theirs, lowerIsBetter) === null
      ? null
      : lowerIsBetter
        ? theirs / ours
        : ours / theirs;
  return r === null ? '-' : `${Number(r.toPrecision(2))}x`;
}

function table(results) {
  const tw = results.find((r) => r.peer === 'tickwheel');
  const bq = results.find((r) => r.peer === 'bullmq');
  const rows = [];
  const line = (what, ours, theirs, lowerIsBetter = false) =>
    rows.push(
      `| ${what} | ${ours ?? '-'} | ${theirs ?? '-'} | ${
        typeof ours === 'number' && typeof theirs === 'number'
          ? shown(ours, theirs, lowerIsBetter)
          : '-'
      } |`,
    );
  rows.push('| | tickwheel | BullMQ | tickwheel vs BullMQ |', '|---|---|---|---|');
  for (const [setting, s] of Object.entries(tw?.schedule ?? {})) {
    const them = bq?.schedule?.async;
    const durability =
      s.batchesInFlight === 4 ? setting : `${setting} (${s.batchesInFlight} batches in flight)`;
    line(`schedules/s, ${durability}`, s.perSecond, them?.perSecond);
    line(
      `schedules per Valkey CPU-s, ${durability}`,
      s.perValkeyCpuSecond,
      them?.perValkeyCpuSecond,
    );
    line(
      `schedules per client CPU-s, ${durability}`,
      s.perClientCpuSecond,
      them?.perClientCpuSecond,
    );
    line(
      `Valkey used_memory per pending message, ${durability}`,
      s.valkeyBytesPerMessage,
      them?.valkeyBytesPerMessage,
      true,
    );
    line(
      `bytes of the queue's keys per pending message (MEMORY USAGE), ${durability}`,
      s.keyBytesPerMessage,
      them?.keyBytesPerMessage,
      true,
    );
  }
  for (const [phase, label] of [
    ['burst', 'burst'],
    ['steady', 'steady'],
  ]) {
    for (const q of ['p50Ms', 'p99Ms', 'maxMs']) {
      line(
        `${label} lateness ${q.replace('Ms', '')} (ms)`,
        tw?.[phase]?.lateness[q],
        bq?.[phase]?.lateness[q],
        true,
      );
    }
  }
  for (const [phase, label] of [
    ['nodeKill', 'node kill'],
    ['primaryKill', 'primary kill'],
  ]) {
    line(
      `${label}: max lateness, due in the 5 s after (ms)`,
      tw?.[phase]?.latenessDueWithin5sOfKill.maxMs,
      bq?.[phase]?.latenessDueWithin5sOfKill.maxMs,
      true,
    );
    line(
      `${label}: not delivered within 15 s`,
      tw?.[phase]?.notDeliveredIn15s,
      bq?.[phase]?.notDeliveredIn15s,
      true,
    );
  }
  return rows.join('\n');
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  if (!installed('valkey-server')) throw new Error('valkey-server is not installed');
  const results = [];
  for (const kind of options.peers) results.push(await runPeer(kind, options));
  const report = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, model: cpus()[0]?.model, loadAverageAtEnd: loadavg() },
    node: process.version,
    valkey: versionOf('valkey-server'),
    options: { ...options, out: undefined },
    results,
  };
  mkdirSync(options.out, { recursive: true });
  writeFileSync(join(options.out, 'cluster.json'), `${JSON.stringify(report, null, 2)}\n`);
  const md = table(results);
  writeFileSync(join(options.out, 'cluster.md'), `${md}\n`);
  process.stdout.write(`${md}\n`);
  say(`wrote ${join(options.out, 'cluster.json')}`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench:cluster: ${err?.stack ?? err}\n`);
    process.exit(1);
  },
);
