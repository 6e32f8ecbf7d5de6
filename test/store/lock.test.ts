/**
 * The data-directory lock, tried the way users hit it: separate processes racing to open one
 * directory, a second server in another PID namespace (containers sharing a volume), and a
 * LOCK file naming a pid that now belongs to an unrelated process.
 */

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const entry = pathToFileURL(join(root, 'dist', 'delay-queue.js')).href;
const dirs: string[] = [];
const children: ChildProcess[] = [];

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tickwheel-lock-'));
  dirs.push(dir);
  return dir;
}

/**
 * A plain `node` process that waits for `go` (a file appearing, so racers start together),
 * opens the queue, schedules one message, prints OPEN or the error code, then holds the queue
 * for `holdMs` and closes it.
 */
function opener(dir: string, go: string, holdMs: number, prefix: string[] = []): ChildProcess {
  const script = `
    import { existsSync } from 'node:fs';
    const { DelayQueue } = await import(${JSON.stringify(entry)});
    while (!existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 1));
    try {
      const queue = await DelayQueue.open({ dir: ${JSON.stringify(dir)}, fsync: 'never' });
      await queue.schedule({ topic: 't', payload: process.pid, delayMs: 60_000 });
      console.log('OPEN');
      await new Promise((r) => setTimeout(r, ${holdMs}));
      await queue.close();
    } catch (err) {
      console.log(err.code ?? String(err));
    }
  `;
  const [command, ...args] = [...prefix, process.execPath, '--input-type=module', '-e', script];
  const child = spawn(command!, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  return child;
}

function outcome(child: ChildProcess): Promise<string> {
  let out = '';
  let err = '';
  child.stdout!.on('data', (chunk) => (out += String(chunk)));
  child.stderr!.on('data', (chunk) => (err += String(chunk)));
  return new Promise((done) =>
    child.on('exit', () => done(out.trim() || `no output; stderr: ${err.trim()}`)),
  );
}

function openNow(dir: string, holdMs = 0, prefix: string[] = []): Promise<string> {
  const go = join(dir, 'GO');
  writeFileSync(go, '');
  return outcome(opener(dir, go, holdMs, prefix));
}

describe('the data-directory lock across processes', () => {
  it('of processes racing to open one directory, exactly one opens it (fresh and stale LOCK)', async () => {
    for (let round = 0; round < 12; round++) {
      const dir = tempDir();
      // Odd rounds start from a stale LOCK naming a pid that is surely not running.
      if (round % 2 === 1) writeFileSync(join(dir, 'LOCK'), '999999999\n');
      const go = join(dirname(dir), `${dir.split('/').pop()}-go`);
      const racers = [0, 1, 2].map(() => opener(dir, go, 500));
      const results = racers.map(outcome);
      await new Promise((r) => setTimeout(r, 300)); // all three are polling for `go`
      writeFileSync(go, '');
      const seen = await Promise.all(results);
      rmSync(go, { force: true });
      expect(
        seen.filter((line) => line === 'OPEN'),
        `round ${round}: ${seen}`,
      ).toHaveLength(1);
      expect(seen.filter((line) => line === 'ERR_TICKWHEEL_LOCKED')).toHaveLength(2);
    }
  });

  it('a LOCK naming a live, unrelated process does not block start-up', async () => {
    const dir = tempDir();
    const bystander = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)']);
    children.push(bystander);
    writeFileSync(join(dir, 'LOCK'), `${bystander.pid}\n`);
    expect(await openNow(dir)).toBe('OPEN');
    bystander.kill('SIGKILL');
  });

  it('a holder that was SIGKILLed leaves the lock free at once', async () => {
    const dir = tempDir();
    const go = join(dir, 'GO');
    writeFileSync(go, '');
    const holder = opener(dir, go, 60_000);
    await new Promise<void>((done) =>
      holder.stdout!.on('data', (chunk) => String(chunk).includes('OPEN') && done()),
    );
    expect(await openNow(dir)).toBe('ERR_TICKWHEEL_LOCKED');
    holder.kill('SIGKILL');
    await new Promise((done) => holder.on('exit', done));
    expect(await openNow(dir)).toBe('OPEN');
  });

  const unshare = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true']).status === 0;
  it.skipIf(!unshare)(
    'a second process in another PID namespace cannot take over a held directory',
    async () => {
      const dir = tempDir();
      const go = join(dir, 'GO');
      writeFileSync(go, '');
      const holder = opener(dir, go, 60_000);
      await new Promise<void>((done) =>
        holder.stdout!.on('data', (chunk) => String(chunk).includes('OPEN') && done()),
      );
      // In a fresh PID namespace the holder's pid names nothing (or someone else).
      const inside = ['unshare', '--pid', '--fork', '--mount-proc'];
      expect(await openNow(dir, 0, inside)).toBe('ERR_TICKWHEEL_LOCKED');
      holder.kill('SIGKILL');
      await new Promise((done) => holder.on('exit', done));
      expect(await openNow(dir, 0, inside)).toBe('OPEN');
    },
  );

  it('the LOCK file outlives close (it is never deleted, so no second lock file can appear)', async () => {
    const dir = tempDir();
    expect(await openNow(dir)).toBe('OPEN');
    expect(existsSync(join(dir, 'LOCK'))).toBe(true);
    expect(await openNow(dir)).toBe('OPEN');
  });
});
