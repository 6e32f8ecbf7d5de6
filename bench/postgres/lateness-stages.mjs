#!/usr/bin/env node
/**
 * Where the firing lateness of a queue on PostgreSQL goes, stage by stage: `--rate` messages a
 * second due `--lead` ms after they are scheduled, for `--seconds`, consumed in this process
 * (concurrency 10, prefetch 500, 64 partitions, `fireIntervalMs` and `fireAheadMs` as given). For each message:
 *
 *   wait     its due time -> the start of the fire call that makes it ready (the owner's timer,
 *            the node's gap between fire calls, a fire call under way); below 0 when fired ahead
 *   fire     the fire call (one transaction for every partition's due messages)
 *   to-take  the fire call's answer -> the start of the take that hands it out (notification,
 *            and when fired ahead the wait for the due time)
 *   due-take its due time -> the start of that take (not a stage of its own: the sum of the
 *            three above, less the due time)
 *   take     the take call
 *   handler  the take's answer -> its handler
 *
 * The stages are timed by wrapping the driver's fire, fireMany and take in dist/ (this
 * checkout's build), so they cost a little themselves.
 *
 *   node bench/postgres/lateness-stages.mjs [--rate 1000] [--seconds 10] [--lead 2000]
 *                                           [--fire-interval 10] [--fire-ahead 50] [--url URL]
 *                                           [--out FILE]
 *
 * Without --url a throwaway PostgreSQL is started (scripts/postgres.mjs).
 */

import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { URL } from 'node:url';
import { parseFlags } from '../../scripts/flags.mjs';
import { startPostgres } from '../../scripts/postgres.mjs';

const DIST = new URL('../../dist/', import.meta.url);
const STAGES = ['wait', 'fire', 'to-take', 'due-take', 'take', 'handler'];

/** Wraps `method` of `proto`: `seen(startMs, endMs, args, answer)` after each call. */
function timed(proto, method, seen) {
  const original = proto[method];
  if (original === undefined) return;
  proto[method] = async function (...args) {
    const start = performance.now();
    const answer = await original.apply(this, args);
    seen(start, performance.now(), args, answer);
    return answer;
  };
}

function percentile(values, p) {
  const sorted = Float64Array.from(values).sort();
  return sorted.length === 0
    ? null
    : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

function summary(values) {
  const round = (v) => (v === null ? null : Math.round(v * 10) / 10);
  return {
    p50: round(percentile(values, 0.5)),
    p90: round(percentile(values, 0.9)),
    p99: round(percentile(values, 0.99)),
    max: round(percentile(values, 1)),
  };
}

async function main(argv) {
  const options = { rate: 1000, seconds: 10, lead: 2000, fireInterval: 10, fireAhead: 50 };
  parseFlags(argv, {
    '--rate': (v) => (options.rate = Number(v)),
    '--seconds': (v) => (options.seconds = Number(v)),
    '--lead': (v) => (options.lead = Number(v)),
    '--fire-interval': (v) => (options.fireInterval = Number(v)),
    '--fire-ahead': (v) => (options.fireAhead = Number(v)),
    '--url': (v) => (options.url = v),
    '--out': (v) => (options.out = v),
  });
  for (const name of ['rate', 'seconds', 'lead']) {
    if (!(options[name] > 0)) throw new Error(`--${name} must be a positive number`);
  }
  const { DelayQueue } = await import(new URL('delay-queue.js', DIST).href);
  const { PostgresDriver } = await import(new URL('postgres/driver.js', DIST).href);
  const fired = new Map();
  const taken = new Map();
  const fireOf = (start, end, calls) => {
    for (const call of calls) for (const { id } of call.at) fired.set(id, [start, end]);
  };
  timed(PostgresDriver.prototype, 'fire', (s, e, args) => fireOf(s, e, [{ at: args[3] }]));
  timed(PostgresDriver.prototype, 'fireMany', (s, e, args) => fireOf(s, e, args[0]));
  timed(PostgresDriver.prototype, 'take', (s, e, _args, rows) => {
    for (const { id } of rows) taken.set(id, [s, e]);
  });

  const server = options.url === undefined ? await startPostgres() : undefined;
  const queue = await DelayQueue.open({
    postgres: options.url ?? server.url,
    queue: `stages_${process.pid}`,
    partitions: 64,
    fireIntervalMs: options.fireInterval,
    fireAheadMs: options.fireAhead,
  });
  const stages = Object.fromEntries(STAGES.map((stage) => [stage, []]));
  const lateness = [];
  const total = Math.round(options.rate * options.seconds);
  const epoch = (t) => performance.timeOrigin + t;
  const consumer = queue.consume(
    'stages',
    (message) => {
      const now = performance.now();
      const due = message.payload.due;
      lateness.push(epoch(now) - due);
      const fire = fired.get(message.id);
      const take = taken.get(message.id);
      if (fire === undefined || take === undefined) return;
      stages.wait.push(epoch(fire[0]) - due);
      stages.fire.push(fire[1] - fire[0]);
      stages['to-take'].push(take[0] - fire[1]);
      stages['due-take'].push(epoch(take[0]) - due);
      stages.take.push(take[1] - take[0]);
      stages.handler.push(now - take[1]);
    },
    { concurrency: 10, prefetch: 500 },
  );
  try {
    // Ten batches a second, each message due `lead` ms after its batch's moment.
    const perBatch = Math.max(1, Math.round(options.rate / 10));
    const start = Date.now() + 200;
    for (let sent = 0, k = 0; sent < total; k++) {
      const at = start + k * 100;
      while (Date.now() < at) await sleep(2);
      const n = Math.min(perBatch, total - sent);
      const batch = Array.from({ length: n }, (_, i) => {
        const due = at + options.lead + Math.floor((i * 100) / n);
        return { topic: 'stages', payload: { due }, deliverAt: due };
      });
      await queue.scheduleMany(batch);
      sent += n;
    }
    const until = Date.now() + options.lead + 30_000;
    while (lateness.length < total && Date.now() < until) await sleep(50);
  } finally {
    await consumer.close();
    await queue.close();
    await server?.stop();
  }
  const result = {
    at: new Date().toISOString(),
    options: { ...options, url: undefined },
    delivered: lateness.length,
    scheduled: total,
    lateness: summary(lateness),
    stages: Object.fromEntries(STAGES.map((stage) => [stage, summary(stages[stage])])),
  };
  console.log(`delivered ${result.delivered} of ${total}; lateness (ms)`, result.lateness);
  for (const stage of STAGES) console.log(stage.padEnd(8), result.stages[stage]);
  if (options.out !== undefined) writeFileSync(options.out, `${JSON.stringify(result, null, 2)}\n`);
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
