/**
 * Worker of test/crash/compaction.test.ts: a queue with a few long-lived messages (due in a
 * month, dead letters, and ready ones on a topic nobody consumes) under churn, so that compaction keeps carrying them forward, until
 * the parent SIGKILLs it.
 *
 *   node test/crash/compaction-worker.mjs '<json config>'   config: { dir, journal, seed, snapshotBytes }
 *
 * Journal lines (written with writeSync after the promise resolved, or before a call: intent):
 *   READY                      the long-lived messages exist (written once, by the first run)
 *   M <i> <deliverAt>          far-<i> scheduled (first run) or rescheduled: resolved
 *   m <i> <deliverAt>          reschedule of far-<i> called
 *   A <id>                     churn message acked durably (resolved)
 *   R <n>                      messages compaction has carried forward in this run so far
 */

import { closeSync, existsSync, openSync, writeSync } from 'node:fs';
import { createHash } from 'node:crypto';
import process from 'node:process';
import { URL } from 'node:url';
import { seededRandom } from '../support/random.mjs';

export const FAR = 20;
export const DEAD = 5;
export const IDLE = 3;
export const MONTH = 30 * 86_400_000;
export const options = (dir, snapshotBytes) => ({
  dir,
  segmentBytes: 32 * 1024,
  checkpointIntervalMs: 20,
  snapshotBytes,
});

export function farPayload(i) {
  const text = `far message ${i} `.repeat(20);
  return { i, text, h: createHash('sha256').update(text).digest('hex') };
}

export function deadPayload(i) {
  return { dead: i, pad: 'd'.repeat(100 + i) };
}

/** The first is longer than the queue keeps as text: it is read back from the log. */
export function idlePayload(i) {
  return { idle: i, pad: 'i'.repeat(i === 0 ? 6000 : 50 + i) };
}

async function main() {
  const config = JSON.parse(process.argv[2]);
  const { DelayQueue } = await import(new URL('../../dist/delay-queue.js', import.meta.url).href);
  const random = seededRandom(config.seed);
  const fresh = !existsSync(config.readyFile);
  const journal = openSync(config.journal, 'a');
  const line = (text) => writeSync(journal, `${text}\n`);
  const queue = await DelayQueue.open(options(config.dir, config.snapshotBytes));
  if (fresh) {
    for (let i = 0; i < FAR; i++) {
      const request = { topic: 'far', id: `far-${i}`, delayMs: MONTH, payload: farPayload(i) };
      const { deliverAt } = await queue.schedule(request);
      line(`M ${i} ${deliverAt}`);
    }
    for (let i = 0; i < DEAD; i++) {
      await queue.schedule({
        topic: 'poison',
        id: `dead-${i}`,
        payload: deadPayload(i),
        maxAttempts: 1,
      });
    }
    let buried = 0;
    while (buried < DEAD) {
      for (const m of await queue.receive('poison', { waitMs: 1000, max: DEAD })) {
        await queue.nack(m.receipt, { reason: `reason of ${m.id}` });
        buried++;
      }
    }
    while ((await queue.deadLetters('poison')).length < DEAD) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    for (let i = 0; i < IDLE; i++) {
      await queue.schedule({ topic: 'idle', id: `idle-${i}`, payload: idlePayload(i) });
    }
    closeSync(openSync(config.readyFile, 'w'));
    line('READY');
  }
  const payload = { churn: 'c'.repeat(400) };
  for (let round = 0; ; round++) {
    const id = `c-${config.cycle}-${round}`;
    await queue.schedule({ topic: 'churn', id, payload });
    const [got] = await queue.receive('churn', { waitMs: 1000 });
    if (got !== undefined) {
      // Durable: an ack that resolves without waiting for the disk may be lost by a SIGKILL.
      await queue.ack(got.receipt, { durable: true });
      line(`A ${got.id}`);
    }
    if (round % 50 === 0) {
      const relocated = (await queue.stats()).store?.relocated ?? 0;
      if (relocated > 0) line(`R ${relocated}`);
      const i = Math.floor(random() * FAR);
      const deliverAt = Date.now() + MONTH + Math.floor(random() * 1000);
      line(`m ${i} ${deliverAt}`);
      await queue.reschedule(`far-${i}`, { deliverAt });
      line(`M ${i} ${deliverAt}`);
    }
  }
}

if (process.argv[2] !== undefined) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
