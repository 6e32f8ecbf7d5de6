/**
 * One tickwheel node under the chaos harness (scripts/chaos.mjs): a DelayQueue on Valkey or on
 * PostgreSQL (a postgres:// URL) that schedules, sometimes cancels, and consumes, writing a
 * journal line for each operation only once its promise has resolved. Journal lines are appended with a synchronous write, so a
 * SIGKILL never loses a line that was written, and no line claims what had not happened.
 *
 *   node scripts/chaos-node.mjs <nodeId> <Valkey urls comma-separated | postgres://...> <journal file>
 *                               <seed> <rate/s> [durability]
 *
 * Lines (times are Date.now() of this process; ids are unique per incarnation; every other
 * message is scheduled without an id and journaled by the located id the cluster made for it):
 *   S <id> <deliverAt> <payload hash>          schedule resolved
 *   c <id>                                     cancel about to be called
 *   C <id>                                     cancel resolved true
 *   D <id> <deliverAt> <payload hash> <attempts> <receivedAt>   handed to the handler
 *
 * "stop" on stdin ends producing; consuming goes on until SIGTERM (close, then exit 0).
 */

import { createHash } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { DelayQueue } from '../dist/delay-queue.js';
import { seededRandom } from '../test/support/random.mjs';

const [nodeId, urls, journal, seedText, rateText, durability = 'replicated'] =
  process.argv.slice(2);
const MAX_DELAY_MS = 3_000;
const CANCEL_SHARE = 0.05;

/** This node's choices, repeatable for a seed. */
const random = seededRandom(Number(seedText));

const hash = (payload) =>
  createHash('sha1').update(JSON.stringify(payload)).digest('hex').slice(0, 12);
const write = (line) => appendFileSync(journal, `${line}\n`);
/** A line on stderr with this process's time, for reading a run's end against its events. */
const complain = (line) => process.stderr.write(`${Date.now()} ${line}\n`);
// Warnings (a lost lease) timed as well.
process.removeAllListeners('warning');
process.on('warning', (w) => complain(`${nodeId} warning ${w.code ?? w.name}: ${w.message}`));

/** A PostgreSQL connection string, or Valkey nodes' URLs. */
const store = urls.startsWith('postgres')
  ? { postgres: urls, connectTimeoutMs: 60_000 }
  : { redis: urls.split(','), durability };

const queue = await DelayQueue.open({
  ...store,
  queue: 'chaos',
  partitions: 16,
  windowMs: 1_000,
  horizonMs: 2_000,
  leaseMs: 1_000,
  // A delivery lost with a killed node comes again this soon.
  visibilityMs: 5_000,
  nodeId,
  onError: (err) => complain(`${nodeId} background: ${err?.message ?? err}`),
});

const consumer = queue.consume(
  'chaos',
  (message) => {
    write(
      `D ${message.id} ${message.deliverAt} ${hash(message.payload)} ${message.attempts} ${Date.now()}`,
    );
  },
  {
    concurrency: 16,
    onError: (err, context) =>
      complain(`${nodeId} consume ${context.id ?? ''}: ${err?.message ?? err}`),
  },
);

/**
 * SIGUSR2: what this node's partition owners hold, on stderr (the harness asks when a drain
 * ends with messages missing). Read from the queue's internals: a debugging aid of the harness.
 */
process.on('SIGUSR2', () => {
  const loop = queue.backend?.leases;
  const now = performance.now();
  const slots = loop?.ownership?.slots ?? [];
  const gate = loop?.fires?.batches;
  complain(
    `${nodeId} dump fires ${JSON.stringify({ pending: gate?.count, running: gate?.running, queued: gate?.queued })} wheel ${loop?.wheel?.size}`,
  );
  for (const [partition, owner] of loop?.owners ?? []) {
    const slot = slots[partition];
    const state = {
      epoch: owner.epoch,
      phase: slot?.phase,
      validMs: slot ? Math.round(slot.validUntil - now) : undefined,
      stopped: owner.stopped,
      started: owner.poll !== undefined,
      loadedUntil: owner.loadedUntil,
      currentNear: owner.currentNear,
      nearRead: [...(owner.nearRead ?? [])],
      timers: owner.timers?.size,
      seen: owner.seenSeq,
      reading: owner.nearReads?.running !== undefined,
      expiring: owner.expiry?.running !== undefined,
      visibilityAt: owner.visibilityAt,
    };
    complain(`${nodeId} dump partition ${partition} ${JSON.stringify(state)}`);
  }
});

let producing = true;
let sequence = 0;
let failures = 0;
process.stdin.setEncoding('utf8').on('data', (text) => {
  if (text.includes('stop')) producing = false;
});
process.on('SIGTERM', async () => {
  producing = false;
  await consumer.close().catch(() => {});
  await queue.close().catch(() => {});
  process.stdout.write(`closed ${failures} failures\n`);
  process.exit(0);
});

process.stdout.write('ready\n');
const rate = Number(rateText) || 100;
const lanes = 8;
await Promise.all(
  Array.from({ length: lanes }, async () => {
    while (producing) {
      // Every other message without an id: the cluster makes a located one for it.
      const n = sequence++;
      let id = `${nodeId}-${process.pid}-${n}`;
      const payload = { id, filler: 'x'.repeat(Math.floor(random() * 200)) };
      const deliverAt = Date.now() + Math.floor(random() * MAX_DELAY_MS);
      const cancel = random() < CANCEL_SHARE;
      try {
        const result = await queue.schedule(
          n % 2 === 0
            ? { topic: 'chaos', id, payload, deliverAt }
            : { topic: 'chaos', payload, deliverAt },
        );
        id = result.id;
        write(`S ${id} ${result.deliverAt} ${hash(payload)}`);
        // Cancel only what is due well after now: it cannot have been delivered yet. The
        // attempt is journaled first: a cancel that fails may still have happened.
        if (cancel && result.deliverAt - Date.now() > 1_000) {
          write(`c ${id}`);
          if (await queue.cancel(id)) write(`C ${id}`);
        }
      } catch (err) {
        failures++;
        complain(`${nodeId} schedule ${id}: ${err?.message ?? err}`);
        await sleep(100);
      }
      await sleep((lanes * 1_000) / rate);
    }
  }),
);
process.stdout.write('stopped producing\n');
