/**
 * Compaction under SIGKILL: a worker process (compaction-worker.mjs, plain node on the built
 * package) keeps long-lived messages (due in a month, dead letters) under churn, so that they are
 * carried forward again and again; it is killed at random points, cycle after cycle. After every
 * kill the long-lived messages are all there, unchanged but for acknowledged reschedules, and no
 * acked churn message came back; at the end the log is small again and every payload is whole.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import { seededInt, useTempDirs, waitFor } from '../support/index.js';
import {
  DEAD,
  FAR,
  IDLE,
  deadPayload,
  farPayload,
  idlePayload,
  options,
} from './compaction-worker.mjs';

const worker = join(dirname(fileURLToPath(import.meta.url)), 'compaction-worker.mjs');
const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const tempDir = useTempDirs('compaction-crash');

/** Workers still running: killed after each test, also one that timed out. */
const running = new Set<ChildProcess>();
afterEach(() => {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
});

interface Journal {
  acked: string[];
  /** Messages the workers carried forward, summed over their runs. */
  relocated: number;
  /** far index -> due times it may have: the last resolved, and any called after it. */
  due: Map<number, Set<number>>;
}

function readJournal(file: string): Journal {
  const acked: string[] = [];
  const due = new Map<number, Set<number>>();
  let relocated = 0;
  let run = 0;
  for (const text of readFileSync(file, 'utf8').split('\n')) {
    const [kind, a, b] = text.split(' ');
    if (kind === 'A') acked.push(a);
    else if (kind === 'R') {
      // Counts grow within a run and start again at the next: a fall is a new run.
      if (Number(a) < run) relocated += run;
      run = Number(a);
    } else if (kind === 'M') due.set(Number(a), new Set([Number(b)]));
    else if (kind === 'm') due.get(Number(a))?.add(Number(b));
  }
  return { acked, due, relocated: relocated + run };
}

/** Runs the worker and SIGKILLs it `lives` checks of 5 ms after `ready()` holds. */
async function runUntilKilled(config: object, ready: () => boolean, lives: number): Promise<void> {
  const child = spawn(process.execPath, [worker, JSON.stringify(config)], {
    cwd: root,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  running.add(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  let ended = false;
  void exited.then(() => (ended = true));
  try {
    await waitFor(() => ended || (ready() && lives-- <= 0), { timeoutMs: 60_000, intervalMs: 5 });
  } finally {
    child.kill('SIGKILL');
  }
  const code = await exited;
  running.delete(child);
  expect(code, `the worker ended by itself: ${stderr}`).toBeNull();
}

const cycles = Number(process.env.TICKWHEEL_CRASH_CYCLES ?? 12);

describe('compaction under SIGKILL', () => {
  it(
    'loses no long-lived message and brings back no acked one',
    { timeout: 60_000 + cycles * 5000 },
    async () => {
      const dir = tempDir();
      const journal = join(dir, '..', `${Date.now()}-journal.txt`);
      const readyFile = `${journal}.ready`;
      const seed = Number(process.env.TICKWHEEL_CRASH_SEED ?? Date.now() % 1_000_000);
      const pick = seededInt(seed);
      /** Messages carried forward by the workers; the final open adds its own. */
      let relocatedSeen = 0;
      for (let cycle = 0; cycle < cycles; cycle++) {
        const snapshotBytes = [0, 64 * 1024, Infinity][cycle % 3];
        const config = { dir, journal, readyFile, seed: seed + cycle, cycle, snapshotBytes };
        // Killed 25-1500 ms after its long-lived messages exist.
        await runUntilKilled(config, () => existsSync(readyFile), 5 + pick(295));
        const { acked, due, relocated } = readJournal(journal);
        relocatedSeen = relocated;
        const queue = await DelayQueue.open(options(dir, snapshotBytes));
        try {
          for (let i = 0; i < FAR; i++) {
            const info = await queue.get(`far-${i}`);
            expect(info, `far-${i} after cycle ${cycle} (seed ${seed})`).toMatchObject({
              status: 'scheduled',
              attempts: 0,
            });
            expect(due.get(i)).toContain(info!.deliverAt);
          }
          for (let i = 0; i < DEAD; i++) {
            expect(await queue.get(`dead-${i}`)).toMatchObject({
              status: 'dead',
              attempts: 1,
              lastError: `reason of dead-${i}`,
            });
          }
          for (let i = 0; i < IDLE; i++) {
            expect(await queue.get(`idle-${i}`)).toMatchObject({ status: 'ready', attempts: 0 });
          }
          for (const id of acked.slice(-300)) expect(await queue.get(id)).toBeUndefined();
        } finally {
          await queue.close();
        }
      }
      // The end: compaction frees the log, and every payload reads back whole.
      const queue = await DelayQueue.open(options(dir, 64 * 1024));
      try {
        await waitFor(async () => (await queue.stats()).store!.segments! <= 4, {
          timeoutMs: 30_000,
        });
        relocatedSeen += (await queue.stats()).store?.relocated ?? 0;
        for (let i = 0; i < DEAD; i++) expect(await queue.requeue(`dead-${i}`)).toBe(true);
        for (let i = 0; i < FAR; i++) await queue.reschedule(`far-${i}`, { delayMs: 0 });
        const seen = new Map<string, unknown>();
        await waitFor(async () => {
          for (const topic of ['far', 'poison', 'idle']) {
            for (const m of await queue.receive(topic, { max: 50 })) {
              seen.set(m.id, m.payload);
              await queue.ack(m.receipt);
            }
          }
          return seen.size === FAR + DEAD + IDLE;
        });
        for (let i = 0; i < FAR; i++) expect(seen.get(`far-${i}`)).toEqual(farPayload(i));
        for (let i = 0; i < DEAD; i++) expect(seen.get(`dead-${i}`)).toEqual(deadPayload(i));
        for (let i = 0; i < IDLE; i++) expect(seen.get(`idle-${i}`)).toEqual(idlePayload(i));
      } finally {
        await queue.close();
      }
      expect(relocatedSeen, `seed ${seed}: compaction never ran`).toBeGreaterThan(0);
      expect(readdirSync(join(dir, 'log')).length).toBeLessThanOrEqual(4);
    },
  );
});
