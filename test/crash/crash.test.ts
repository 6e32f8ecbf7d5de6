/**
 * The crash harness, short: a worker process schedules, cancels and acks at full speed on one
 * data directory and is SIGKILLed at random moments, cycle after cycle; then everything is
 * consumed and checked (see scripts/crash.mjs). `npm run crash -- --cycles 1000` runs a long one.
 *
 * Runs against the built package (dist/), which `npm test` builds first (pretest).
 * TICKWHEEL_CRASH_CYCLES and TICKWHEEL_CRASH_SEED override the cycle count and the seed.
 */

import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const entry = join(root, 'dist', 'delay-queue.js');
const runner = join(root, 'scripts', 'crash.mjs');

interface Report {
  ok: boolean;
  seed: number;
  cycles: number;
  kills: number;
  schedulesAcked: number;
  cancelsAcked: number;
  acksAcked: number;
  deliveries: number;
  finalDeliveries: number;
  duplicates: number;
  requiredAtEnd: number;
  drained: boolean;
  snapshotRecoveries: number;
  violationCount: number;
  violations: Array<{ cycle: number; kind: string; id?: string; detail: string }>;
}

const scratch = mkdtempSync(join(tmpdir(), 'tickwheel-crash-test-'));
let passed = false;
afterAll(() => {
  // Kept after a failure: the data directory to inspect (its path is in the report).
  if (passed) rmSync(scratch, { recursive: true, force: true });
});

describe('crash harness (SIGKILL at random points)', () => {
  it('loses nothing acknowledged, delivers nothing early or after its cancel', async () => {
    if (!existsSync(entry)) {
      throw new Error(
        `${entry} is missing: the crash harness runs the built package; run \`npm run build\``,
      );
    }
    const cycles = process.env.TICKWHEEL_CRASH_CYCLES ?? '25';
    const seed = process.env.TICKWHEEL_CRASH_SEED ?? String(Math.floor(Math.random() * 2 ** 32));
    const reportFile = join(scratch, 'report.json');
    const dir = join(scratch, 'run');
    const run = await new Promise<{ code: number | null; output: string }>((done) => {
      execFile(
        process.execPath,
        [
          runner,
          '--cycles',
          cycles,
          '--seed',
          seed,
          '--dir',
          dir,
          '--quiet',
          '--report',
          reportFile,
        ],
        { cwd: root, maxBuffer: 16 * 1024 * 1024, timeout: 170_000 },
        (error, stdout, stderr) =>
          done({
            code: error === null ? 0 : typeof error.code === 'number' ? error.code : null,
            output: `${stdout}\n${stderr}`,
          }),
      );
    });
    expect(existsSync(reportFile), `no report; harness output:\n${run.output}`).toBe(true);
    const report = JSON.parse(readFileSync(reportFile, 'utf8')) as Report;
    const summary = `seed ${seed} (rerun: node scripts/crash.mjs --cycles ${cycles} --seed ${seed})\n${run.output}`;
    expect(report.violations, summary).toEqual([]);
    expect(report.violationCount, summary).toBe(0);
    expect(run.code, summary).toBe(0);
    expect(report.ok).toBe(true);
    // It did real work, and really killed.
    expect(report.cycles).toBe(Number(cycles));
    expect(report.kills, summary).toBeGreaterThan(0);
    expect(report.schedulesAcked, summary).toBeGreaterThan(0);
    expect(report.acksAcked, summary).toBeGreaterThan(0);
    expect(report.cancelsAcked, summary).toBeGreaterThan(0);
    expect(report.deliveries, summary).toBeGreaterThan(0);
    expect(report.drained, summary).toBe(true);
    // Workers write snapshots (most pick a small snapshotBytes), so some recoveries use one.
    expect(report.snapshotRecoveries, summary).toBeGreaterThan(0);
    passed = true;
  }, 180_000);
});
