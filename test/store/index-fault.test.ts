/**
 * A server whose disk runs out of inodes while it holds messages due beyond its near horizon:
 * writes of the schedule index fail. Nothing may be lost or stuck: /healthz and /metrics say
 * what fails while it lasts, the fault is logged once (a JSON line with its code), and once
 * inodes are free again every
 * message is delivered, not early, with no restart.
 *
 * Run as users run it: a real server in a child process, its data directory on a tmpfs of a
 * few hundred inodes (mounting needs root, as in CI; the test is skipped where it cannot mount).
 */

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LISTENING, requireBuiltCli } from '../server/process.js';
import { useTempDirs } from '../support/temp-dir.js';

const SCRIPT = fileURLToPath(new URL('./fixtures/serve-small-windows.mjs', import.meta.url));
const TOPIC = 'far';
const COUNT = 15;

const tempDir = useTempDirs('index-fault');

function mountSmallTmpfs(): string | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'tickwheel-inodes-'));
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64m,nr_inodes=400', 'tmpfs', dir]);
  if (mounted.status === 0) return dir;
  rmSync(dir, { recursive: true, force: true });
  return undefined;
}

const mount = process.platform === 'linux' ? mountSmallTmpfs() : undefined;

describe.skipIf(mount === undefined)('index writes on a disk without free inodes', () => {
  let child: ChildProcess;
  let url: string;
  let stderr = '';
  let stdout = '';

  beforeAll(async () => {
    requireBuiltCli();
    child = spawn(process.execPath, [SCRIPT, join(mount as string, 'data')], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stderr?.setEncoding('utf8').on('data', (text: string) => (stderr += text));
    child.stdout?.setEncoding('utf8').on('data', (text: string) => (stdout += text));
    await vi.waitFor(
      () => {
        const match = LISTENING.exec(stdout);
        if (match === null) throw new Error(`not listening yet: ${stdout} ${stderr}`);
        url = match[1];
      },
      { timeout: 20_000, interval: 50 },
    );
  });

  afterAll(() => {
    child?.kill('SIGKILL');
    if (mount !== undefined) {
      spawnSync('umount', ['-l', mount]);
      rmSync(mount, { recursive: true, force: true });
    }
  });

  const health = async () => {
    const response = await fetch(`${url}/healthz`);
    return { status: response.status, body: (await response.json()) as Record<string, string> };
  };

  it('reports the fault while it lasts and delivers everything once it clears', async () => {
    expect((await health()).status).toBe(200);

    // Every free inode taken: no new index file can be created.
    const fill = join(mount as string, 'fill');
    mkdirSync(fill);
    let files = 0;
    try {
      while (true) writeFileSync(join(fill, String(files++)), '');
    } catch (err) {
      expect((err as NodeJS.ErrnoException).code).toBe('ENOSPC');
    }

    // Due 1.5-3 s ahead: beyond the 500 ms horizon, each in a 100 ms index window of its own.
    const due: Record<string, number> = {};
    for (let i = 0; i < COUNT; i++) {
      const response = await fetch(`${url}/v1/topics/${TOPIC}/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ payload: { i }, delayMs: 1500 + i * 100 }),
      });
      expect(response.status).toBe(201); // the log needs no new inode: acknowledged
      const { id, deliverAt } = (await response.json()) as { id: string; deliverAt: number };
      due[id] = deliverAt;
    }

    // A checkpoint (every 200 ms here) may meet the full disk first: /healthz lists every part
    // that fails, and the index is among them once a window of the index is written.
    const failing = await vi.waitFor(
      async () => {
        const answer = await health();
        if (answer.status !== 503 || !/schedule index/.test(answer.body.reason)) {
          throw new Error(`the index not failing yet: ${JSON.stringify(answer.body)}`);
        }
        return answer.body;
      },
      { timeout: 20_000, interval: 50 },
    );
    expect(failing.status).toBe('unavailable');
    expect(failing.reason).toMatch(/schedule index.*ENOSPC/);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/tickwheel_store_failing\{part="index"\} 1/);

    // The fault lasts past the first message's due time, so its window's load meets it too.
    const firstDue = Math.min(...Object.values(due));
    await vi.waitFor(
      () => {
        if (Date.now() < firstDue + 300) throw new Error('not yet');
      },
      { timeout: 10_000, interval: 50 },
    );
    rmSync(fill, { recursive: true, force: true });

    const received = new Map<string, number>();
    await vi.waitFor(
      async () => {
        const response = await fetch(`${url}/v1/topics/${TOPIC}/receive`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ max: COUNT, waitMs: 200 }),
        });
        const { messages } = (await response.json()) as {
          messages: Array<{ id: string; receipt: string }>;
        };
        for (const message of messages) {
          received.set(message.id, Date.now());
          await fetch(`${url}/v1/ack`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ receipt: message.receipt }),
          });
        }
        if (received.size < COUNT) throw new Error(`${received.size} of ${COUNT} received`);
      },
      { timeout: 20_000, interval: 0 },
    );
    expect([...received.keys()].sort()).toEqual(Object.keys(due).sort());
    for (const [id, at] of received) expect(at).toBeGreaterThanOrEqual(due[id]);

    await vi.waitFor(
      async () => {
        if ((await health()).status !== 200) throw new Error('not healed yet');
      },
      { timeout: 20_000, interval: 50 },
    );
    const healed = await (await fetch(`${url}/metrics`)).text();
    expect(healed).toMatch(/tickwheel_store_failing\{part="index"\} 0/);
    // Told once when it started and once when it healed, not at every retry: log lines with
    // their codes, on stdout.
    const index = stdout
      .trim()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.part === 'index');
    expect(index.map((line) => [line.code, line.level, line.errno])).toEqual([
      ['ERR_TICKWHEEL_IO', 40, 'ENOSPC'],
      ['TICKWHEEL_STORE_HEALED', 30, undefined],
    ]);
    expect(index[0].msg).toMatch(/writing the schedule index .* fails/);
    expect(index[1].msg).toMatch(/writing the schedule index .* works again/);
    expect(stderr).not.toMatch(/schedule index/);
  });
});

describe('index writes and loads with every file descriptor taken', () => {
  it('heals by itself once descriptors are free, told once per fault', async () => {
    requireBuiltCli();
    const dir = tempDir('fds');
    const script = fileURLToPath(new URL('./fixtures/fd-exhaustion.mjs', import.meta.url));
    // A low limit, so that taking every free descriptor is quick.
    const child = spawn(
      'bash',
      ['-c', 'ulimit -n 128 && exec "$0" "$1" "$2"', process.execPath, script, join(dir, 'data')],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
    child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
    const code = await new Promise((resolve) => child.on('exit', resolve));
    expect(code, stderr).toBe(0);
    const report = JSON.parse(stdout) as {
      problem: string;
      loadFailing: number;
      indexFailing: number;
      received: number;
      early: number;
      warnings: Array<{ code: string; message: string }>;
    };
    expect(report.problem).toMatch(/schedule index.*EMFILE/);
    expect(report.indexFailing).toBe(1);
    expect(report.loadFailing).toBe(1); // the first window's load met the fault too
    expect(report.received).toBe(COUNT);
    expect(report.early).toBe(0);
    const index = report.warnings.filter((warning) => /schedule index/.test(warning.message));
    expect(index.map((warning) => warning.code)).toEqual([
      'ERR_TICKWHEEL_IO',
      'TICKWHEEL_STORE_HEALED',
    ]);
    // The failed load: ERR_TICKWHEEL_IO, the system error's text in its message.
    const load = report.warnings.filter((warning) => !/^writing /.test(warning.message));
    expect(load.map((warning) => warning.code)).toEqual(['ERR_TICKWHEEL_IO']);
    expect(load[0].message).toMatch(/EMFILE/);
  });
});
