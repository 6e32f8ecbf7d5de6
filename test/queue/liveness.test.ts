/**
 * A plain `node worker.mjs` stays alive while it waits on the queue, the way awaiting a
 * `setTimeout` keeps it alive, and ends as soon as the queue is closed.
 */

import { spawn } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('live');

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const entry = pathToFileURL(join(root, 'dist', 'delay-queue.js')).href;
/** Runs `body` in a fresh `node` process with `queue` open; resolves with its output and exit. */
function worker(body: string): Promise<{ code: number | null; out: string[]; ms: number }> {
  const dir = tempDir();
  const script = `
    const { DelayQueue } = await import(${JSON.stringify(entry)});
    const queue = await DelayQueue.open({ dir: ${JSON.stringify(dir)} });
    const started = Date.now();
    const say = (line) => console.log(line);
    ${body}
  `;
  const started = Date.now();
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk) => (out += String(chunk)));
  child.stderr.on('data', (chunk) => (err += String(chunk)));
  return new Promise((done) =>
    child.on('exit', (code) => {
      if (code !== 0) out += `\nstderr: ${err}`;
      done({ code, out: out.trim().split('\n'), ms: Date.now() - started });
    }),
  );
}

describe('a plain node process waiting on the queue', () => {
  it('stays alive through a long-poll receive that ends empty, then ends', async () => {
    const run = await worker(`
      const got = await queue.receive('jobs', { waitMs: 700 });
      say('received ' + got.length + ' after ' + (Date.now() - started >= 650 ? 'the wait' : 'too little'));
      await queue.close();
    `);
    expect(run.code).toBe(0);
    expect(run.out).toEqual(['received 0 after the wait']);
  });

  it('stays alive through a long-poll receive until a scheduled message is due', async () => {
    const run = await worker(`
      await queue.schedule({ topic: 'jobs', payload: 'hello', delayMs: 400 });
      const [message] = await queue.receive('jobs', { waitMs: 5000 });
      say(message.payload);
      await queue.ack(message.receipt);
      await queue.close();
    `);
    expect(run.code).toBe(0);
    expect(run.out).toEqual(['hello']);
  });

  it('stays alive while a consumer runs; close() lets the process end at once', async () => {
    const run = await worker(`
      await queue.schedule({ topic: 'jobs', payload: 'work', delayMs: 300 });
      const consumer = queue.consume('jobs', async (message) => {
        say('handled ' + message.payload);
        setImmediate(() => consumer.close().then(() => queue.close()).then(() => say('closed')));
      });
    `);
    expect(run.code).toBe(0);
    expect(run.out).toEqual(['handled work', 'closed']);
    expect(run.ms).toBeLessThan(15_000); // ends by itself: no timer left behind
  });

  it('a queue holding only scheduled messages does not keep the process alive', async () => {
    const run = await worker(`
      await queue.schedule({ topic: 'jobs', payload: 'later', delayMs: 60_000 });
      say('scheduled');
    `);
    expect(run.code).toBe(0);
    expect(run.out).toEqual(['scheduled']);
    expect(run.ms).toBeLessThan(30_000);
  });
});
