#!/usr/bin/env node
/**
 * The pull consumer's burst (issue 39): 100k far-future messages scheduled, then 20k due in
 * the same millisecond, consumed with receive({ max: 1000 }) and the acks of each batch awaited
 * before the next receive (the natural pull loop, and what every HTTP consumer does). Prints one
 * JSON line: lateness p50 / p99 / max (Date.now() at the receive's answer - deliverAt) and how
 * long the drain took.
 *
 *   node bench/queue/pull-burst.mjs [--dist DIR] [--acks one|many] [--durable]
 *
 * --dist: the build to measure (default this checkout's dist/; a build of another commit gives
 * the before/after). --acks many: one ackMany per batch instead of one ack per message.
 * --durable: every ack with { durable: true } (ignored by builds without it).
 */

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import process from 'node:process';
import { pathToFileURL } from 'node:url';

const FAR = 100_000;
const BURST = 20_000;
const BATCH = 1000;
/** The burst is due this long after its schedule ends: everything is in memory by then. */
const LEAD_MS = 1500;

function parseArgs(argv) {
  const options = { dist: resolve('dist'), acks: 'one', durable: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--dist') options.dist = resolve(argv[++i]);
    else if (argv[i] === '--acks') options.acks = argv[++i];
    else if (argv[i] === '--durable') options.durable = true;
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!['one', 'many'].includes(options.acks)) throw new Error('--acks is one or many');
  return options;
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const { DelayQueue } = await import(pathToFileURL(join(options.dist, 'delay-queue.js')).href);
  const dir = mkdtempSync(join(tmpdir(), 'tickwheel-pull-burst-'));
  const queue = await DelayQueue.open({ dir });
  try {
    const day = 86_400_000;
    for (let from = 0; from < FAR; from += BATCH) {
      await queue.scheduleMany(
        Array.from({ length: BATCH }, (_, i) => ({
          topic: 'far',
          payload: { n: from + i },
          delayMs: day + from + i,
        })),
      );
    }
    const deliverAt = Date.now() + LEAD_MS + 1000;
    for (let from = 0; from < BURST; from += BATCH) {
      await queue.scheduleMany(
        Array.from({ length: BATCH }, (_, i) => ({
          topic: 'burst',
          payload: { n: from + i },
          deliverAt,
        })),
      );
    }
    const ackOptions = options.durable ? { durable: true } : {};
    const lateness = []; const t0 = process.hrtime.bigint() / 1000n + BigInt(Math.round((deliverAt - Date.now()) * 1000));
    while (lateness.length < BURST) {
      const batch = await queue.receive('burst', { max: BATCH, waitMs: 10_000 });
      const now = Date.now();
      for (const message of batch) lateness.push(now - message.deliverAt);
      const receipts = batch.map((message) => message.receipt);
      if (options.acks === 'many') await queue.ackMany(receipts, ackOptions);
      else await Promise.all(receipts.map((receipt) => queue.ack(receipt, ackOptions)));
    }
    const drainedMs = Date.now() - deliverAt; const t1 = process.hrtime.bigint() / 1000n; writeFileSync("/tmp/prof/window.json", JSON.stringify({ t0: String(t0), t1: String(t1) }));
    lateness.sort((a, b) => a - b);
    const result = {
      dist: options.dist,
      acks: options.acks,
      durable: options.durable,
      delivered: lateness.length,
      p50: percentile(lateness, 50),
      p99: percentile(lateness, 99),
      max: lateness[lateness.length - 1],
      drainedMs,
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    await queue.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
