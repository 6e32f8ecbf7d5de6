/**
 * The data-directory lock, tried the way users hit it: separate processes racing to open one
 * directory, a second server in another PID namespace (containers sharing a volume), a LOCK
 * file naming a pid that now belongs to an unrelated process, and a LOCK deleted under an open
 * queue while a second process opens the directory.
 */

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const tempDir = useTempDirs('lock');

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const entry = pathToFileURL(join(root, 'dist', 'delay-queue.js')).href;
const children: ChildProcess[] = [];

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
});

/**
 * A plain `node` process that says WAITING on stderr and waits for `go` (a file appearing, so
 * racers start together), opens the queue, schedules one message, prints OPEN or the error
 * code, then holds the queue for `hold` ms, or until the file `hold` names appears, and closes
 * it.
 */
function opener(
  dir: string,
  go: string,
  hold: number | string,
  prefix: string[] = [],
): ChildProcess {
  const until = (file: string) =>
    `while (!existsSync(${JSON.stringify(file)})) await new Promise((r) => setTimeout(r, 1));`;
  const script = `
    import { existsSync } from 'node:fs';
    const { DelayQueue } = await import(${JSON.stringify(entry)});
    process.stderr.write('WAITING\\n');
    ${until(go)}
    try {
      const queue = await DelayQueue.open({ dir: ${JSON.stringify(dir)}, fsync: 'never' });
      await queue.schedule({ topic: 't', payload: process.pid, delayMs: 60_000 });
      console.log('OPEN');
      ${typeof hold === 'string' ? until(hold) : `await new Promise((r) => setTimeout(r, ${hold}));`}
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
      const release = `${go}-release`;
      const racers = [0, 1, 2].map(() => opener(dir, go, release));
      let opened = 0;
      let answered = 0;
      for (const racer of racers) {
        racer.stdout!.on('data', (chunk) => (opened += String(chunk).includes('OPEN') ? 1 : 0));
      }
      const polling = racers.map(
        (racer) =>
          new Promise<void>((ready) =>
            racer.stderr!.on('data', (chunk) => String(chunk).includes('WAITING') && ready()),
          ),
      );
      const results = racers.map((racer) => outcome(racer).finally(() => answered++));
      await Promise.all(polling);
      writeFileSync(go, '');
      // The one that opened holds the directory until the other two have answered (or a second
      // one opened it too).
      await waitFor(() => answered >= 2 || opened >= 2);
      writeFileSync(release, '');
      const seen = await Promise.all(results);
      rmSync(go, { force: true });
      rmSync(release, { force: true });
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

/**
 * A queue process driven over stdin: opens `dir` with `options`, schedules `first` if given,
 * prints OPEN, then runs `schedule <id> <bytes>` and `close` commands, printing what became of
 * each. Process warnings are printed as `WARNING <code>`.
 */
const DRIVEN = `
  import { createInterface } from 'node:readline';
  const { DelayQueue } = await import(${JSON.stringify(entry)});
  const [dir, options, first] = process.argv.slice(2);
  process.on('warning', (warning) => console.log('WARNING ' + (warning.code ?? warning.name)));
  const queue = await DelayQueue.open({ dir, ...JSON.parse(options) });
  const schedule = (id, bytes) =>
    queue.schedule({ topic: 't', id, payload: 'x'.repeat(Number(bytes)), delayMs: 3_600_000 });
  if (first !== undefined) await schedule(...first.split(':'));
  console.log('OPEN');
  for await (const line of createInterface({ input: process.stdin })) {
    const [command, id, bytes] = line.split(' ');
    if (command === 'schedule') {
      await schedule(id, bytes).then(
        () => console.log('SCHEDULED ' + id),
        (err) => console.log('REFUSED ' + id + ' ' + err.code),
      );
    } else if (command === 'problem') {
      console.log('PROBLEM ' + (await queue.problem()));
    } else if (command === 'close') {
      await queue.close();
      console.log('CLOSED');
      process.exit(0);
    }
  }
`;

interface Driven {
  send(line: string): void;
  /** Resolves with the first line of output that `match` accepts. */
  line(match: RegExp): Promise<string>;
  child: ChildProcess;
}

function drive(dir: string, options: object, first?: string): Driven {
  const script = join(tempDir(), 'driven.mjs');
  writeFileSync(script, DRIVEN);
  const args = [script, dir, JSON.stringify(options)];
  const child = spawn(process.execPath, first === undefined ? args : [...args, first], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(child);
  const lines: string[] = [];
  const waiting: Array<{ match: RegExp; done: (line: string) => void }> = [];
  let err = '';
  child.stderr!.on('data', (chunk) => (err += String(chunk)));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    lines.push(line);
    for (const wait of [...waiting]) {
      if (wait.match.test(line)) {
        waiting.splice(waiting.indexOf(wait), 1);
        wait.done(line);
      }
    }
  });
  return {
    child,
    send: (line) => child.stdin!.write(`${line}\n`),
    line: (match) =>
      new Promise((done, fail) => {
        const seen = lines.find((line) => match.test(line));
        if (seen !== undefined) return done(seen);
        waiting.push({ match, done });
        child.once('exit', (code) =>
          fail(new Error(`exited (${code}) before ${match}: ${lines.join('\n')}\n${err}`)),
        );
      }),
  };
}

async function statuses(dir: string, ids: string[]): Promise<Array<string | undefined>> {
  const queue = await DelayQueue.open({ dir });
  try {
    return await Promise.all(ids.map(async (id) => (await queue.get(id))?.status));
  } finally {
    await queue.close();
  }
}

describe('a LOCK file deleted under an open queue', () => {
  it('is noticed at the next checkpoint: the queue stops, warns, and loses nothing acknowledged', async () => {
    const dir = tempDir();
    const a = drive(dir, { checkpointIntervalMs: 200 }, 'a1:1');
    await a.line(/^OPEN$/);
    rmSync(join(dir, 'LOCK'));
    // The second process finds no lock held and opens the directory.
    const b = drive(dir, {}, 'b1:1');
    await b.line(/^OPEN$/);
    expect(await a.line(/^WARNING /)).toBe('WARNING ERR_TICKWHEEL_LOCK_LOST');
    a.send('schedule a2 1');
    expect(await a.line(/ a2\b/)).toBe('REFUSED a2 ERR_TICKWHEEL_LOCK_LOST');
    // What /healthz answers 503 with.
    a.send('problem');
    expect(await a.line(/^PROBLEM /)).toMatch(/LOCK.*restart the queue/);
    a.send('close');
    await a.line(/^CLOSED$/);
    b.send('close');
    await b.line(/^CLOSED$/);
    expect(await statuses(dir, ['a1', 'b1', 'a2'])).toEqual(['scheduled', 'scheduled', undefined]);
  });

  it('is noticed before a new log segment: the write that needs it fails, and so do later ones', async () => {
    const dir = tempDir();
    // No checkpoint in the test's time: the roll is what notices.
    const options = { segmentBytes: 1024, checkpointIntervalMs: 3_600_000 };
    const a = drive(dir, options, 'a1:600');
    await a.line(/^OPEN$/);
    rmSync(join(dir, 'LOCK'));
    const b = drive(dir, {});
    await b.line(/^OPEN$/);
    a.send('schedule a2 600');
    expect(await a.line(/ a2\b/)).toBe('REFUSED a2 ERR_TICKWHEEL_LOCK_LOST');
    expect(await a.line(/^WARNING /)).toBe('WARNING ERR_TICKWHEEL_LOCK_LOST');
    a.send('schedule a3 1');
    expect(await a.line(/ a3\b/)).toBe('REFUSED a3 ERR_TICKWHEEL_LOCK_LOST');
    expect(existsSync(join(dir, 'log', '0000000002.seg'))).toBe(false);
    b.child.kill('SIGKILL');
    await new Promise((done) => b.child.on('exit', done));
    a.send('close');
    await a.line(/^CLOSED$/);
    expect(await statuses(dir, ['a1', 'a2', 'a3'])).toEqual(['scheduled', undefined, undefined]);
  });
});
