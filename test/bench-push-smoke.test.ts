import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { useTempDirs } from './support/temp-dir.js';

const tempDir = useTempDirs('bench-push-smoke');

// The push benchmark in its --quick mode (300 messages a cell, one round) at two
// concurrencies: checks that every cell runs, that every message reaches its receiving end,
// and that the results have their documented shape. No timing is asserted.

const root = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);

const CONCURRENCIES = [1, 10];
const WHERES = ['embedded', 'served'];
const DELIVERIES = ['pull', 'push-bare', 'push-listener'];

interface Lateness {
  count: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

interface ThroughputRound {
  n: number;
  seconds: number;
  deliveriesPerSecond: number;
  cpuSeconds: { queue: number | null; end: number | null };
  arrivals: number;
  distinct: number;
  refused?: number;
  push?: { succeeded: number; failed: number };
}

interface ThroughputCell {
  where: string;
  delivery: string;
  concurrency: number;
  n: number;
  rounds: number;
  deliveriesPerSecond: number;
  deliveriesPerQueueCpuSecond: number | null;
  deliveriesPerCpuSecond: number | null;
  cpuSeconds: { queue: number | null; end: number | null };
  everyMessageArrived: boolean;
  duplicates: number;
  refused?: number;
  samples: ThroughputRound[];
}

interface PushResults {
  schema: string;
  meta: { date: string; node: string; machine: { cpus: number } };
  options: {
    n: number;
    rounds: number;
    quick: boolean;
    concurrencies: number[];
    latenessRates: number[];
  };
  throughput: ThroughputCell[];
  ratios: Array<{
    where: string;
    push: string;
    concurrency: number;
    deliveriesPerSecond: number | null;
    deliveriesPerQueueCpuSecond: number | null;
  }>;
  lateness: Array<{
    where: string;
    delivery: string;
    ratePerSecond: number;
    n: number;
    everyMessageArrived: boolean;
    lateness: Omit<Lateness, 'count'>;
    samples: Array<{ n: number; arrivals: number; distinct: number; lateness: Lateness }>;
  }>;
}

describe('npm run bench:push -- --quick', () => {
  let out: string;
  let results: PushResults;
  let stdout: string;

  beforeAll(async () => {
    out = tempDir();
    ({ stdout } = await run(
      process.execPath,
      [
        join(root, 'bench/push/run.mjs'),
        '--quick',
        '--concurrency',
        CONCURRENCIES.join(','),
        '--out',
        out,
        '--data-dir',
        out,
      ],
      { cwd: root, timeout: 240_000, maxBuffer: 16 * 1024 * 1024 },
    ));
    results = JSON.parse(readFileSync(join(out, 'push.json'), 'utf8')) as PushResults;
  }, 250_000);

  it('prints a line per cell and the tables', () => {
    expect(stdout).toMatch(/embedded push-listener c=10\s+round 1\/1\s+\d+\/s/);
    expect(stdout).toMatch(/lateness 400\/s served pull c=10/);
    expect(stdout).toMatch(/### Push \/ pull, same queue, same concurrency/);
  });

  it('records the run', () => {
    expect(results.schema).toBe('tickwheel-bench-push/1');
    expect(results.meta.node).toBe(process.versions.node);
    expect(results.meta.machine.cpus).toBeGreaterThan(0);
    expect(results.options).toMatchObject({
      quick: true,
      rounds: 1,
      concurrencies: CONCURRENCIES,
    });
  });

  it('runs every setup at every concurrency and delivers every message', () => {
    const cells = results.throughput;
    expect(cells.map((c) => `${c.concurrency} ${c.where} ${c.delivery}`)).toEqual(
      CONCURRENCIES.flatMap((c) => WHERES.flatMap((w) => DELIVERIES.map((d) => `${c} ${w} ${d}`))),
    );
    for (const cell of cells) {
      expect(cell.n).toBe(results.options.n);
      expect(cell.rounds).toBe(1);
      expect(cell.everyMessageArrived).toBe(true);
      expect(cell.deliveriesPerSecond).toBeGreaterThan(0);
      // The consumer of queue.consume is the queue process: no receiver of its own.
      const inProcess = cell.where === 'embedded' && cell.delivery === 'pull';
      expect(cell.cpuSeconds.end === null).toBe(inProcess);
      expect(cell.samples).toHaveLength(1);
      for (const round of cell.samples) {
        expect(round.distinct).toBe(cell.n);
        expect(round.arrivals).toBeGreaterThanOrEqual(cell.n);
        expect(round.seconds).toBeGreaterThan(0);
        expect(round.deliveriesPerSecond).toBe(cell.deliveriesPerSecond);
        if (cell.delivery.startsWith('push')) {
          // Every request the queue signed passed pushListener's check.
          expect(round.refused).toBe(0);
          expect(round.push?.succeeded).toBeGreaterThanOrEqual(cell.n);
        }
      }
    }
  });

  it('gives push / pull ratios of the same queue at the same concurrency', () => {
    expect(results.ratios).toHaveLength(CONCURRENCIES.length * WHERES.length * 2);
    for (const row of results.ratios) {
      expect(['push-bare', 'push-listener']).toContain(row.push);
      expect(row.deliveriesPerSecond).toBeGreaterThan(0);
    }
  });

  it('measures the lateness of push and pull, every message delivered', () => {
    expect(results.lateness.map((c) => `${c.where} ${c.delivery}`)).toEqual([
      'embedded pull',
      'embedded push-listener',
      'served pull',
      'served push-listener',
    ]);
    for (const cell of results.lateness) {
      expect(cell.ratePerSecond).toBe(results.options.latenessRates[0]);
      expect(cell.everyMessageArrived).toBe(true);
      for (const key of ['p50Ms', 'p99Ms', 'maxMs'] as const) {
        expect(cell.lateness[key]).toBe(cell.samples[0].lateness[key]);
      }
      for (const round of cell.samples) {
        expect(round.distinct).toBe(cell.n);
        expect(round.lateness.count).toBe(round.arrivals);
      }
    }
    expect(readFileSync(join(out, 'push.md'), 'utf8')).toMatch(/\| due\/s \| setup \|/);
  });
});
