/**
 * PostgreSQL out of disk answers `SELECT 1` and refuses every write (SQLSTATE 53100): the
 * queue's problem() (what /healthz and /readyz say) names the shortage while it lasts, rather
 * than "ok". The queue's tables on a tablespace of a small tmpfs, filled for real; skipped where
 * the test may not mount one.
 */

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled, startPostgres } from '../../scripts/postgres.mjs';

const cleanups: Array<() => unknown> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

describe.runIf(postgresInstalled())('a queue on PostgreSQL whose disk is full', () => {
  it('says so in problem() while writes are refused', async (context) => {
    const dir = mkdtempSync(join(tmpdir(), 'tickwheel-pgfull-'));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=6m', 'tmpfs', dir], { stdio: 'ignore' });
    } catch {
      context.skip(); // mounting needs privileges this machine does not give the test
    }
    cleanups.push(() => execFileSync('umount', ['-l', dir]));
    if (process.getuid?.() === 0) {
      const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }));
      const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }));
      chownSync(dir, uid, gid);
    }
    const server = (await startPostgres()) as { url: string; stop(): Promise<void> };
    cleanups.push(() => server.stop());
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    cleanups.push(() => admin.end());
    await admin.query(`CREATE TABLESPACE small LOCATION '${dir}'`);
    await admin.query('ALTER DATABASE postgres SET default_tablespace = small');

    const queue = await DelayQueue.open({
      postgres: server.url,
      queue: 'full',
      partitions: 1,
      onError: () => undefined,
    });
    cleanups.push(() => queue.close());
    expect(await queue.problem()).toBeUndefined();
    let refused: (Error & { code?: string }) | undefined;
    for (let i = 0; i < 200 && refused === undefined; i++) {
      await queue
        // Random bytes: TOAST would compress a repeated text to nothing.
        .schedule({ topic: 't', payload: randomBytes(200_000), delayMs: 3_600_000 })
        .catch((err: Error) => (refused = err));
    }
    expect(refused?.code).toBe('ERR_TICKWHEEL_UNAVAILABLE');
    expect(refused?.message).toContain('SQLSTATE 53100');
    expect(await queue.problem()).toMatch(/lacked the resources .*SQLSTATE 53100/);
  }, 120_000);
});
