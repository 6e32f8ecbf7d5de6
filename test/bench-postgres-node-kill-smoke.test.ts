import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../scripts/postgres.mjs';
import { useTempDirs } from './support/temp-dir.js';

const tempDir = useTempDirs('bench-postgres-node-kill-smoke');

// The node-kill measure of a queue on PostgreSQL (bench/postgres/node-kill.mjs) made short, so
// that its code cannot rot: three nodes, one of them SIGKILLed under load. Checks what holds on
// any machine (everything due after the kill delivered, none early); no timings.

const root = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);

describe.runIf(postgresInstalled())('bench/postgres/node-kill.mjs', () => {
  it('kills a node under load and reports the lateness of what fell due after', async () => {
    const out = tempDir();
    const args = ['bench/postgres/node-kill.mjs', '--rate', '50', '--settle', '2'];
    await run(process.execPath, [...args, '--after', '3', '--out', out], {
      cwd: root,
      timeout: 120_000,
    });
    const report = JSON.parse(readFileSync(join(out, 'postgres-node-kill.json'), 'utf8'));
    expect(report.runs).toHaveLength(1);
    expect(report.notDeliveredIn15s).toBe(0);
    expect(report.worstMaxMs).toBe(report.runs[0].latenessDueWithin5sOfKill.maxMs);
    const result = report.runs[0];
    expect(result.scheduleFailures).toBe(0);
    expect(result.notDeliveredIn15s).toBe(0);
    expect(result.dueAfterKill).toBeGreaterThan(100);
    expect(result.latenessDueAfterKill.count).toBe(result.dueAfterKill);
    expect(result.latenessDueAfterKill.early).toBe(0);
    expect(result.latenessDueWithin5sOfKill.maxMs).toBeGreaterThanOrEqual(0);
  }, 150_000);
});
