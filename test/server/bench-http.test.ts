import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { requireBuiltCli } from './process.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('bench-http');

/**
 * npm run bench:http with --quick, so its code cannot rot. Only the shape of the report is
 * checked, never the numbers: they depend on the machine.
 */
const root = fileURLToPath(new URL('../..', import.meta.url));
const out = tempDir();
beforeAll(() => requireBuiltCli());

describe('bench/http', () => {
  it('runs every phase and writes its report', async () => {
    const file = join(out, 'http.json');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['bench/http/run.mjs', '--quick', '--out', file],
      { cwd: root, timeout: 60_000 },
    );
    expect(stdout).toContain('schedule-batch');
    const report = JSON.parse(readFileSync(file, 'utf8'));
    expect(report.schema).toBe('tickwheel-bench-http/1');
    for (const phase of [
      'schedule-single-c1',
      'schedule-single',
      'schedule-single-http',
      'schedule-batch',
      'receive-ack',
    ]) {
      expect(report.results[phase].messagesPerSecond, phase).toBeGreaterThan(0);
      expect(report.results[phase].latencyMs.p99, phase).toBeGreaterThan(0);
    }
    expect(report.results['receive-ack'].messages).toBe(report.options.ackMessages);
    expect(report.targets[0]).toMatchObject({ id: 'schedule-batch-throughput', target: 50_000 });
  });
});
