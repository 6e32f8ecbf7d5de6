#!/usr/bin/env node
/**
 * Crash harness for idempotent consumers (docs/idempotent.md): a consumer process that moves
 * money between rows of PostgreSQL once per message is SIGKILLed again and again, at chosen
 * points (before the effect, inside its transaction, after the effect and before the done mark,
 * after the commit and before the ack) and at random times, until every message is acked.
 * Then every message's transfer must be in the ledger exactly once (PostgreSQL store) or at
 * least once, with the repeats counted (Redis store), and the money must add up.
 *
 * With `--queue postgres` the queue is in the same PostgreSQL (docs/postgres.md): a producer
 * process (idempotent-producer.mjs) records each transfer and schedules its message in one
 * transaction, and rolls back a transfer in five; it is SIGKILLed at random and started again,
 * and PostgreSQL itself is SIGKILLed (every server process, then crash recovery) `--postgres-kills`
 * times while the consumers run. Every committed transfer must then be applied exactly once and
 * no rolled-back one ever.
 *
 *   npm run crash:idempotent -- [--store postgres|redis] [--queue embedded|postgres]
 *                               [--messages 400] [--postgres-kills 8] [--seed N]
 *                               [--max-cycles 2000] [--report file.json]
 *
 * Starts its own PostgreSQL (and Valkey or Redis for the Redis store); needs a build (dist/).
 */

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { URL, fileURLToPath } from 'node:url';
import pg from 'pg';
import { seededRandom } from '../test/support/random.mjs';
import { parseFlags } from './flags.mjs';
import { startPostgres } from './postgres.mjs';
import { installed, startServer } from './valkey.mjs';

const CHILD = fileURLToPath(new URL('./idempotent-consumer.mjs', import.meta.url));
const PRODUCER = fileURLToPath(new URL('./idempotent-producer.mjs', import.meta.url));
/** The queue's name on PostgreSQL, with few partitions and short leases: a killed node's
 * partitions pass to the next consumer within a second. */
const QUEUE = 'transfers-crash';
const POINTS = {
  postgres: ['before-effect', 'inside-effect', 'after-commit', 'random'],
  redis: ['before-effect', 'inside-effect', 'after-effect', 'after-commit', 'random'],
};
const ACCOUNTS = 10;
const OPENING = 1_000_000;

const options = {
  store: 'postgres',
  queue: 'embedded',
  messages: 400,
  postgresKills: 8,
  seed: Math.floor(Math.random() * 2 ** 31),
  maxCycles: 2_000,
  report: undefined,
};
parseFlags(process.argv.slice(2), {
  '--store': (v) => (options.store = v),
  '--queue': (v) => (options.queue = v),
  '--messages': (v) => (options.messages = Number(v)),
  '--postgres-kills': (v) => (options.postgresKills = Number(v)),
  '--seed': (v) => (options.seed = Number(v)),
  '--max-cycles': (v) => (options.maxCycles = Number(v)),
  '--report': (v) => (options.report = v),
});
if (!(options.store in POINTS)) throw new Error(`--store must be postgres or redis`);
if (!['embedded', 'postgres'].includes(options.queue)) {
  throw new Error('--queue must be embedded or postgres');
}
const onPostgres = options.queue === 'postgres';

/** Seeded, so that a run can be repeated. */
const random = seededRandom(options.seed);

/**
 * Runs a child process; SIGKILLs it after `kill.afterMs` or once its output holds `kill.lines`
 * lines starting with `kill.line`, if given (and after 60 s anyway).
 */
function runChild(config, script = CHILD, kill = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [script], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TICKWHEEL_IDEMPOTENT_CHILD: JSON.stringify(config) },
    });
    let out = '';
    const counted = () => out.split('\n').filter((l) => l.startsWith(kill.line)).length;
    child.stdout.setEncoding('utf8').on('data', (t) => {
      out += t;
      if (kill.line !== undefined && counted() >= kill.lines) child.kill('SIGKILL');
    });
    child.stderr.setEncoding('utf8').on('data', (t) => (out += t));
    // A child that hangs is a failure of its own; 60 s is far more than a cycle needs.
    const hang = setTimeout(() => child.kill('SIGKILL'), 60_000);
    const timer =
      kill.afterMs === undefined
        ? undefined
        : setTimeout(() => child.kill('SIGKILL'), kill.afterMs);
    child.on('exit', (code, signal) => {
      clearTimeout(hang);
      clearTimeout(timer);
      resolve({ code, signal, out, drained: out.includes('drained') });
    });
  });
}

const say = (line) => process.stdout.write(`${line}\n`);
const dir = mkdtempSync(join(tmpdir(), 'tickwheel-idem-'));
const postgres = await startPostgres();
let redis;
const pool = new pg.Pool({ connectionString: postgres.url, max: 2 });
let failed;
pool.on('error', () => {});
const summary = {
  store: options.store,
  queue: options.queue,
  seed: options.seed,
  messages: options.messages,
};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
/** Set once the consumers are drained (or the run failed): the producer and the kills stop. */
let stopping = false;

/** The embedded queue's messages, scheduled from this process before any consumer runs. */
async function scheduleUpFront(expected) {
  const { DelayQueue } = await import('../dist/delay-queue.js');
  const queue = await DelayQueue.open({ dir: join(dir, 'queue') });
  await queue.scheduleMany(
    [...expected].map(([id, { from, to, amount }]) => ({
      topic: 'transfers',
      id,
      payload: { from, to, amount },
      // Every kill costs the messages in flight an attempt: enough of them that none goes dead.
      maxAttempts: 10_000,
      backoff: { type: 'fixed', delayMs: 20 },
    })),
  );
  await queue.close();
}
try {
  if (options.store === 'redis') {
    redis = await startServer({
      binary: installed('valkey-server') ? 'valkey-server' : 'redis-server',
      args: ['--appendonly', 'yes', '--appendfsync', 'always'],
    });
  }
  await pool.query(`CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL)`);
  await pool.query(`CREATE TABLE ledger (seq bigserial PRIMARY KEY, message text NOT NULL,
    amount bigint NOT NULL)`);
  for (let id = 0; id < ACCOUNTS; id++) {
    await pool.query('INSERT INTO accounts VALUES ($1, $2)', [id, OPENING]);
  }
  const expected = new Map();
  for (let i = 0; i < options.messages; i++) {
    const from = Math.floor(random() * ACCOUNTS);
    const to = (from + 1 + Math.floor(random() * (ACCOUNTS - 1))) % ACCOUNTS;
    const amount = 1 + Math.floor(random() * 1_000);
    expected.set(`t-${i}`, { from, to, amount, delayMs: Math.floor(random() * 300) });
  }
  const queueOptions = { queue: QUEUE, partitions: 4, leaseMs: 1_000 };
  if (!onPostgres) await scheduleUpFront(expected);
  else {
    await pool.query(`CREATE TABLE transfers (id text PRIMARY KEY, source int NOT NULL,
      target int NOT NULL, amount bigint NOT NULL)`);
  }

  const kills = Object.fromEntries(POINTS[options.store].map((p) => [p, 0]));
  if (onPostgres) Object.assign(kills, { producer: 0, postgres: 0 });
  let cycles = 0;
  let drained = false;
  const base = {
    dir: join(dir, 'queue'),
    pg: postgres.url,
    redis: redis?.url,
    store: options.store,
    ...(onPostgres ? { queue: queueOptions, expected: options.messages } : {}),
  };
  // With the queue on PostgreSQL: the producer and PostgreSQL's kills run beside the consumers.
  const producing = onPostgres ? produce() : Promise.resolve();
  const killing = onPostgres ? killPostgres() : Promise.resolve();
  try {
    while (!drained && cycles < options.maxCycles) {
      cycles++;
      const points = POINTS[options.store];
      const point = points[Math.floor(random() * points.length)];
      // Kills at a point after 0-2 messages have run there; random ones 0-30 ms into consuming.
      const after = Math.floor(random() * (point === 'random' ? 30 : 3));
      const began = Date.now();
      const run = await runChild({ ...base, point, after });
      if (process.env.TW_DEBUG)
        say(
          `cycle ${cycles} ${point} after ${after}: ${Date.now() - began} ms ${run.signal ?? run.code}`,
        );
      if (run.drained) {
        drained = true;
        summary.dead = Number(/drained dead=(\d+)/.exec(run.out)?.[1] ?? NaN);
      } else if (run.signal === 'SIGKILL') kills[point]++;
      else
        throw new Error(`consumer exited ${run.code ?? run.signal} without draining:\n${run.out}`);
      if (cycles % 50 === 0)
        say(`idempotent crash: ${cycles} cycles, kills ${JSON.stringify(kills)}`);
    }
  } finally {
    stopping = true;
    await Promise.all([producing, killing]);
  }

  /**
   * The producer, started again until it is done and SIGKILLed in each run: in every other run
   * (the first among them) after 1-30 of the transfers still to come are committed, so that it
   * is killed mid-way however fast it goes; in the others 100-1,500 ms in, opening included.
   */
  async function produce() {
    const transfers = [...expected].map(([id, t]) => ({ id, ...t }));
    let committed = 0;
    for (let run = 0; !stopping; run++) {
      const left = transfers.length - committed;
      const kill =
        run % 2 === 0 && left > 1
          ? { line: 'committed', lines: 1 + Math.floor(random() * Math.min(30, left - 1)) }
          : { afterMs: 100 + Math.floor(random() * 1_400) };
      const { out, signal, code } = await runChild(
        { pg: postgres.url, queue: queueOptions, transfers },
        PRODUCER,
        kill,
      );
      committed += out.split('\n').filter((l) => l.startsWith('committed')).length;
      if (out.includes('produced')) return;
      if (signal !== 'SIGKILL') throw new Error(`producer exited ${code}:\n${out}`);
      kills.producer++;
    }
  }

  /** SIGKILLs PostgreSQL every 0.5-3 s and starts it again (crash recovery), while consumers run. */
  async function killPostgres() {
    while (!stopping && kills.postgres < options.postgresKills) {
      await sleep(500 + Math.floor(random() * 2_500));
      if (stopping) return;
      await postgres.crash();
      kills.postgres++;
      await sleep(Math.floor(random() * 300));
      await postgres.restart();
    }
  }
  if (!drained) throw new Error(`not drained after ${cycles} cycles`);

  // What happened, from the ledger and the accounts.
  const rows = (await pool.query('SELECT message, count(*)::int AS n FROM ledger GROUP BY message'))
    .rows;
  const applied = new Map(rows.map((r) => [r.message, r.n]));
  const missing = [...expected.keys()].filter((id) => !applied.has(id));
  // Rolled back with their message (queue on PostgreSQL), or never scheduled: never applied.
  const unexpected = [...applied.keys()].filter((id) => !expected.has(id));
  for (const id of unexpected) applied.delete(id);
  const repeated = [...applied].filter(([, n]) => n > 1);
  const balances = new Map(
    (await pool.query('SELECT id, balance FROM accounts')).rows.map((r) => [
      r.id,
      Number(r.balance),
    ]),
  );
  // The balances the ledger implies (each application of a transfer counted): they must match
  // the accounts whatever the store, since each application wrote both in one transaction.
  const implied = new Map(Array.from({ length: ACCOUNTS }, (_, id) => [id, OPENING]));
  for (const [id, n] of applied) {
    const t = expected.get(id);
    implied.set(t.from, implied.get(t.from) - n * t.amount);
    implied.set(t.to, implied.get(t.to) + n * t.amount);
  }
  const unbalanced = [...balances].filter(([id, b]) => implied.get(id) !== b).length;
  const total = [...balances.values()].reduce((a, b) => a + b, 0);
  Object.assign(summary, {
    cycles,
    kills,
    applied: applied.size,
    missing: missing.length,
    unexpected: unexpected.length,
    repeated: repeated.length,
    repeats: repeated.reduce((a, [, n]) => a + n - 1, 0),
    unbalancedAccounts: unbalanced,
    totalMoney: total,
    totalExpected: OPENING * ACCOUNTS,
  });
  const violations = [];
  if (missing.length > 0)
    violations.push(`${missing.length} messages never applied: ${missing.slice(0, 5)}`);
  if (summary.dead !== 0) violations.push(`${summary.dead} messages dead-lettered`);
  if (unexpected.length > 0) {
    violations.push(
      `${unexpected.length} rolled-back transfers applied: ${unexpected.slice(0, 5)}`,
    );
  }
  if (total !== OPENING * ACCOUNTS) violations.push(`money created or lost: ${total}`);
  if (unbalanced > 0) violations.push(`${unbalanced} accounts differ from the ledger`);
  if (options.store === 'postgres' && repeated.length > 0) {
    violations.push(`${repeated.length} messages applied more than once`);
  }
  summary.violations = violations;
} catch (err) {
  failed = err;
} finally {
  await pool.end().catch(() => {});
  await postgres.stop().catch(() => {});
  await redis?.stop().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
}
if (failed !== undefined) {
  summary.error = String(failed?.stack ?? failed);
  summary.violations = [
    ...(summary.violations ?? []),
    `harness failed: ${failed?.message ?? failed}`,
  ];
}
say(`idempotent crash: ${JSON.stringify(summary)}`);
if (options.report !== undefined)
  writeFileSync(options.report, `${JSON.stringify(summary, null, 2)}\n`);
process.exitCode = summary.violations.length === 0 ? 0 : 1;
