/**
 * Poison messages: a message whose handler ends the process is delivered again after each
 * restart, its attempts counted from one run to the next, until it has used them up; then it
 * is a dead letter that says why, and the other messages are delivered as usual. Run as users
 * run it: a consumer process (poison-consumer.mjs, against dist/) restarted after each crash.
 */

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('poison');

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const built = join(root, 'dist', 'delay-queue.js');
const script = join(root, 'test', 'crash', 'poison-consumer.mjs');
interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  events: Array<Record<string, any>>; // eslint-disable-line @typescript-eslint/no-explicit-any
  stderr: string;
}

function run(dir: string, mode: 'exit' | 'kill', schedule: boolean): Promise<Run> {
  const args = [script, pathToFileURL(built).href, dir, mode, ...(schedule ? ['--schedule'] : [])];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => (out += text));
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  return new Promise((done) =>
    child.on('exit', (code, signal) => {
      const events = out
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => JSON.parse(line));
      done({ code, signal, events, stderr });
    }),
  );
}

/** Restarts the consumer until a run ends by itself (at most `limit` runs). */
async function untilDone(mode: 'exit' | 'kill', limit: number): Promise<Run[]> {
  if (!existsSync(built)) throw new Error(`${built} is missing: run \`npm run build\``);
  const dir = tempDir();
  const runs: Run[] = [];
  while (runs.length < limit) {
    const last = await run(dir, mode, runs.length === 0);
    runs.push(last);
    if (last.code === 0) break;
  }
  return runs;
}

describe('a message whose handler ends the process', () => {
  it.each([
    ['calls process.exit(1) at once', 'exit' as const],
    ['is SIGKILLed while it works', 'kill' as const],
  ])('%s: after maxAttempts crashes it is a dead letter', async (_name, mode) => {
    const runs = await untilDone(mode, 6);
    const crashed = runs.slice(0, -1);
    const last = runs[runs.length - 1];
    expect(last.code, `the last run:\n${last.stderr}`).toBe(0);
    // Delivered once a run, its attempts counted across the restarts: 1, 2, 3.
    expect(crashed.map((each) => each.events.find((e) => e.event === 'poison')?.attempts)).toEqual([
      1, 2, 3,
    ]);
    for (const each of crashed) {
      if (mode === 'exit') expect(each.code).toBe(1);
      else expect(each.signal).toBe('SIGKILL');
    }
    // The last run does not deliver it again; the others are delivered as usual, first time.
    expect(last.events.filter((e) => e.event === 'poison')).toEqual([]);
    const handled = runs.flatMap((each) => each.events.filter((e) => e.event === 'handled'));
    expect(handled.map((e) => e.id).sort()).toEqual([0, 1, 2, 3, 4].map((i) => `good-${i}`));
    expect(handled.every((e) => e.attempts === 1)).toBe(true);
    const letters = last.events.find((e) => e.event === 'dead')?.letters;
    expect(letters).toEqual([
      expect.objectContaining({
        id: 'poison',
        status: 'dead',
        attempts: 3,
        lastError: expect.stringMatching(/process stopped .* during delivery 3 of 3/),
      }),
    ]);
  });
});
