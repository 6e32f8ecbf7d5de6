/**
 * Crash-harness worker: opens a DelayQueue on a data directory and hammers it at full speed with
 * concurrent schedules, cancels, dedup re-schedules, receives, acks and nacks, until the parent
 * (scripts/crash.mjs) SIGKILLs it.
 *
 *   node test/crash/worker.mjs '<json config>'
 *
 * Config: { dir, journal, fsync, cycle, seed, entry?, live?, lanes?, segmentBytes?,
 *           checkpointIntervalMs?, snapshotBytes? }; entry: URL of the delay-queue.js to test
 *           (default: the package's dist/delay-queue.js). Without snapshotBytes the worker picks
 *           one from its seed: mostly small, so that most cycles write snapshots and recover
 *           from them; sometimes Infinity, so that recovery also meets a snapshot it must drop.
 *
 * The journal is the worker's "acknowledgement record". It is a file opened with O_APPEND and
 * written with fs.writeSync, one line per event, so every line written before the kill is in the
 * kernel's page cache when the process dies and the parent reads it afterwards (a pipe could
 * fill up and make a synchronous write fail with EAGAIN, and process.stdout is asynchronous on
 * pipes). An operation's result line is written only after its promise RESOLVED; operations
 * cut short by the kill simply have no result line, and the parent treats them as "may or may
 * not have happened". Intent lines (c, a) are written just before a cancel or ack is called, so
 * the parent knows which messages may have been finished by an unacknowledged operation.
 *
 *   O <recovered live> <truncatedBytes> <corrupt records> <fsync> <recovery ms> <snapshot>
 *                                        queue opened; snapshot: used | none | rejected:<why>
 *   S <id> <deliverAt> <hash>                                          schedule resolved
 *   D <id> <deliverAt>                                                 dedup re-schedule resolved
 *   c <id>              C <id> <1|0>                                   cancel called / resolved
 *   a <id>              A <id> <1|0>                                   ack called / resolved
 *   N <id> <1|0>                                                       nack resolved
 *   R <id> <deliverAt> <hash> <payload ok 1|0> <Date.now()> <line no. when receive() was
 *     called> <attempts>                                                a delivery
 *   X <text>                                                           an operation failed
 *
 * Lines are numbered from 0 by their position in the journal.
 */

import { Buffer } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { URL } from 'node:url';
import process from 'node:process';
import { setImmediate, setInterval } from 'node:timers';
import {
  HORIZON_MS,
  MAX_DELAY_MS,
  TOPICS,
  WINDOW_MS,
  digest,
  prng,
  verifyPayload,
} from './common.mjs';

async function main() {
  const config = JSON.parse(process.argv[2]);
  const { DelayQueue } = await import(
    config.entry ?? new URL('../../dist/delay-queue.js', import.meta.url).href
  );
  const random = prng(config.seed);
  const pick = (list) => list[Math.floor(random() * list.length)];
  const between = (low, high) => low + Math.floor(random() * (high - low + 1));

  const journal = openSync(config.journal, 'a');
  let lineNo = 0;
  const line = (text) => {
    writeSync(journal, `${text}\n`);
    lineNo++;
  };
  const fail = (what, err) => {
    const text = `${what}: ${err?.code ?? ''} ${err?.message ?? String(err)}`.replace(/\s+/g, ' ');
    line(`X ${text}`);
  };

  const snapshotBytes = config.snapshotBytes ?? pick([0, 0, 16 * 1024, 64 * 1024, Infinity]);
  const queue = await DelayQueue.open({
    dir: config.dir,
    fsync: config.fsync,
    horizonMs: HORIZON_MS,
    windowMs: WINDOW_MS,
    segmentBytes: config.segmentBytes ?? 256 * 1024,
    checkpointIntervalMs: config.checkpointIntervalMs ?? 200,
    snapshotBytes,
  });
  const recovery = queue.recovery;
  line(
    `O ${recovery.live} ${recovery.truncatedBytes} ${recovery.corrupt.length} ${config.fsync} ` +
      `${recovery.durationMs.toFixed(1)} ${recovery.snapshot.replace(/\s+/g, '_')}`,
  );
  for (const damage of recovery.corrupt) {
    fail(`recovery found corruption at ${damage.where}`, { message: damage.reason });
  }

  /** Messages this process may cancel or re-schedule: known live, no finish called here yet. */
  const known = new Map();
  /** Ids with explicit (dedup) keys among them. */
  const explicit = [];
  /** Ids whose cancel or ack this process has called: never re-scheduled here. */
  const finishCalled = new Set();
  if (config.live !== undefined) {
    for (const [id, deliverAt, isExplicit] of JSON.parse(readFileSync(config.live, 'utf8'))) {
      known.set(id, deliverAt);
      if (isExplicit === 1) explicit.push(id);
    }
  }
  let fresh = 0;

  const makePayload = () => {
    const token = `${config.cycle}.${fresh}`;
    if (random() < 0.15) {
      const rest = randomBytes(between(0, random() < 0.05 ? 20_000 : 300));
      return Buffer.concat([Buffer.from(digest(rest), 'hex'), rest]);
    }
    const r = randomBytes(between(1, random() < 0.05 ? 12_000 : 150)).toString('base64url');
    return { t: token, r, h: digest(`${token}:${r}`) };
  };

  const schedule = async () => {
    const payload = makePayload();
    const { hash } = verifyPayload(payload);
    const request = {
      topic: pick(TOPICS),
      payload,
      delayMs: random() < 0.2 ? 0 : between(0, MAX_DELAY_MS),
      maxAttempts: 10_000,
      backoff: { type: 'fixed', delayMs: 50 },
    };
    const dedupKey = random() < 0.2 ? `k${config.cycle}x${fresh}` : undefined;
    if (dedupKey !== undefined) request.id = dedupKey;
    fresh++;
    try {
      const { id, deliverAt } = await queue.schedule(request);
      line(`S ${id} ${deliverAt} ${hash}`);
      if (!finishCalled.has(id)) {
        known.set(id, deliverAt);
        if (dedupKey !== undefined) explicit.push(id);
      }
    } catch (err) {
      fail('schedule', err);
    }
  };

  /** Schedules a known live id again: the queue must return the pending message. */
  const dedup = async () => {
    if (explicit.length === 0) return schedule();
    const index = Math.floor(random() * explicit.length);
    const id = explicit[index];
    if (finishCalled.has(id) || !known.has(id)) {
      explicit[index] = explicit[explicit.length - 1];
      explicit.pop();
      return undefined;
    }
    try {
      const result = await queue.schedule({
        topic: pick(TOPICS),
        payload: makePayload(),
        delayMs: between(0, MAX_DELAY_MS),
        id,
        maxAttempts: 10_000,
        backoff: { type: 'fixed', delayMs: 50 },
      });
      line(`D ${result.id} ${result.deliverAt}`);
    } catch (err) {
      fail(`dedup schedule of ${id}`, err);
    }
    return undefined;
  };

  const cancel = async () => {
    if (known.size === 0) return schedule();
    // Map iteration order is insertion order: skip a random number of entries.
    let skip = Math.floor(random() * Math.min(known.size, 512));
    let id;
    for (const key of known.keys()) {
      id = key;
      if (skip-- <= 0) break;
    }
    known.delete(id);
    finishCalled.add(id);
    line(`c ${id}`);
    try {
      const cancelled = await queue.cancel(id);
      line(`C ${id} ${cancelled ? 1 : 0}`);
    } catch (err) {
      fail(`cancel of ${id}`, err);
    }
    return undefined;
  };

  const receive = async () => {
    const topic = pick(TOPICS);
    const shortVisibility = random() < 0.2;
    const calledAt = lineNo;
    let messages;
    try {
      messages = await queue.receive(topic, {
        max: between(1, 16),
        waitMs: random() < 0.5 ? 0 : between(1, 30),
        visibilityMs: shortVisibility ? between(20, 150) : 10_000,
      });
    } catch (err) {
      fail(`receive from ${topic}`, err);
      return;
    }
    const wall = Date.now();
    const settling = [];
    for (const message of messages) {
      const { ok, hash } = verifyPayload(message.payload);
      line(
        `R ${message.id} ${message.deliverAt} ${hash} ${ok ? 1 : 0} ${wall} ${calledAt} ` +
          `${message.attempts}`,
      );
      const choice = random();
      if (choice < 0.75) {
        known.delete(message.id);
        finishCalled.add(message.id);
        line(`a ${message.id}`);
        settling.push(
          queue.ack(message.receipt).then(
            (acked) => line(`A ${message.id} ${acked ? 1 : 0}`),
            (err) => fail(`ack of ${message.id}`, err),
          ),
        );
      } else if (choice < 0.8) {
        settling.push(
          queue.nack(message.receipt, { delayMs: between(0, 300) }).then(
            (nacked) => line(`N ${message.id} ${nacked ? 1 : 0}`),
            (err) => fail(`nack of ${message.id}`, err),
          ),
        );
      }
      // Otherwise left unacknowledged: redelivered after the visibility timeout or the kill.
    }
    await Promise.all(settling);
  };

  const lane = async () => {
    for (;;) {
      const choice = random();
      if (choice < 0.5) await schedule();
      else if (choice < 0.6) await cancel();
      else if (choice < 0.65) await dedup();
      else await receive();
      // Let timers and I/O callbacks in now and then, as a busy server would.
      if (random() < 0.1) await new Promise((resolve) => setImmediate(resolve));
    }
  };

  // The queue's timers are unref'd: keep the process alive while every lane waits on one.
  setInterval(() => {}, 1 << 30);
  process.stdout.write('ready\n');
  await Promise.all(Array.from({ length: config.lanes ?? 24 }, lane));
  closeSync(journal);
}

main().catch((err) => {
  process.stderr.write(`worker failed: ${err?.stack ?? err}\n`);
  process.exit(3);
});
