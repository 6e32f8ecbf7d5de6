#!/usr/bin/env node
/**
 * Crash harness for the durable delay queue (`tickwheel/queue`, built into dist/).
 *
 *   node scripts/crash.mjs --cycles 1000 [--seed S] [--dir D] [--keep] [--report FILE]
 *                          [--stop-on-violation]
 *                          [--min-ms 50] [--max-ms 400] [--lanes N] [--quiet]
 *
 * Each cycle spawns test/crash/worker.mjs on the same data directory, lets it schedule, cancel,
 * receive and ack at full speed for a random 50-400 ms, and SIGKILLs it. The worker's journal
 * (one line per operation whose promise had resolved) is folded into the expected state. After
 * the last cycle the runner opens the queue itself, consumes everything in real time and
 * checks:
 *
 *   - every acknowledged schedule that was not acknowledged-cancelled or acknowledged-acked is
 *     delivered, with the payload it was scheduled with (hash checked);
 *   - no message is delivered after its cancel had resolved, nor by the process whose ack of it
 *     had resolved; a later process may deliver an acked message again (an ack resolves before
 *     its record is fsynced, docs/storage.md): each such redelivery is counted and reported, by
 *     the kill that lost the ack, and the message must then be delivered again until acked;
 *   - nothing is delivered before its due time: Date.now() >= deliverAt - 1 (clock granularity);
 *   - a dedup re-schedule of a pending id returns the pending message;
 *   - a cancel of a message known to be live returns true (it was not lost);
 *   - recovery after a crash finds a torn tail at most, never mid-log corruption;
 *   - the queue drains completely, and a reopen after the final acks finds nothing live.
 *
 * At-least-once: a message received but not acknowledged before the kill must come again; an
 * operation whose promise had not resolved when the kill came may or may not have happened, so
 * a message with such a cancel or ack is not required (unless a later process delivers it,
 * which proves the finish did not happen and makes it required again).
 *
 * Exit status: 0 without violations, 1 with violations, 2 if the harness could not run.
 */

import { Buffer } from 'node:buffer';
import { spawn } from 'node:child_process';
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { clearInterval, clearTimeout, setInterval, setTimeout } from 'node:timers';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  HORIZON_MS,
  MAX_DELAY_MS,
  TOPICS,
  WINDOW_MS,
  prng,
  verifyPayload,
} from '../test/crash/common.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const workerPath = join(root, 'test', 'crash', 'worker.mjs');
const entryPath = join(root, 'dist', 'delay-queue.js');

/** How many violations are kept in detail (all are counted). */
const KEEP_VIOLATIONS = 200;
/** Live ids handed to each worker to cancel and re-schedule (dedup). */
const INHERITED_IDS = 400;
const SEGMENT_BYTES = 256 * 1024;

function parseArgs(argv) {
  const options = {
    cycles: 50,
    seed: Math.floor(Math.random() * 2 ** 32),
    dir: undefined,
    keep: false,
    report: undefined,
    minMs: 50,
    maxMs: 400,
    lanes: undefined,
    quiet: false,
    stopOnViolation: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const next = argv[++i];
      if (next === undefined) usage(`${arg} needs a value`);
      return next;
    };
    const integer = () => {
      const text = value();
      const n = Number(text);
      if (!Number.isInteger(n) || n < 0) usage(`${arg} needs a non-negative integer, got ${text}`);
      return n;
    };
    if (arg === '--cycles') options.cycles = integer();
    else if (arg === '--seed') options.seed = integer();
    else if (arg === '--dir') options.dir = resolve(value());
    else if (arg === '--keep') options.keep = true;
    else if (arg === '--report') options.report = resolve(value());
    else if (arg === '--min-ms') options.minMs = integer();
    else if (arg === '--max-ms') options.maxMs = integer();
    else if (arg === '--lanes') options.lanes = integer();
    else if (arg === '--quiet') options.quiet = true;
    else if (arg === '--stop-on-violation') options.stopOnViolation = true;
    else if (arg === '--help' || arg === '-h') usage();
    else usage(`unknown argument ${arg}`);
  }
  if (options.cycles < 1) usage('--cycles must be at least 1');
  if (options.maxMs < options.minMs) usage('--max-ms must be at least --min-ms');
  return options;
}

function usage(problem) {
  if (problem !== undefined) process.stderr.write(`crash: ${problem}\n`);
  process.stderr.write(
    'usage: node scripts/crash.mjs [--cycles N] [--seed S] [--dir D] [--keep] [--report FILE]\n' +
      '                              [--min-ms MS] [--max-ms MS] [--lanes N] [--quiet]\n' +
      '                              [--stop-on-violation]\n',
  );
  process.exit(problem === undefined ? 0 : 2);
}

/**
 * The expected state, folded from the journals. Per message id:
 *   s        the acknowledged schedule { deliverAt, hash }, or null if none resolved
 *   state    'live' | 'maybe' (a cancel / ack was cut short by a kill) | 'acked' | 'cancelled'
 *   finished where the acknowledged finish resolved: { cycle, line }
 */
class Model {
  constructor() {
    this.ids = new Map();
    this.violations = [];
    this.violationCount = 0;
    this.counts = {
      schedulesAcked: 0,
      dedupAcked: 0,
      cancelsAcked: 0,
      cancelsFalse: 0,
      acksAcked: 0,
      acksStale: 0,
      nacks: 0,
      deliveries: 0,
      workerDeliveries: 0,
      finalDeliveries: 0,
      unacknowledgedDeliveries: 0,
      maybeFinished: 0,
      provenLive: 0,
      redeliveredAfterAck: 0,
      truncatedBytes: 0,
      truncatedRecoveries: 0,
      recoveryMsMax: 0,
      recoveredLiveMax: 0,
      snapshotRecoveries: 0,
      snapshotsRejected: 0,
    };
    /** Acked messages delivered again by a later process, by the cycle whose kill lost the ack. */
    this.lostAcks = new Map();
    /** Largest deliverAt - Date.now() seen at a delivery (positive = early). */
    this.maxEarlyMs = -Infinity;
  }

  rec(id) {
    let rec = this.ids.get(id);
    if (rec === undefined) {
      rec = {
        s: null,
        state: 'live',
        finished: null,
        maybeCycle: -1,
        received: false,
        deliveries: 0,
        explicit: false,
      };
      this.ids.set(id, rec);
    }
    return rec;
  }

  violation(cycle, kind, id, detail) {
    this.violationCount++;
    if (this.violations.length < KEEP_VIOLATIONS) this.violations.push({ cycle, kind, id, detail });
  }

  /** Folds one process's journal. `final`: the runner's own consuming phase. */
  fold(cycle, lines, final = false) {
    // Finish intents (cancel / ack called) not resolved yet in this process, per id.
    const pending = new Map();
    const receivedHere = new Set();
    for (const text of lines) {
      if (text.startsWith('R ')) receivedHere.add(text.split(' ')[1]);
    }
    for (let no = 0; no < lines.length; no++) {
      const f = lines[no].split(' ');
      const kind = f[0];
      const id = f[1];
      switch (kind) {
        case 'O': {
          const truncated = Number(f[2]);
          this.counts.truncatedBytes += truncated;
          if (truncated > 0) this.counts.truncatedRecoveries++;
          this.counts.recoveryMsMax = Math.max(this.counts.recoveryMsMax, Number(f[5]));
          this.counts.recoveredLiveMax = Math.max(this.counts.recoveredLiveMax, Number(f[1]));
          if (f[6] === 'used') this.counts.snapshotRecoveries++;
          else if (f[6]?.startsWith('rejected')) this.counts.snapshotsRejected++;
          break;
        }
        case 'S': {
          const rec = this.rec(id);
          this.counts.schedulesAcked++;
          if (rec.s !== null) {
            this.violation(cycle, 'id reused', id, 'a fresh schedule returned an existing id');
            break;
          }
          rec.s = { deliverAt: Number(f[2]), hash: f[3] };
          rec.explicit = !/^[0-9a-z]{9}-/.test(id);
          break;
        }
        case 'D': {
          const rec = this.rec(id);
          const deliverAt = Number(f[2]);
          this.counts.dedupAcked++;
          if (rec.s === null) {
            this.violation(cycle, 'harness', id, 'dedup of an id without an acknowledged schedule');
          } else if (rec.received || receivedHere.has(id)) {
            // Retries move a message later, never earlier.
            if (deliverAt < rec.s.deliverAt) {
              this.violation(
                cycle,
                'dedup',
                id,
                `re-schedule returned deliverAt ${deliverAt}, before the acknowledged ${rec.s.deliverAt}`,
              );
            }
          } else if (deliverAt !== rec.s.deliverAt) {
            this.violation(
              cycle,
              'dedup',
              id,
              `re-schedule of a pending id returned deliverAt ${deliverAt}, not the pending ` +
                `message's ${rec.s.deliverAt}: a second message was created`,
            );
          }
          break;
        }
        case 'c':
        case 'a': {
          const rec = this.rec(id);
          const list = pending.get(id) ?? [];
          // "Definitely live": an acknowledged schedule, nothing finished it, nothing in this
          // process has tried to.
          list.push({ kind, live: rec.s !== null && rec.state === 'live' && list.length === 0 });
          pending.set(id, list);
          break;
        }
        case 'C':
        case 'A': {
          const rec = this.rec(id);
          const list = pending.get(id) ?? [];
          const at = list.findIndex((intent) => intent.kind === kind.toLowerCase());
          const intent = at >= 0 ? list.splice(at, 1)[0] : undefined;
          if (list.length === 0) pending.delete(id);
          if (intent === undefined) {
            this.violation(cycle, 'harness', id, `${kind} line without its intent line`);
          }
          if (f[2] === '1') {
            if (kind === 'C') this.counts.cancelsAcked++;
            else this.counts.acksAcked++;
            if (rec.state === 'acked' || rec.state === 'cancelled') {
              this.violation(
                cycle,
                'double finish',
                id,
                `${kind === 'C' ? 'cancel' : 'ack'} returned true for a message already ${rec.state} ` +
                  `(cycle ${rec.finished.cycle})`,
              );
            }
            rec.state = kind === 'C' ? 'cancelled' : 'acked';
            rec.finished = { cycle, line: no };
          } else if (kind === 'C') {
            this.counts.cancelsFalse++;
            if (intent?.live === true) {
              this.violation(
                cycle,
                'lost',
                id,
                'cancel returned false for a message whose schedule was acknowledged and that ' +
                  'nothing had finished',
              );
            }
          } else {
            this.counts.acksStale++;
          }
          break;
        }
        case 'N':
          this.counts.nacks++;
          break;
        case 'R':
          this.delivery(cycle, f, final);
          break;
        case 'X':
          this.violation(cycle, 'operation failed', undefined, lines[no].slice(2));
          break;
        default:
          this.violation(cycle, 'harness', undefined, `unparseable journal line: ${lines[no]}`);
      }
    }
    // Cancels and acks cut short by the kill may or may not have happened.
    for (const id of pending.keys()) {
      const rec = this.rec(id);
      if (rec.state === 'live') {
        rec.state = 'maybe';
        rec.maybeCycle = cycle;
        this.counts.maybeFinished++;
      }
    }
  }

  delivery(cycle, f, final) {
    const [, id, deliverAtText, hash, ok, wallText, calledAtText] = f;
    const deliverAt = Number(deliverAtText);
    const wall = Number(wallText);
    const calledAt = Number(calledAtText);
    const rec = this.rec(id);
    this.counts.deliveries++;
    if (final) this.counts.finalDeliveries++;
    else this.counts.workerDeliveries++;
    if (rec.s === null) this.counts.unacknowledgedDeliveries++;
    rec.deliveries++;
    rec.received = true;
    this.maxEarlyMs = Math.max(this.maxEarlyMs, deliverAt - wall);
    if (ok !== '1') this.violation(cycle, 'payload', id, 'payload does not match its own checksum');
    if (rec.s !== null && hash !== rec.s.hash) {
      this.violation(cycle, 'payload', id, `payload hash ${hash}, scheduled with ${rec.s.hash}`);
    }
    if (wall < deliverAt - 1) {
      this.violation(cycle, 'early', id, `delivered at ${wall} (Date.now()), due ${deliverAt}`);
    }
    if (rec.s !== null && deliverAt < rec.s.deliverAt) {
      this.violation(
        cycle,
        'early',
        id,
        `delivered with deliverAt ${deliverAt}, scheduled for ${rec.s.deliverAt}`,
      );
    }
    if (rec.state === 'acked' && rec.finished.cycle < cycle) {
      // Its ack resolved in a process killed before the ack's group commit: allowed (at least
      // once), counted, and the message is live again until an ack of it holds.
      const lostIn = rec.finished.cycle;
      this.counts.redeliveredAfterAck++;
      this.lostAcks.set(lostIn, (this.lostAcks.get(lostIn) ?? 0) + 1);
      rec.state = 'live';
    } else if (rec.state === 'acked' || rec.state === 'cancelled') {
      const { cycle: finishCycle, line } = rec.finished;
      if (finishCycle < cycle || line < calledAt) {
        this.violation(
          cycle,
          rec.state === 'cancelled' ? 'delivered after cancel' : 'delivered after ack',
          id,
          `its ${rec.state === 'cancelled' ? 'cancel' : 'ack'} resolved in cycle ${finishCycle}`,
        );
      }
    } else if (rec.state === 'maybe' && cycle > rec.maybeCycle) {
      // Delivered by a later process: the cut-short cancel / ack did not happen.
      rec.state = 'live';
      this.counts.provenLive++;
    }
  }

  /** Messages that must still be delivered: acknowledged, not finished, not maybe-finished. */
  required() {
    const ids = [];
    for (const [id, rec] of this.ids) if (rec.s !== null && rec.state === 'live') ids.push(id);
    return ids;
  }

  /** Live ids for the next worker to cancel or re-schedule: [id, deliverAt, explicit]. */
  inheritable(random, limit) {
    const live = [];
    for (const [id, rec] of this.ids) {
      if (rec.s !== null && rec.state === 'live')
        live.push([id, rec.s.deliverAt, rec.explicit ? 1 : 0]);
    }
    for (let i = live.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [live[i], live[j]] = [live[j], live[i]];
    }
    return live.slice(0, limit);
  }

  duplicates() {
    let n = 0;
    let distinct = 0;
    for (const rec of this.ids.values()) {
      if (rec.deliveries > 0) distinct++;
      if (rec.deliveries > 1) n += rec.deliveries - 1;
    }
    return { duplicates: n, distinct };
  }
}

/** Runs one worker until the kill; resolves with what happened. */
function runWorker(config, plan) {
  return new Promise((resolveRun) => {
    const started = performance.now();
    const child = spawn(process.execPath, [workerPath, JSON.stringify(config)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let readyMs;
    let killedAt;
    let killTimer;
    const kill = () => {
      if (killedAt !== undefined || child.exitCode !== null || child.signalCode !== null) return;
      killedAt = performance.now() - started;
      child.kill('SIGKILL');
    };
    const readyTimeout = setTimeout(kill, 30_000);
    if (plan.duringStartup) killTimer = setTimeout(kill, plan.killAfterMs);
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      if (readyMs === undefined && stdout.includes('ready\n')) {
        readyMs = performance.now() - started;
        clearTimeout(readyTimeout);
        if (!plan.duringStartup) killTimer = setTimeout(kill, plan.killAfterMs);
      }
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk) => {
      stderr = (stderr + chunk).slice(-8000);
    });
    child.on('error', (error) => {
      clearTimeout(readyTimeout);
      clearTimeout(killTimer);
      resolveRun({ error, stderr, readyMs, killedAt, code: null, signal: null });
    });
    child.on('exit', (code, signal) => {
      clearTimeout(readyTimeout);
      clearTimeout(killTimer);
      resolveRun({ code, signal, stderr, readyMs, killedAt, ranMs: performance.now() - started });
    });
  });
}

/**
 * Appends the start of a record that never finished to the last segment, as a crash in the
 * middle of a write leaves it: the next recovery must cut it (and nothing acknowledged is in it).
 */
function tearTail(dataDir, random) {
  const logDir = join(dataDir, 'log');
  // A worker killed early in its first start-up may not have made the log's folder yet.
  if (!existsSync(logDir)) return 0;
  const segments = readdirSync(logDir)
    .filter((name) => /^\d{10}\.seg$/.test(name))
    .sort();
  if (segments.length === 0) return 0;
  const bodyBytes = 1 + Math.floor(random() * 300);
  const header = Buffer.alloc(10);
  header[0] = 0xa7; // the record magic
  header[1] = 1 + Math.floor(random() * 4);
  header.writeUInt32LE(bodyBytes + 1 + Math.floor(random() * 1000), 2);
  header.writeUInt32LE(Math.floor(random() * 2 ** 32), 6);
  const torn = Buffer.concat([header, randomBytes(bodyBytes)]).subarray(
    0,
    1 + Math.floor(random() * (10 + bodyBytes - 1)),
  );
  appendFileSync(join(logDir, segments[segments.length - 1]), torn);
  return torn.length;
}

function readJournal(file) {
  if (!existsSync(file)) return [];
  const text = readFileSync(file, 'utf8');
  // A line cut short by the kill has no newline: its operation was not acknowledged.
  const end = text.lastIndexOf('\n');
  return end < 0 ? [] : text.slice(0, end).split('\n');
}

/** Opens the queue in this process, consumes everything, checks, reopens. */
async function finalPhase(DelayQueue, model, dir, cycle, log) {
  const lines = [];
  const open = () =>
    DelayQueue.open({
      dir,
      fsync: 'batch',
      horizonMs: HORIZON_MS,
      windowMs: WINDOW_MS,
      segmentBytes: SEGMENT_BYTES,
      checkpointIntervalMs: 200,
    });
  const required = model.required();
  // receive()'s long-poll timer is unref'd like all of the queue's timers: without this the
  // process could exit while it waits.
  const keepAlive = setInterval(() => {}, 1 << 30);
  try {
    return await consumeAll(open, model, required, lines, cycle, log);
  } finally {
    clearInterval(keepAlive);
  }
}

async function consumeAll(open, model, required, lines, cycle, log) {
  const queue = await open();
  const { recovery } = queue;
  lines.push(
    `O ${recovery.live} ${recovery.truncatedBytes} ${recovery.corrupt.length} batch ` +
      `${recovery.durationMs.toFixed(1)}`,
  );
  for (const damage of recovery.corrupt)
    lines.push(`X recovery: ${damage.where}: ${damage.reason}`);
  log(
    `final: recovered ${recovery.live} live messages; ${required.length} must be delivered; ` +
      'consuming in real time...',
  );
  const seen = new Set();
  const missing = () => required.filter((id) => !seen.has(id)).length;
  const started = Date.now();
  const deadline = started + MAX_DELAY_MS + 20_000;
  let drained = false;
  let live = recovery.live;
  while (Date.now() < deadline) {
    let got = 0;
    for (const topic of TOPICS) {
      const calledAt = lines.length;
      const messages = await queue.receive(topic, { max: 200, waitMs: 10, visibilityMs: 120_000 });
      const wall = Date.now();
      got += messages.length;
      const acks = [];
      for (const message of messages) {
        const { ok, hash } = verifyPayload(message.payload);
        lines.push(
          `R ${message.id} ${message.deliverAt} ${hash} ${ok ? 1 : 0} ${wall} ${calledAt} ` +
            `${message.attempts}`,
        );
        seen.add(message.id);
        lines.push(`a ${message.id}`);
        acks.push(
          queue.ack(message.receipt).then(
            (acked) => lines.push(`A ${message.id} ${acked ? 1 : 0}`),
            (err) => lines.push(`X final ack of ${message.id}: ${err?.message ?? err}`),
          ),
        );
      }
      await Promise.all(acks);
    }
    if (got === 0) {
      const stats = await queue.stats();
      live = stats.store.live;
      if (live === 0 && stats.inMemory === 0 && missing() === 0) {
        drained = true;
        break;
      }
      await sleep(5);
    }
  }
  const stats = await queue.stats();
  await queue.close();
  model.fold(cycle, lines, true);
  for (const id of required) {
    if (!seen.has(id)) {
      const rec = model.ids.get(id);
      model.violation(
        cycle,
        'lost',
        id,
        `acknowledged schedule (deliverAt ${rec.s.deliverAt}) never delivered; ` +
          `${rec.deliveries} earlier deliveries`,
      );
    }
  }
  if (!drained) {
    model.violation(
      cycle,
      'not drained',
      undefined,
      `${stats.store.live} messages still live (${stats.inMemory} in memory) ` +
        `${Math.round((Date.now() - started) / 1000)} s after the last kill; every delay is at most ${MAX_DELAY_MS} ms`,
    );
  }
  // Everything was acked (durably) above: a reopen must find nothing live.
  const again = await open();
  const reopenedLive = again.recovery.live;
  const leftover = await again.receive(TOPICS[0], { max: 10 });
  await again.close();
  if (reopenedLive !== 0 || leftover.length > 0) {
    model.violation(
      cycle,
      'live after reopen',
      leftover[0]?.id,
      `the final phase acked every delivery, yet a reopen finds ${reopenedLive} live messages`,
    );
  }
  return {
    required: required.length,
    finalMs: Date.now() - started,
    drained,
    truncatedBytes: recovery.truncatedBytes,
  };
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  if (!existsSync(entryPath)) {
    process.stderr.write(`crash: ${entryPath} is missing; run \`npm run build\` first\n`);
    process.exit(2);
  }
  const quiet = options.quiet;
  const log = (text) => {
    if (!quiet) process.stdout.write(`${text}\n`);
  };
  const base = options.dir ?? mkdtempSync(join(tmpdir(), 'tickwheel-crash-'));
  const dataDir = join(base, 'data');
  const journalDir = join(base, 'journal');
  mkdirSync(dataDir, { recursive: true });
  mkdirSync(journalDir, { recursive: true });
  // One build for the whole run: a copy, so that a rebuild of dist/ meanwhile (half-written
  // files) cannot break a worker's imports.
  const build = join(base, 'dist');
  rmSync(build, { recursive: true, force: true });
  cpSync(dirname(entryPath), build, { recursive: true });
  // The copy resolves its dependencies (the lock's native addon) from the project's modules.
  const modules = join(base, 'node_modules');
  rmSync(modules, { recursive: true, force: true });
  symlinkSync(join(root, 'node_modules'), modules, 'dir');
  const entry = pathToFileURL(join(build, 'delay-queue.js')).href;
  const { DelayQueue } = await import(entry);
  const random = prng(options.seed);
  const model = new Model();
  const started = performance.now();
  const runs = {
    kills: 0,
    startupKills: 0,
    fsync: { batch: 0, always: 0, never: 0 },
    tornTails: 0,
    tornBytes: 0,
  };
  /** Bytes of a torn tail added after the last kill, which the next recovery must cut. */
  let torn = 0;
  log(`crash harness: ${options.cycles} cycles, seed ${options.seed}, data in ${dataDir}`);

  for (let cycle = 1; cycle <= options.cycles; cycle++) {
    const roll = random();
    const fsync = roll < 0.6 ? 'batch' : roll < 0.85 ? 'always' : 'never';
    const duringStartup = random() < 0.1;
    const killAfterMs = duringStartup
      ? Math.floor(random() * 150)
      : options.minMs + Math.floor(random() * (options.maxMs - options.minMs + 1));
    const journal = join(journalDir, `cycle-${cycle}.log`);
    const liveFile = join(journalDir, 'live.json');
    writeFileSync(liveFile, JSON.stringify(model.inheritable(random, INHERITED_IDS)));
    const config = {
      dir: dataDir,
      entry,
      journal,
      fsync,
      cycle,
      seed: Math.floor(random() * 2 ** 32),
      live: liveFile,
      lanes: options.lanes ?? 8 + Math.floor(random() * 25),
      segmentBytes: SEGMENT_BYTES,
      checkpointIntervalMs: 50 + Math.floor(random() * 250),
    };
    runs.fsync[fsync]++;
    const before = { ...model.counts };
    const violationsBefore = model.violationCount;
    const result = await runWorker(config, { duringStartup, killAfterMs });
    const lines = readJournal(journal);
    if (torn > 0 && lines[0]?.startsWith('O ')) {
      const cut = Number(lines[0].split(' ')[2]);
      if (cut < torn) {
        model.violation(
          cycle,
          'torn tail',
          undefined,
          `recovery cut ${cut} bytes, but a torn record of ${torn} bytes had been appended`,
        );
      }
    }
    torn = 0;
    model.fold(cycle, lines);
    // --stop-on-violation: the data directory and this cycle's journal stay as the violating
    // process left them, for a post-mortem.
    const stopHere = options.stopOnViolation && model.violationCount > violationsBefore;
    if (!stopHere) rmSync(journal, { force: true });
    if (result.signal === 'SIGKILL' && result.killedAt !== undefined) {
      runs.kills++;
      if (result.readyMs === undefined || result.readyMs > result.killedAt) runs.startupKills++;
    }
    if (result.error !== undefined || result.signal !== 'SIGKILL') {
      model.violation(
        cycle,
        'worker exited',
        undefined,
        `worker ended by itself (${result.error?.message ?? `code ${result.code}, signal ${result.signal}`}) ` +
          `before the kill; stderr: ${result.stderr.trim().slice(-2000)}`,
      );
    } else if (result.readyMs === undefined && !duringStartup) {
      model.violation(cycle, 'worker stuck', undefined, 'worker did not open the queue in 30 s');
    }
    if (random() < 0.2 && !stopHere) {
      torn = tearTail(dataDir, random);
      runs.tornTails++;
      runs.tornBytes += torn;
    }
    const c = model.counts;
    log(
      `cycle ${cycle}/${options.cycles} fsync=${fsync} ` +
        `${result.readyMs === undefined ? 'killed during startup' : `ready ${Math.round(result.readyMs)} ms, killed after ${Math.round(result.killedAt - result.readyMs)} ms`} ` +
        `lanes=${config.lanes}: +S ${c.schedulesAcked - before.schedulesAcked} ` +
        `+C ${c.cancelsAcked - before.cancelsAcked} +A ${c.acksAcked - before.acksAcked} ` +
        `+R ${c.deliveries - before.deliveries} +D ${c.dedupAcked - before.dedupAcked} ` +
        `acked-then-redelivered ${c.redeliveredAfterAck - before.redeliveredAfterAck}; ` +
        `tail cut ${c.truncatedBytes - before.truncatedBytes} B${torn > 0 ? `, then torn ${torn} B` : ''}; ` +
        `live ~${model.required().length}` +
        (model.violationCount > violationsBefore
          ? `; ${model.violationCount - violationsBefore} VIOLATIONS`
          : ''),
    );
    if (stopHere) {
      for (const v of model.violations.slice(-(model.violationCount - violationsBefore))) {
        log(
          `  ${v.cycle === undefined ? '' : `cycle ${v.cycle} `}${v.kind} ${v.id ?? ''}: ${v.detail}`,
        );
      }
      log(
        `stopped at the first violation: data in ${dataDir}, journal ${journal} (seed ${options.seed})`,
      );
      process.exit(1);
    }
  }

  let final;
  try {
    final = await finalPhase(DelayQueue, model, dataDir, options.cycles + 1, log);
    if (final.truncatedBytes < torn) {
      model.violation(
        options.cycles + 1,
        'torn tail',
        undefined,
        `recovery cut ${final.truncatedBytes} bytes, but a torn record of ${torn} bytes had been appended`,
      );
    }
  } catch (err) {
    model.violation(options.cycles + 1, 'final phase failed', undefined, err?.stack ?? String(err));
    final = { required: -1, finalMs: -1, drained: false, truncatedBytes: 0 };
  }
  const { duplicates, distinct } = model.duplicates();
  const lostPerKill = [...model.lostAcks.values()];
  const report = {
    ok: model.violationCount === 0,
    seed: options.seed,
    cycles: options.cycles,
    kills: runs.kills,
    startupKills: runs.startupKills,
    fsyncCycles: runs.fsync,
    tornTailsInjected: runs.tornTails,
    tornBytesInjected: runs.tornBytes,
    ...model.counts,
    /** Kills whose lost acks showed as redeliveries, and the most one kill cost. */
    killsThatLostAcks: lostPerKill.length,
    redeliveredAfterAckMaxPerKill: Math.max(0, ...lostPerKill),
    distinctDelivered: distinct,
    duplicates,
    requiredAtEnd: final.required,
    finalMs: final.finalMs,
    drained: final.drained,
    maxEarlyMs: model.maxEarlyMs,
    elapsedMs: Math.round(performance.now() - started),
    violationCount: model.violationCount,
    violations: model.violations,
    dir: base,
  };
  if (options.report !== undefined) writeFileSync(options.report, JSON.stringify(report, null, 2));
  const c = model.counts;
  process.stdout.write(
    `\ncrash harness ${report.ok ? 'PASSED' : 'FAILED'} (seed ${options.seed})\n` +
      `  cycles ${options.cycles}, SIGKILLs ${runs.kills} (${runs.startupKills} during startup), ` +
      `fsync batch/always/never ${runs.fsync.batch}/${runs.fsync.always}/${runs.fsync.never}\n` +
      `  acknowledged: schedules ${c.schedulesAcked}, dedup re-schedules ${c.dedupAcked}, ` +
      `cancels ${c.cancelsAcked} (+${c.cancelsFalse} false), acks ${c.acksAcked} ` +
      `(+${c.acksStale} stale), nacks ${c.nacks}\n` +
      `  deliveries ${c.deliveries} (workers ${c.workerDeliveries}, final ${c.finalDeliveries}), ` +
      `distinct ${distinct}, duplicates ${duplicates}, of unacknowledged schedules ` +
      `${c.unacknowledgedDeliveries}\n` +
      `  acked then redelivered after a kill ${c.redeliveredAfterAck} (lost by ` +
      `${report.killsThatLostAcks} kills, at most ${report.redeliveredAfterAckMaxPerKill} by one)\n` +
      `  cut-short finishes ${c.maybeFinished} (${c.provenLive} later proven not to have happened), ` +
      `torn tails added ${runs.tornTails} (${runs.tornBytes} B), cut at recovery ` +
      `${c.truncatedRecoveries} (${c.truncatedBytes} B), ` +
      `slowest recovery ${c.recoveryMsMax} ms, from a snapshot ${c.snapshotRecoveries} ` +
      `(${c.snapshotsRejected} snapshots rejected)\n` +
      `  final phase: ${final.required} required, ${final.drained ? 'drained' : 'NOT drained'} ` +
      `in ${final.finalMs} ms; max earliness vs Date.now() ${report.maxEarlyMs} ms\n` +
      `  violations ${model.violationCount}\n`,
  );
  for (const v of model.violations.slice(0, 30)) {
    process.stdout.write(`    cycle ${v.cycle} ${v.kind}${v.id ? ` ${v.id}` : ''}: ${v.detail}\n`);
  }
  if (report.ok && !options.keep && options.dir === undefined) {
    rmSync(base, { recursive: true, force: true });
  } else {
    process.stdout.write(`  data kept in ${base}\n`);
  }
  process.exit(report.ok ? 0 : 1);
}

main().catch((err) => {
  process.stderr.write(`crash: ${err?.stack ?? err}\n`);
  process.exit(2);
});
