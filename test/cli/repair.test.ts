/**
 * A damaged data directory as an operator meets it: `tickwheel serve` refuses to start and says
 * what is damaged; `tickwheel repair` says what it would drop and changes nothing; `--yes`
 * drops it; `tickwheel serve` then starts, shows the repair, and answers 404 (never a 500) for
 * the lost ids. The built CLI in child processes, a real server over a socket.
 */

import { readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import type { StatsResponse } from '../../src/protocol/wire.js';
import { requireBuiltCli, runCli, startServer, type ServerProcess } from '../server/process.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const tempDir = useTempDirs('repair');

const running: ServerProcess[] = [];
beforeAll(() => requireBuiltCli());

afterEach(async () => {
  await Promise.all(running.splice(0).map((server) => server.kill()));
});

function fingerprint(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (sub: string) => {
    for (const name of readdirSync(join(dir, sub))) {
      const path = join(dir, sub, name);
      if (statSync(path).isDirectory()) walk(join(sub, name));
      else if (name !== 'LOCK') out[join(sub, name)] = readFileSync(path).toString('base64');
    }
  };
  walk('.');
  return out;
}

/** 40 messages due in an hour, in segments of 1 KiB; m1 rescheduled and m2 cancelled later. */
async function populated() {
  const dir = tempDir();
  const queue = await DelayQueue.open({ dir, segmentBytes: 1024, fsync: 'never' });
  const hour = 3_600_000;
  for (let i = 0; i < 20; i++) {
    await queue.schedule({
      topic: 'jobs',
      id: `m${i}`,
      payload: { i, pad: 'p'.repeat(40) },
      delayMs: hour + i,
    });
  }
  await queue.reschedule('m1', { delayMs: 2 * hour });
  await queue.cancel('m2');
  for (let i = 20; i < 40; i++) {
    await queue.schedule({
      topic: 'jobs',
      id: `m${i}`,
      payload: { i, pad: 'p'.repeat(40) },
      delayMs: hour + i,
    });
  }
  await queue.close();
  return dir;
}

/** Ids of the schedule records in one segment file. */
function idsIn(file: string): string[] {
  const bytes = readFileSync(file);
  const ids: string[] = [];
  for (let at = 0; at < bytes.length; at += 10 + bytes.readUInt32LE(at + 2)) {
    if (bytes[at + 1] !== 1) continue;
    const body = at + 10;
    const idLength = bytes[body + 38];
    ids.push(bytes.toString('latin1', body + 40, body + 40 + idLength));
  }
  return ids;
}

describe('tickwheel repair', () => {
  it('serve refuses a directory whose oldest segment is gone; repair lists what it drops and drops it only with --yes; serve then answers 404 for those ids', async () => {
    const dir = await populated();
    const first = join(dir, 'log', '0000000001.seg');
    const lost = idsIn(first).filter((id) => id !== 'm2');
    expect(lost).toContain('m1');
    rmSync(first);
    const untouched = fingerprint(dir);

    // (startServer kills a server that starts and rejects with its output if it exits first.)
    const refused = (await startServer(['--dir', dir]).then(
      (server) => {
        running.push(server);
        throw new Error('the server started on a damaged directory');
      },
      (err: Error) => err.message,
    )) as string;
    expect(refused).toMatch(/^server exited \(1\)/);
    expect(refused).toContain('ERR_TICKWHEEL_CORRUPT');
    expect(refused).toMatch(/log segment 1 \(bytes 0 to \d+\) is missing/);
    expect(refused).toContain(`tickwheel repair --dir ${dir}`);
    expect(fingerprint(dir)).toEqual(untouched);

    const plan = await runCli(['repair', '--dir', dir]);
    expect(plan.code).toBe(2);
    expect(plan.stdout).toMatch(/log segment 1 .*missing/);
    expect(plan.stdout).toContain('m1 (topic jobs)');
    expect(plan.stdout).toContain(`${lost.length} messages cannot be recovered`);
    expect(plan.stderr).toMatch(/nothing was changed/);
    expect(fingerprint(dir)).toEqual(untouched);

    const json = await runCli(['repair', '--dir', dir, '--json']);
    expect(json.code).toBe(2);
    const report = JSON.parse(json.stdout) as { dropped: Array<{ id: string }>; unnamed: number };
    expect(report.dropped.length + report.unnamed).toBe(lost.length);

    const done = await runCli(['repair', '--dir', dir, '--yes']);
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toContain(`dropped ${lost.length} messages`);

    const server = await startServer(['--dir', dir]);
    running.push(server);
    // serve says so in its log (JSON lines on a pipe): a warning with the code and the count.
    await waitFor(() => {
      const lines = server.stdout().split('\n').slice(0, -1);
      const said = lines
        .map(
          (line) =>
            JSON.parse(line) as { level: number; code?: string; lost?: number; msg: string },
        )
        .find((line) => line.code === 'ERR_TICKWHEEL_CORRUPT' && line.lost !== undefined);
      expect(said).toMatchObject({ level: 40, lost: lost.length });
      expect(said?.msg).toMatch(new RegExp(`repaired .*dropped ${lost.length} messages`));
      return true;
    });
    for (const id of lost) {
      const get = await fetch(`${server.url}/v1/messages/${id}`);
      expect(get.status, id).toBe(404);
      const cancel = await fetch(`${server.url}/v1/messages/${id}`, { method: 'DELETE' });
      expect(cancel.status, id).toBe(404);
      const reschedule = await fetch(`${server.url}/v1/messages/${id}`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ delayMs: 1000 }),
      });
      expect(reschedule.status, id).toBe(404);
    }
    const kept = await fetch(`${server.url}/v1/messages/m30`);
    expect(kept.status).toBe(200);
    const stats = (await (await fetch(`${server.url}/v1/stats`)).json()) as StatsResponse;
    expect(stats.topics.jobs.scheduled).toBe(39 - lost.length);
  }, 60_000);

  it('on a healthy directory: nothing to repair, exit status 0', async () => {
    const dir = await populated();
    const untouched = fingerprint(dir);
    const plan = await runCli(['repair', '--dir', dir]);
    expect(plan.code).toBe(0);
    expect(plan.stdout).toMatch(/no damage found/);
    expect(fingerprint(dir)).toEqual(untouched);
  }, 30_000);

  it('--help names its flags and their variable', async () => {
    const help = await runCli(['repair', '--help']);
    expect(help.code).toBe(0);
    for (const word of ['Usage: tickwheel repair', '--dir', 'TICKWHEEL_DIR', '--yes', '--json']) {
      expect(help.stdout).toContain(word);
    }
  });

  it('refuses a directory that does not exist', async () => {
    const missing = join(tmpdir(), `tickwheel-none-${process.pid}-${Date.now()}`);
    const result = await runCli(['repair', '--dir', missing]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/no data directory/);
  });
});
