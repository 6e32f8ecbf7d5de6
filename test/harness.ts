/**
 * Runs one of the project's harness scripts (scripts/chaos.mjs, scripts/idempotent-crash.mjs)
 * as CI runs it: a child process with a random seed, printed so that a failure can be replayed,
 * writing its JSON report to a temporary file. Not spawnSync: the test runner's worker must keep
 * answering while the harness runs.
 */

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface HarnessRun {
  status: number | null;
  output: string;
  seed: string;
  // The report's shape is the harness's own.
  summary: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export async function runHarness(script: string, args: string[]): Promise<HarnessRun> {
  const dir = mkdtempSync(join(tmpdir(), 'tickwheel-harness-'));
  const report = join(dir, 'report.json');
  const seed = String(Math.floor(Math.random() * 2 ** 31));
  try {
    const child = spawn(process.execPath, [script, ...args, '--seed', seed, '--report', report], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => (output += text));
    child.stderr.setEncoding('utf8').on('data', (text: string) => (output += text));
    const status = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    let summary: HarnessRun['summary'];
    try {
      summary = JSON.parse(readFileSync(report, 'utf8'));
    } catch {
      throw new Error(`the harness wrote no report (exit ${status}, seed ${seed}):\n${output}`);
    }
    // (Long lists, such as chaos's violationList, cut short.)
    const shown = JSON.stringify(summary);
    console.log(`${script.replace(/^.*\//, '')} seed ${seed}: ${shown.slice(0, 2_000)}`);
    return { status, output, seed, summary };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
