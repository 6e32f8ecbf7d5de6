#!/usr/bin/env node
/**
 * Crash harness for idempotent consumers (docs/idempotent.md): a consumer process that moves
 * money between rows of PostgreSQL once per message is SIGKILLed again and again, at chosen
 * points (before the effect, inside its transaction, after the effect and before the done mark,
 * after the commit and before the ack) and at random times, until every message is acked.
 * Then every message's transfer must be in the ledger exactly once (PostgreSQL store) or at
 * least once, with the repeats counted (Redis store), and the money must add up.
 *
 *   npm run crash:idempotent -- [--store postgres|redis] [--messages 400] [--seed N]
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
const POINTS = {
  postgres: ['before-effect', 'inside-effect', 'after-commit', 'random'],
  redis: ['before-effect', 'inside-effect', 'after-effect', 'after-commit', 'random'],
};
const ACCOUNTS = 10;
const OPENING = 1_000_000;

const options = {
  store: 'postgres',
  messages: 400,
  seed: Math.floor(Math.random() * 2 ** 31),
  maxCycles: 2_000,
  report: undefined,
};
parseFlags(process.argv.slice(2), {
  '--store': (v) => (options.store = v),
  '--messages': (v) => (options.messages = Number(v)),
  '--seed': (v) => (options.seed = Number(v)),
  '--max-cycles': (v) => (options.maxCycles = Number(v)),
  '--report': (v) => (options.report = v),
});
if (!(options.store in POINTS)) throw new Error(`--store must be postgres or redis`);

/** Seeded, so that a run can be repeated. */
const random = seededRandom(options.seed);

function runChild(config) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CHILD], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TICKWHEEL_IDEMPOTENT_CHILD: JSON.stringify(config) },
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (t) => (out += t));
    child.stderr.setEncoding('utf8').on('data', (t) => (out += t));
    // A child that hangs is a failure of its own; 60 s is far more than a cycle needs.
    const hang = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('exit', (code, signal) => {
      clearTimeout(hang);
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
const summary = { store: options.store, seed: options.seed, messages: options.messages };
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
  // The messages, scheduled from this process before any consumer runs.
  const { DelayQueue } = await import('../dist/delay-queue.js');
  const queue = await DelayQueue.open({ dir: join(dir, 'queue') });
  const expected = new Map();
  const transfers = [];
  for (let i = 0; i < options.messages; i++) {
    const from = Math.floor(random() * ACCOUNTS);
    const to = (from + 1 + Math.floor(random() * (ACCOUNTS - 1))) % ACCOUNTS;
    const amount = 1 + Math.floor(random() * 1_000);
    // Every kill costs the messages in flight an attempt: enough of them that none goes dead.
    transfers.push({
      topic: 'transfers',
      id: `t-${i}`,
      payload: { from, to, amount },
      maxAttempts: 10_000,
      backoff: { type: 'fixed', delayMs: 20 },
    });
    expected.set(`t-${i}`, { from, to, amount });
  }
  await queue.scheduleMany(transfers);
  await queue.close();

  const kills = Object.fromEntries(POINTS[options.store].map((p) => [p, 0]));
  let cycles = 0;
  let drained = false;
  const base = {
    dir: join(dir, 'queue'),
    pg: postgres.url,
    redis: redis?.url,
    store: options.store,
  };
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
    else throw new Error(`consumer exited ${run.code ?? run.signal} without draining:\n${run.out}`);
    if (cycles % 50 === 0)
      say(`idempotent crash: ${cycles} cycles, kills ${JSON.stringify(kills)}`);
  }
  if (!drained) throw new Error(`not drained after ${cycles} cycles`);

  // What happened, from the ledger and the accounts.
  const rows = (await pool.query('SELECT message, count(*)::int AS n FROM ledger GROUP BY message'))
    .rows;
  const applied = new Map(rows.map((r) => [r.message, r.n]));
  const missing = [...expected.keys()].filter((id) => !applied.has(id));
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
