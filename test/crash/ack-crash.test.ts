/**
 * A crash after acks that resolved before their group commit: the next process delivers those
 * messages again, and only those; a durable ack holds (docs/storage.md, "Durability"). Run as
 * users run it: a consumer process (ack-worker.mjs, against dist/) SIGKILLed.
 */

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('ack-crash');

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const dist = join(root, 'dist');
const script = join(root, 'test', 'crash', 'ack-worker.mjs');

/** Runs the worker until it printed its line, then SIGKILLs it. */
function runUntilAcked(dir: string): Promise<{ line: Record<string, unknown>; signal: string }> {
  const child = spawn(process.execPath, [script, pathToFileURL(dist).href, dir], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  child.stdout.setEncoding('utf8').on('data', (text: string) => {
    out += text;
    if (out.includes('\n')) child.kill('SIGKILL');
  });
  return new Promise((done, fail) =>
    child.on('exit', (_code, signal) => {
      if (!out.includes('\n')) fail(new Error(`the worker ended before acking: ${stderr}`));
      else
        done({
          line: JSON.parse(out.split('\n')[0]) as Record<string, unknown>,
          signal: String(signal),
        });
    }),
  );
}

describe('a crash after acks not yet written', () => {
  it('delivers again the messages of those acks, and no other', async () => {
    if (!existsSync(join(dist, 'delay-queue.js'))) throw new Error('run `npm run build` first');
    const dir = tempDir();
    const { line, signal } = await runUntilAcked(dir);
    expect(signal).toBe('SIGKILL');
    // Resolved while their write could not happen, and applied: acked in that process.
    expect(line).toEqual({
      durable: [true, true, true, true],
      applied: [true, true, true, true, true, true],
      statuses: Array(10).fill('acked'),
    });
    const queue = await DelayQueue.open({ dir });
    try {
      const again = await queue.receive('t', { max: 100, waitMs: 1000 });
      expect(again.map((m) => m.id).sort()).toEqual(['m-4', 'm-5', 'm-6', 'm-7', 'm-8', 'm-9']);
      for (const message of again) expect(await queue.ack(message.receipt)).toBe(true);
      expect(await queue.receive('t', { max: 100 })).toEqual([]);
    } finally {
      await queue.close();
    }
  });
});
