#!/usr/bin/env node
/**
 * A node of a queue on PostgreSQL killed under load: how soon the partitions it owned deliver
 * again from the others (issue target: within 3 s). Three nodes of one queue: this process
 * producing `--rate` messages a second due 500 ms ahead, and two consumer processes (each a
 * node, `consume()` with concurrency 10). After `--settle` seconds of production one consumer
 * process gets SIGKILL; production goes on for `--after` seconds, then the rest is drained.
 * Reported: lateness of the messages due in the 5 s after the kill (their max is how long the
 * dead node's partitions stood still: its lease running out, another node taking them over and
 * loading their horizon), of every message due after it, and what never came.
 *
 *   node bench/postgres/node-kill.mjs [--runs 1] [--rate 200] [--settle 5] [--after 10]
 *                                     [--url URL] [--out DIR]
 *
 * Each of `--runs` kills a node of a queue of its own; `worstMaxMs` is the longest stand-still
 * of them. Without --url a throwaway PostgreSQL is started (scripts/postgres.mjs). Writes
 * postgres-node-kill.json to --out (default: prints only). tickwheel is this checkout's dist/.
 */

import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { URL, fileURLToPath } from 'node:url';
import { parseFlags } from '../../scripts/flags.mjs';
import { postgresInstalled, startPostgres } from '../../scripts/postgres.mjs';
import { lineWriter, startLines } from '../consumer-lines.mjs';
import { LatenessRecorder } from '../queue/stats.mjs';

const SELF = fileURLToPath(import.meta.url);
const DIST = new URL('../../dist/delay-queue.js', import.meta.url);
const TOPIC = 'bench';
const LEAD_MS = 500;
const WITHIN_MS = 5_000;
let queues = 0;

async function openNode(url, queue, nodeId) {
  const { DelayQueue } = await import(DIST.href);
  return DelayQueue.open({
    postgres: url,
    queue,
    nodeId,
    onError: (err) => process.stderr.write(`${nodeId}: ${err?.message ?? err}\n`),
  });
}

/** A consumer node: prints `<due> <receivedAt>` a delivery (bench/consumer-lines.mjs). */
async function consumerNode(url, queue, nodeId) {
  const node = await openNode(url, queue, nodeId);
  const write = lineWriter();
  node.consume(TOPIC, (message) => write(`${message.payload.due} ${Date.now()}`), {
    concurrency: 10,
  });
  process.stdout.write('ready\n');
}

async function measure(url, { rate, settleSeconds, afterSeconds }) {
  const queue = `nodekill${process.pid}x${++queues}`;
  const delivered = new Map(); // due -> first receivedAt (dues are unique)
  const onLine = (line) => {
    const [due, at] = line.split(' ').map(Number);
    if (!delivered.has(due)) delivered.set(due, at);
  };
  const producer = await openNode(url, queue, 'producer');
  const consumers = ['c0', 'c1'].map((id) => startLines([SELF, '--node', url, queue, id], onLine));
  try {
    await Promise.all(consumers.map((c) => c.started));
    await sleep(3_000); // the partitions settle among the three nodes
    const begin = Date.now();
    const dues = [];
    let failed = 0;
    let killedAt = 0;
    let lastDue = 0;
    for (let i = 0; Date.now() < begin + (settleSeconds + afterSeconds) * 1000; i++) {
      const wait = begin + (i * 1000) / rate - Date.now();
      if (wait > 0) await sleep(wait);
      if (killedAt === 0 && Date.now() >= begin + settleSeconds * 1000) {
        killedAt = Date.now();
        consumers[0].child.kill('SIGKILL');
      }
      const due = Math.max(Date.now() + LEAD_MS, lastDue + 1);
      lastDue = due;
      dues.push(due);
      producer.schedule({ topic: TOPIC, payload: { due }, deliverAt: due }).catch(() => {
        failed++;
        dues.splice(dues.indexOf(due), 1);
      });
    }
    const deadline = Date.now() + 15_000;
    const pending = () => dues.some((due) => due >= killedAt && !delivered.has(due));
    while (Date.now() < deadline && pending()) await sleep(50);
    const after = new LatenessRecorder();
    const within = new LatenessRecorder();
    let missing = 0;
    for (const due of dues) {
      if (due < killedAt) continue;
      const at = delivered.get(due);
      if (at === undefined) missing++;
      else {
        after.add(at - due);
        if (due < killedAt + WITHIN_MS) within.add(at - due);
      }
    }
    return {
      ratePerSecond: rate,
      scheduleFailures: failed,
      dueAfterKill: after.count + missing,
      notDeliveredIn15s: missing,
      latenessDueWithin5sOfKill: within.summary(),
      latenessDueAfterKill: after.summary(),
    };
  } finally {
    for (const c of consumers) c.child.kill('SIGKILL');
    await producer.close();
  }
}

async function main(argv) {
  if (argv[0] === '--node') return consumerNode(argv[1], argv[2], argv[3]);
  const options = {
    runs: 1,
    rate: 200,
    settleSeconds: 5,
    afterSeconds: 10,
    url: undefined,
    out: undefined,
  };
  parseFlags(argv, {
    '--runs': (v) => (options.runs = Number(v)),
    '--rate': (v) => (options.rate = Number(v)),
    '--settle': (v) => (options.settleSeconds = Number(v)),
    '--after': (v) => (options.afterSeconds = Number(v)),
    '--url': (v) => (options.url = v),
    '--out': (v) => (options.out = v),
  });
  if (!Number.isInteger(options.runs)) throw new Error('runs must be a whole number');
  for (const name of ['runs', 'rate', 'settleSeconds', 'afterSeconds']) {
    if (!(options[name] > 0)) throw new Error(`${name} must be a positive number`);
  }
  if (options.url === undefined && !postgresInstalled()) {
    throw new Error('PostgreSQL is not installed here: give --url');
  }
  const server = options.url === undefined ? await startPostgres() : undefined;
  try {
    const at = new Date().toISOString();
    const machine = `${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}`;
    const loadBefore = loadavg()[0];
    const runs = [];
    for (let i = 0; i < options.runs; i++)
      runs.push(await measure(options.url ?? server.url, options));
    const result = {
      at,
      machine,
      node: process.version,
      loadAverage: { before: loadBefore, after: loadavg()[0] },
      worstMaxMs: Math.max(...runs.map((r) => r.latenessDueWithin5sOfKill.maxMs ?? Infinity)),
      notDeliveredIn15s: runs.reduce((sum, r) => sum + r.notDeliveredIn15s, 0),
      runs,
    };
    const text = `${JSON.stringify(result, null, 2)}\n`;
    process.stdout.write(text);
    if (options.out !== undefined) {
      mkdirSync(options.out, { recursive: true });
      writeFileSync(join(options.out, 'postgres-node-kill.json'), text);
    }
  } finally {
    await server?.stop();
  }
}

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.message : err}\n`);
  process.exit(1);
});
