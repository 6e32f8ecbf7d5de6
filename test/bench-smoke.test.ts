import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { useTempDirs } from './support/temp-dir.js';

const tempDir = useTempDirs('bench');

/**
 * The timer benchmark with tiny N on the JavaScript peers, so its code cannot rot. Only the
 * shape of the results and values that must hold on any machine are checked: no timings.
 */
const root = fileURLToPath(new URL('..', import.meta.url));
const out = tempDir();

const JS_PEERS = [
  'node',
  'heap',
  'timer-wheel',
  'tickwheel-closure',
  'tickwheel-lean',
  'tickwheel-hashed',
  'tickwheel-kafka',
];
const TICKWHEEL = JS_PEERS.filter((peer) => peer.startsWith('tickwheel-'));
const WORKLOADS = [
  'schedule-cancel-random',
  'schedule-cancel-fixed',
  'churn',
  'expiry-storm',
  'memory',
  'steady-state',
];
const N = 2_000;

interface Report {
  schema: string;
  environment: { node: string; cores: number };
  options: { n: number };
  peers: Array<{ id: string; status: string }>;
  workloads: Array<{ id: string; metrics: Array<{ id: string }> }>;
  results: Record<string, Record<string, Record<string, unknown>>>;
  metrics: Record<string, { values: Record<string, number> }>;
  ratios: Record<string, Record<string, Record<string, number>>>;
  targets: Array<{ id: string; met: boolean | null }>;
}

async function runBench(): Promise<{ stdout: string; report: Report }> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      '--expose-gc',
      join(root, 'bench', 'timers.mjs'),
      `--n=${N}`,
      '--rounds=1',
      '--warmup=0',
      '--storm-window=50',
      '--steady-rate=2000',
      '--steady-seconds=0.3',
      '--steady-warmup=0.2',
      `--peers=${JS_PEERS.join(',')}`,
      `--out=${out}`,
    ],
    { cwd: root, timeout: 170_000, maxBuffer: 16 * 1024 * 1024 },
  );
  return { stdout, report: JSON.parse(readFileSync(join(out, 'timers.json'), 'utf8')) };
}

const positive = (value: unknown) => typeof value === 'number' && value > 0;

describe('npm run bench:timers (smoke, tiny N, JavaScript peers only)', () => {
  let run: Promise<{ stdout: string; report: Report }> | undefined;
  const bench = () => (run ??= runBench());

  it('prints the tables and the targets', { timeout: 180_000 }, async () => {
    const { stdout } = await bench();
    expect(stdout).toContain('== schedule, random delays (ns/op) ==');
    expect(stdout).toContain('== expiry storm:');
    expect(stdout).toContain('== targets ==');
  });

  it('writes every workload for every peer', { timeout: 180_000 }, async () => {
    const { report } = await bench();
    expect(report.schema).toBe('tickwheel-bench-timers/1');
    expect(report.options.n).toBe(N);
    expect(report.environment.cores).toBeGreaterThan(0);
    expect(report.peers.map((peer) => peer.id)).toEqual(JS_PEERS);
    expect(report.workloads.map((workload) => workload.id)).toEqual(WORKLOADS);
    for (const workload of WORKLOADS) {
      for (const peer of JS_PEERS) {
        expect(report.results[workload][peer], `${workload} on ${peer}`).not.toHaveProperty(
          'error',
        );
      }
    }
  });

  it('reports sane numbers for the operation workloads', { timeout: 180_000 }, async () => {
    const { report } = await bench();
    for (const peer of JS_PEERS) {
      for (const workload of ['schedule-cancel-random', 'schedule-cancel-fixed']) {
        const result = report.results[workload][peer];
        expect(positive(result.scheduleNs), `${workload} ${peer}`).toBe(true);
        expect(positive(result.cancelNs), `${workload} ${peer}`).toBe(true);
      }
      expect(positive(report.results.churn[peer].opNs)).toBe(true);
      const bytes = report.results.memory[peer].bytesPerTimer as number;
      // Whatever else it costs, a pending timer takes some bytes and not megabytes.
      expect(bytes).toBeGreaterThan(0);
      expect(bytes).toBeLessThan(100_000);
    }
  });

  it('fires every storm timer of tickwheel, none early', { timeout: 180_000 }, async () => {
    const { report } = await bench();
    for (const peer of TICKWHEEL) {
      const storm = report.results['expiry-storm'][peer] as {
        lateness: { fired: number; complete: boolean; early: number; p99Ms: number };
        drain: { fired: number; complete: boolean; perSecond: number };
      };
      expect(storm.lateness, peer).toMatchObject({ fired: N, complete: true, early: 0 });
      expect(storm.lateness.p99Ms).toBeGreaterThanOrEqual(0);
      expect(storm.drain, peer).toMatchObject({ fired: N, complete: true });
      expect(positive(storm.drain.perSecond)).toBe(true);
      const steady = report.results['steady-state'][peer] as { fired: number; early: number };
      expect(steady.fired, peer).toBeGreaterThan(0);
      expect(steady.early, peer).toBe(0);
    }
  });

  it(
    'gives ratios of 1 on the diagonal and reciprocals across it',
    { timeout: 180_000 },
    async () => {
      const { report } = await bench();
      for (const workload of report.workloads) {
        for (const { id } of workload.metrics) {
          const ratios = report.ratios[id];
          for (const row of Object.keys(report.metrics[id].values)) {
            expect(ratios[row][row]).toBeCloseTo(1, 12);
            for (const column of Object.keys(ratios[row])) {
              expect(ratios[row][column] * ratios[column][row]).toBeCloseTo(1, 9);
            }
          }
        }
      }
      expect(report.targets.length).toBeGreaterThan(0);
      // Netty did not run, so the targets against it are "not measured", never failed.
      for (const target of report.targets.filter((t) => t.id.includes('netty'))) {
        expect(target.met).toBeNull();
      }
    },
  );

  it('draws the charts', { timeout: 180_000 }, async () => {
    await bench();
    for (const name of ['timers-ops.svg', 'timers-real-clock.svg', 'timers-memory.svg']) {
      const svg = readFileSync(join(out, name), 'utf8');
      expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"'), name).toBe(true);
      expect(svg.trimEnd().endsWith('</svg>'), name).toBe(true);
      expect(svg).toContain('TimerWheel.schedule');
    }
  });
});
