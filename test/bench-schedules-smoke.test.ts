import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { useTempDirs } from './support/temp-dir.js';

const tempDir = useTempDirs('bench-schedules-smoke');

// The schedules benchmark in its --quick mode (200 schedules, 2 s idle windows, firing every
// second) on tickwheel alone (CI may have no redis-server), so its code cannot rot. Only the
// shape of the results and values that hold on any machine are checked: no timings.

const root = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);

interface Memory {
  rss: number;
  heapUsed: number;
  arrayBuffers: number;
}

interface Idle {
  seconds: number;
  processCpuMs: number;
  serverCpuMs: number;
  cpuMsPerMinute: { process: number; server: number; total: number };
  delivered: number;
}

interface SchedulesResults {
  meta: { date: string; node: string; commit: string | null; machine: { cpus: number } };
  options: { quick: boolean; n: number; peers: string[]; periods: number; fireCron: string };
  mix: { counts: Record<string, number>; timeZones: string[] };
  cells: {
    tickwheel: {
      armed: {
        memory: { beforeOpen: Memory; none: Memory; armed: Memory };
        server: { none: null; armed: null };
        idle: { none: Idle; armed: Idle };
        created: { n: number; ms: number; processCpuMs: number; serverCpuMs: number };
        disk: { bytes: number; schedulesLogBytes: number };
        delivered: number;
      };
      reopen: { open: { ms: number; cpuMs: number }; count: number; memory: { open: Memory } };
      firing: {
        created: { n: number };
        window: {
          periods: number;
          expected: number;
          delivered: number;
          cpuMsPerMinute: { total: number };
          cpuUsPerOccurrence: { total: number };
        };
        lateness: { count: number; p50Ms: number; p99Ms: number; maxMs: number };
        deliveredTotal: number;
      };
    };
    bullmq: { skipped: string };
  };
  figures: {
    tickwheel: { figures: Record<string, number | null> };
    bullmq: { skipped: string };
  };
}

describe('npm run bench:schedules -- --quick (tickwheel only)', () => {
  let out: string;
  let results: SchedulesResults;
  let stdout: string;

  beforeAll(async () => {
    out = tempDir();
    ({ stdout } = await run(
      process.execPath,
      [
        '--expose-gc',
        join(root, 'bench/schedules/run.mjs'),
        '--quick',
        '--peers',
        'tickwheel',
        '--out',
        out,
        '--data-dir',
        out,
      ],
      { cwd: root, timeout: 240_000, maxBuffer: 16 * 1024 * 1024 },
    ));
    results = JSON.parse(readFileSync(join(out, 'schedules.json'), 'utf8')) as SchedulesResults;
  }, 250_000);

  it('prints progress and a table with a BullMQ column', () => {
    expect(stdout).toMatch(/armed tickwheel: start/);
    expect(stdout).toMatch(/metric\s+tickwheel\s+BullMQ/);
    expect(readFileSync(join(out, 'schedules.md'), 'utf8')).toMatch(/\| metric \| tickwheel \|/);
  });

  it('records the run and the mix of schedules', () => {
    expect(results.meta.node).toBe(process.versions.node);
    expect(results.meta.machine.cpus).toBeGreaterThan(0);
    expect(results.options).toMatchObject({ quick: true, n: 200, peers: ['tickwheel'] });
    const counts = Object.values(results.mix.counts);
    expect(counts).toHaveLength(10);
    expect(counts.reduce((sum, count) => sum + count, 0)).toBe(results.options.n);
    expect(results.mix.timeZones.length).toBeGreaterThan(1);
  });

  it('says BullMQ was not run rather than giving it numbers', () => {
    expect(results.cells.bullmq.skipped).toEqual(expect.any(String));
    expect(results.figures.bullmq.skipped).toEqual(expect.any(String));
  });

  it('creates the schedules, measures memory and idle CPU, and nothing fires while idle', () => {
    const { armed } = results.cells.tickwheel;
    expect(armed.created.n).toBe(results.options.n);
    expect(armed.created.ms).toBeGreaterThan(0);
    expect(armed.created.serverCpuMs).toBe(0);
    for (const memory of Object.values(armed.memory)) {
      expect(memory.rss).toBeGreaterThan(0);
      expect(memory.heapUsed).toBeGreaterThan(0);
    }
    expect(armed.server).toEqual({ none: null, armed: null });
    for (const idle of [armed.idle.none, armed.idle.armed]) {
      expect(idle.seconds).toBeGreaterThan(0);
      expect(idle.processCpuMs).toBeGreaterThanOrEqual(0);
      expect(idle.serverCpuMs).toBe(0);
      expect(idle.delivered).toBe(0);
    }
    expect(armed.delivered).toBe(0);
    expect(armed.disk.schedulesLogBytes).toBeGreaterThan(0);
    expect(armed.disk.bytes).toBeGreaterThanOrEqual(armed.disk.schedulesLogBytes);
  });

  it('reopens every schedule in a fresh process', () => {
    const { reopen } = results.cells.tickwheel;
    expect(reopen.count).toBe(results.options.n);
    expect(reopen.open.ms).toBeGreaterThan(0);
    expect(reopen.memory.open.rss).toBeGreaterThan(0);
  });

  it('fires, delivers and acks occurrences and reports CPU per occurrence', () => {
    const { firing } = results.cells.tickwheel;
    expect(results.options.fireCron).toBe('* * * * * *');
    expect(firing.created.n).toBe(results.options.n);
    expect(firing.window.periods).toBe(results.options.periods);
    expect(firing.window.expected).toBe(results.options.n * results.options.periods);
    expect(firing.window.delivered).toBeGreaterThan(0);
    expect(firing.lateness.count).toBe(firing.window.delivered);
    expect(firing.deliveredTotal).toBeGreaterThanOrEqual(firing.window.delivered);
    expect(firing.window.cpuMsPerMinute.total).toBeGreaterThan(0);
    expect(firing.window.cpuUsPerOccurrence.total).toBeGreaterThan(0);
  });

  it('derives every headline figure', () => {
    const { figures } = results.figures.tickwheel;
    for (const key of [
      'rssPerSchedule',
      'heapPerSchedule',
      'reopenRssPerSchedule',
      'reopenHeapPerSchedule',
      'idleNone',
      'idleArmed',
      'createMs',
      'createCpuUsPerSchedule',
      'openMs',
      'openCpuMs',
      'firingCpuPerMinute',
      'firingCpuUsPerOccurrence',
      'firingP99Ms',
    ]) {
      expect(typeof figures[key], key).toBe('number');
    }
  });
});
