#!/usr/bin/env node
/**
 * Chaos harness for tickwheel's partitioned queue on Valkey/Redis (docs/cluster.md, "Chaos")
 * and on PostgreSQL (docs/postgres.md).
 *
 *   node scripts/chaos.mjs [--backend valkey|postgres] [--kills 200] [--seed S]
 *                          [--interval-ms 3000] [--nodes 3] [--rate 100] [--primary-share 0.4]
 *                          [--lose-primary] [--durability replicated|fsynced|async]
 *                          [--replica sync|async] [--report FILE] [--keep-journals] [--quiet]
 *
 * Starts the store (scripts/chaos-stores.mjs: a Valkey Cluster of 3 primaries + 3 replicas, or
 * one PostgreSQL) and `--nodes` tickwheel nodes (scripts/chaos-node.mjs, each a DelayQueue on it
 * that schedules, cancels and consumes, journaling every operation whose promise resolved).
 * Every `--interval-ms` (jittered) it SIGKILLs, at random:
 *
 *   - a tickwheel node, started again 0.2-1.5 s later under the same node id;
 *   - or, with probability --primary-share, the store: a Valkey primary (its replica promoted,
 *     the killed process started again as a replica once the promotion is done; the next
 *     primary kill waits until every shard has a synced replica again), or PostgreSQL itself
 *     (every server process; started again on its data 0.2-1.5 s later: crash recovery).
 *
 * With --replica (PostgreSQL), the nodes reach a primary with a streaming standby through one
 * address (scripts/postgres-pair.mjs); every other PostgreSQL kill, the first one included, is
 * a failover (the primary SIGKILLed, the standby promoted, the address moved to it, a new
 * standby made). `sync`: the
 * standby is synchronous with remote_apply (no answered commit lost); `async`: it is not, and the
 * violations counted are what a failover lost.
 *
 * With --lose-primary (Valkey), the first primary killed is lost for good (never started
 * again): its shard runs on the promoted replica alone for the rest of the run, where schedules
 * with durability 'replicated' are refused (NOT_DURABLE, so not acknowledged) while fires and
 * deliveries go on. Later primary kills spare that shard (it has no replica to promote).
 *
 * After the last kill, producing stops (each node's schedules in flight resolve and are journaled
 * first), the nodes drain what is due, and the journals are checked:
 *
 *   - every acknowledged schedule is delivered, unless a cancel of it was tried (a cancel that
 *     failed may still have happened);
 *   - no acknowledged cancel is delivered (cancels are made only while due > 1 s ahead);
 *   - nothing is delivered before its due time (receivedAt >= deliverAt, one clock);
 *   - every delivery carries the payload it was scheduled with (hash);
 *   - duplicates (deliveries after the first) are counted and reported, not violations: the
 *     queue delivers at least once.
 *
 * Exit status: 0 without violations, 1 with violations, 2 if the harness could not run.
 */

import { spawn } from 'node:child_process';
import {
  appendFileSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { seededRandom } from '../test/support/random.mjs';
import { parseFlags } from './flags.mjs';
import { postgresStore, valkeyStore } from './chaos-stores.mjs';
import { postgresInstalled } from './postgres.mjs';
import { installed } from './valkey.mjs';

const NODE_SCRIPT = fileURLToPath(new globalThis.URL('./chaos-node.mjs', import.meta.url));

const USAGE = `usage: node scripts/chaos.mjs [--backend valkey|postgres] [--kills 200] [--seed S]
                              [--interval-ms 3000] [--nodes 3] [--rate 100] [--primary-share 0.4]
                              [--lose-primary] [--durability replicated|fsynced|async]
                              [--replica sync|async] [--report FILE] [--keep-journals]
                              [--quiet] [--help]

Starts a Valkey Cluster of 3 primaries + 3 replicas (or, with --backend postgres, one
PostgreSQL, with --replica a primary and a standby) and --nodes tickwheel nodes under load,
SIGKILLs nodes and the store (a primary, or PostgreSQL itself, or a PostgreSQL failover) at
random every --interval-ms, then checks that every acknowledged schedule
was delivered, none early, payloads intact (docs/cluster.md, "Chaos"; docs/postgres.md).
Exit status: 0 without violations, 1 with violations, 2 if the harness could not run.
`;

function parseArgs(argv) {
  const options = {
    kills: 200,
    seed: (Math.random() * 2 ** 31) >>> 0,
    intervalMs: 3_000,
    nodes: 3,
    rate: 100,
    primaryShare: 0.4,
    losePrimary: false,
    durability: 'replicated',
    replica: undefined,
    backend: 'valkey',
    report: undefined,
    quiet: false,
    keep: false,
    help: false,
  };
  parseFlags(argv, {
    '--help': () => (options.help = true),
    '-h': () => (options.help = true),
    '--kills': (v) => (options.kills = Number(v)),
    '--seed': (v) => (options.seed = Number(v) >>> 0),
    '--interval-ms': (v) => (options.intervalMs = Number(v)),
    '--nodes': (v) => (options.nodes = Number(v)),
    '--rate': (v) => (options.rate = Number(v)),
    '--primary-share': (v) => (options.primaryShare = Number(v)),
    '--lose-primary': () => (options.losePrimary = true),
    '--durability': (v) => (options.durability = v),
    '--backend': (v) => (options.backend = v),
    '--replica': (v) => (options.replica = v),
    '--report': (v) => (options.report = v),
    '--quiet': () => (options.quiet = true),
    '--keep-journals': () => (options.keep = true),
  });
  for (const key of ['kills', 'intervalMs', 'nodes', 'rate']) {
    if (!Number.isFinite(options[key]) || options[key] < 0) {
      throw new Error(`--${key} must be a number >= 0`);
    }
  }
  if (!['valkey', 'postgres'].includes(options.backend)) {
    throw new Error(`--backend must be valkey or postgres, not ${options.backend}`);
  }
  if (options.replica !== undefined && !['sync', 'async'].includes(options.replica)) {
    throw new Error(`--replica must be sync or async, not ${options.replica}`);
  }
  if (options.replica !== undefined && options.backend !== 'postgres') {
    throw new Error('--replica is for --backend postgres');
  }
  if (!['async', 'replicated', 'fsynced'].includes(options.durability)) {
    throw new Error(`--durability must be async, replicated or fsynced, not ${options.durability}`);
  }
  return options;
}

class NodeProcess {
  constructor(id, urls, dir, seed, rate, durability, say) {
    Object.assign(this, { id, urls, dir, seed, rate, durability, say });
    this.incarnation = 0;
    this.child = undefined;
  }

  async start() {
    const journal = join(this.dir, `${this.id}.${this.incarnation++}.log`);
    const child = spawn(
      process.execPath,
      [
        NODE_SCRIPT,
        this.id,
        this.urls.join(','),
        journal,
        String(this.seed + this.incarnation),
        String(this.rate),
        this.durability,
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    this.child = child;
    this.stderr = '';
    const errors = `${journal.slice(0, -4)}.err`;
    child.stderr.setEncoding('utf8').on('data', (text) => {
      this.stderr = (this.stderr + text).slice(-20_000);
      appendFileSync(errors, text);
    });
    this.out = '';
    await new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${this.id} did not start: ${this.stderr}`)),
        30_000,
      );
      child.stdout.setEncoding('utf8').on('data', (text) => {
        this.out += text;
        if (this.out.includes('ready\n')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`${this.id} exited (${code ?? signal}) while starting: ${this.stderr}`));
      });
    });
    child.removeAllListeners('exit');
  }

  get running() {
    return (
      this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null
    );
  }

  async kill() {
    if (!this.running) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGKILL');
    await exited;
  }

  /**
   * Ends producing and resolves once every lane of the node has ended: a schedule still in
   * flight when "stop" arrives journals its S line when it resolves, and the drain must not be
   * judged before that line is there.
   */
  async stopProducing() {
    if (!this.running) return;
    const child = this.child;
    child.stdin.write('stop\n');
    await new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${this.id} did not stop producing in 60 s: ${this.stderr}`)),
        60_000,
      );
      const done = () => {
        clearTimeout(timer);
        child.stdout.off('data', check);
        child.off('exit', done);
        resolve();
      };
      const check = () => {
        if (this.out.includes('stopped producing\n')) done();
      };
      child.stdout.on('data', check);
      child.once('exit', done);
      check();
    });
  }

  /** Asks the node to write what its partition owners hold to its stderr. */
  dump() {
    if (this.running) this.child.kill('SIGUSR2');
  }

  async close() {
    if (!this.running) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  }
}

/** Every journal line of every incarnation of every node. */
function readJournals(dir) {
  const scheduled = new Map();
  const cancelled = new Set();
  const cancelTried = new Set();
  const deliveries = new Map();
  for (const file of readdirSync(dir)) {
    if (!file.endsWith('.log')) continue;
    for (const line of readFileSync(join(dir, file), 'utf8').split('\n')) {
      const parts = line.split(' ');
      if (parts[0] === 'S' && parts.length === 4) {
        scheduled.set(parts[1], { deliverAt: Number(parts[2]), hash: parts[3] });
      } else if (parts[0] === 'C' && parts.length === 2) {
        cancelled.add(parts[1]);
      } else if (parts[0] === 'c' && parts.length === 2) {
        cancelTried.add(parts[1]);
      } else if (parts[0] === 'D' && parts.length === 6) {
        const list = deliveries.get(parts[1]) ?? [];
        list.push({
          deliverAt: Number(parts[2]),
          hash: parts[3],
          attempts: Number(parts[4]),
          at: Number(parts[5]),
        });
        deliveries.set(parts[1], list);
      }
      // A torn last line (the kill came mid-write) matches none of the shapes: skipped.
    }
  }
  return { scheduled, cancelled, cancelTried, deliveries };
}

function check({ scheduled, cancelled, cancelTried, deliveries }) {
  const violations = [];
  let duplicates = 0;
  let maxLateMs = 0;
  const lateness = [];
  for (const id of scheduled.keys()) {
    const got = deliveries.get(id) ?? [];
    if (cancelled.has(id)) {
      if (got.length > 0) violations.push(`${id}: cancel was acknowledged, yet delivered`);
      continue;
    }
    // A cancel that failed (its promise rejected, or the node was killed first) may still
    // have happened: such a message may or may not come.
    if (got.length === 0 && !cancelTried.has(id)) {
      violations.push(`${id}: acknowledged schedule never delivered`);
    }
  }
  for (const [id, got] of deliveries) {
    duplicates += got.length - 1;
    const sent = scheduled.get(id);
    for (const d of got) {
      if (d.at < d.deliverAt) violations.push(`${id}: delivered ${d.deliverAt - d.at} ms early`);
      if (sent === undefined) continue;
      if (d.hash !== sent.hash) violations.push(`${id}: payload changed`);
      if (d.at < sent.deliverAt) {
        violations.push(`${id}: delivered ${sent.deliverAt - d.at} ms before it was scheduled for`);
      }
      // A first attempt is due when it was scheduled for; a retry later (its backoff's time).
      if (d.attempts === 1 ? d.deliverAt !== sent.deliverAt : d.deliverAt < sent.deliverAt) {
        violations.push(
          `${id}: attempt ${d.attempts} due ${d.deliverAt}, scheduled for ${sent.deliverAt}`,
        );
      }
    }
    if (sent === undefined) continue;
    // Lateness of the first delivery, from the time it was scheduled for.
    const first = Math.min(...got.map((d) => d.at)) - sent.deliverAt;
    lateness.push(first);
    maxLateMs = Math.max(maxLateMs, first);
  }
  lateness.sort((a, b) => a - b);
  const pick = (q) => (lateness.length ? lateness[Math.floor(q * (lateness.length - 1))] : null);
  return {
    violations,
    duplicates,
    lateness: { p50: pick(0.5), p99: pick(0.99), max: maxLateMs },
  };
}

async function main() {
  let options;
  try {
    options = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`chaos: ${err.message}\n${USAGE}`);
    return 2;
  }
  if (options.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (options.backend === 'valkey' && !installed('valkey-server')) {
    process.stderr.write('chaos: valkey-server is not installed\n');
    return 2;
  }
  if (options.backend === 'postgres' && !postgresInstalled()) {
    process.stderr.write('chaos: PostgreSQL is not installed\n');
    return 2;
  }
  const say = options.quiet ? () => {} : (line) => process.stdout.write(`${line}\n`);
  const random = seededRandom(options.seed);
  const dir = mkdtempSync(join(tmpdir(), 'tickwheel-chaos-'));
  say(
    `chaos: seed ${options.seed}, ${options.kills} kills every ~${options.intervalMs} ms, journals in ${dir}`,
  );
  const store =
    options.backend === 'postgres' ? await postgresStore(options) : await valkeyStore(options);
  const nodes = Array.from(
    { length: options.nodes },
    (_, i) =>
      new NodeProcess(
        `chaos-${i}`,
        store.urls,
        dir,
        options.seed * 7 + i * 1_000,
        options.rate,
        options.durability,
        say,
      ),
  );
  const kills = { node: 0, [store.kind]: 0 };
  const events = join(dir, 'events.txt');
  const note = (line) => appendFileSync(events, `${Date.now()} ${line}\n`);
  const started = Date.now();
  let failed;
  try {
    for (const node of nodes) await node.start();
    say(`chaos: ${nodes.length} nodes up`);
    for (let k = 0; k < options.kills; k++) {
      await sleep(options.intervalMs * (0.5 + random()));
      const last = k === options.kills - 1;
      let killStore = random() < options.primaryShare;
      // Each kind at least once when it is asked for at all, whatever the dice said.
      if (last && kills[store.kind] === 0 && options.primaryShare > 0) killStore = true;
      if (last && kills.node === 0 && options.primaryShare < 1) killStore = false;
      if (killStore) {
        await store.kill(k, random, note, say);
        kills[store.kind]++;
      } else {
        const victim = nodes[Math.floor(random() * nodes.length)];
        note(`kill node ${victim.id}`);
        await victim.kill();
        kills.node++;
        say(`chaos: kill ${k + 1}: node ${victim.id}`);
        await sleep(200 + random() * 1_300);
        await victim.start();
        note(`started node ${victim.id}`);
      }
    }
    say('chaos: kills done; producing stops, draining');
    await Promise.all(nodes.map((node) => node.stopProducing()));
    // Everything is due within 3 s of its schedule; give retries and takeovers time as well.
    const drainUntil = Date.now() + 60_000;
    for (;;) {
      await sleep(1_000);
      const journals = readJournals(dir);
      const missing = [...journals.scheduled.keys()].filter(
        (id) => !journals.cancelTried.has(id) && !journals.deliveries.has(id),
      );
      if (missing.length === 0 || Date.now() > drainUntil) break;
    }
  } catch (err) {
    failed = err;
  } finally {
    // The post-mortem while the nodes still run: what they hold and wait for.
    if (failed === undefined) {
      const journals = readJournals(dir);
      const missing = [...journals.scheduled.keys()].filter(
        (id) => !journals.cancelTried.has(id) && !journals.deliveries.has(id),
      );
      if (missing.length > 0) {
        // Each node writes what its partition owners hold to its stderr (chaos-node.mjs).
        for (const node of nodes) node.dump();
        await sleep(500);
        await store
          .postMortem(missing, journals.scheduled, note, say)
          .catch((err) => say(`post-mortem failed: ${err}`));
      }
    }
    for (const node of nodes) await node.close().catch(() => {});
    await store.stop().catch(() => {});
  }
  if (failed !== undefined) {
    process.stderr.write(`chaos: could not run: ${failed.stack ?? failed}\n`);
    for (const node of nodes) process.stderr.write(`--- ${node.id} stderr ---\n${node.stderr}\n`);
    return 2;
  }
  const journals = readJournals(dir);
  const result = check(journals);
  const summary = {
    seed: options.seed,
    kills,
    seconds: Math.round((Date.now() - started) / 1000),
    scheduled: journals.scheduled.size,
    cancelled: journals.cancelled.size,
    delivered: journals.deliveries.size,
    duplicates: result.duplicates,
    firstDeliveryLatenessMs: result.lateness,
    backend: options.backend,
    ...store.summary(),
    violations: result.violations.length,
  };
  say(`chaos: ${JSON.stringify(summary)}`);
  for (const line of result.violations.slice(0, 50)) say(`violation: ${line}`);
  if (options.report !== undefined) {
    writeFileSync(
      options.report,
      `${JSON.stringify({ ...summary, violationList: result.violations.slice(0, 1000) }, null, 2)}\n`,
    );
  }
  if (result.violations.length === 0 && !options.keep)
    rmSync(dir, { recursive: true, force: true });
  else say(`chaos: journals kept in ${dir}`);
  return result.violations.length === 0 ? 0 : 1;
}

process.exitCode = await main();
