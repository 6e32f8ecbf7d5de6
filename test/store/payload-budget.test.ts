/**
 * A backlog of large payloads with no consumer: the queue holds at most its payload budget in
 * memory, when scheduled and after a restart, and reads the rest back from its log when they
 * are received. Run as users run it: child processes on one data directory.
 */

import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { requireBuiltCli, startServer } from '../server/process.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('budget');

const SCRIPT = fileURLToPath(new URL('./fixtures/large-backlog.mjs', import.meta.url));
const MIB = 1024 * 1024;
const COUNT = 200;
const BUDGET = 16 * MIB;
const scratch = tempDir();

interface Report {
  held: number;
  rssBytes: number;
  peakRssBytes: number;
  received: number;
  intact: number;
}

function run(dir: string, budget: number, mode: string): Promise<Report> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--expose-gc', SCRIPT, dir, String(budget), String(COUNT), mode],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => (out += text));
    child.stderr.setEncoding('utf8').on('data', (text: string) => (err += text));
    child.on('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out) as Report) : reject(new Error(`exit ${code}: ${err}`)),
    );
  });
}

it('holds at most its payload budget of a 200 MiB backlog, and reads the rest back when received', async () => {
  requireBuiltCli();
  const dir = join(scratch, 'data');
  const filled = await run(dir, BUDGET, 'fill');
  expect(filled.held).toBeLessThanOrEqual(BUDGET);
  expect(filled.held).toBeGreaterThan(0);

  // Recovery keeps to the budget too; without one it holds every payload (200 MiB) again.
  const recovered = await run(dir, BUDGET, 'hold');
  expect(recovered.held).toBeLessThanOrEqual(BUDGET);
  const unbounded = await run(dir, Infinity, 'hold');
  expect(unbounded.held).toBe(COUNT * MIB);
  // The peak RSS of the recovery, not the RSS after it: recovery reads the log in pieces of
  // about 16 MiB, and what V8 has not collected of them yet (up to its 64 MiB of external
  // memory before a GC) is in the peak of either run alike. Seen: 198-208 MB against 271 MB;
  // with the reads unbounded, 322 MB.
  expect(recovered.peakRssBytes + 32 * MIB).toBeLessThan(unbounded.peakRssBytes);

  const drained = await run(dir, BUDGET, 'drain');
  expect(drained).toMatchObject({ received: COUNT, intact: COUNT });
});

it('tickwheel serve takes the budget in MiB (--payload-memory), 128 by default', async () => {
  const stats = async (args: string[]) => {
    const server = await startServer(['--dir', join(scratch, `serve-${args.length}`), ...args]);
    try {
      const response = await fetch(`${server.url}/v1/stats`);
      return ((await response.json()) as { payloadMemory: { limitBytes: number } }).payloadMemory;
    } finally {
      await server.kill();
    }
  };
  expect((await stats([])).limitBytes).toBe(128 * MIB);
  expect((await stats(['--payload-memory', '16'])).limitBytes).toBe(16 * MIB);
});
