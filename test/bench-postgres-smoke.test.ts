import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../scripts/postgres.mjs';
// @ts-expect-error: a plain JavaScript module of the benches.
import { findPackage } from '../bench/postgres/deps.mjs';
import { useTempDirs } from './support/temp-dir.js';

const tempDir = useTempDirs('bench-postgres-smoke');

// The PostgreSQL peers' benchmark (bench/postgres/run.mjs) made tiny: every cell, soak included,
// against a throwaway PostgreSQL, so that its code cannot rot. tickwheel (this checkout's dist/,
// built by the bench project's global setup) always runs; pg-boss and Graphile Worker join where
// they are found as the bench finds them (the project's node_modules, or TICKWHEEL_BENCH_DEPS).
// Checks the shape of the results and what holds on any machine (every message delivered, none
// early, sizes and CPU counted); no timings.

const root = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);
const peersFound = ['pg', 'pg-boss', 'graphile-worker'].every(
  (name) => (findPackage(name) as { missing?: string }).missing === undefined,
);
const PEERS = peersFound ? ['tickwheel', 'pg-boss', 'graphile'] : ['tickwheel'];

interface Cpu {
  nodeMs: number;
  postgresMs: number | null;
  nodeMsPerMessage: number;
  postgresMsPerMessage: number | null;
}

interface Lateness {
  count: number;
  early: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

interface CellResult {
  error?: string;
  skipped?: string;
  errors: string[];
  cpu: Cpu;
  n?: number;
  warmup?: number;
  callers?: number;
  perSecond?: number;
  pendingAfter?: number;
  scheduled?: number;
  delivered?: number;
  drained?: boolean;
  mode?: string;
  settings?: Record<string, number>;
  lateness?: Lateness;
  bytesPerMessage?: { total: number; heap: number; indexes: number };
  nodeRssBytes?: { before: number; after: number };
  totalBytes?: { first: number; last: number; max: number };
  samples?: unknown[];
}

type Floor = { perSecond: number; postgresUsPerRow: number };

interface PostgresResults {
  schema: string;
  meta: { node: string; machine: { cpus: number }; peers: Record<string, { version: string }> };
  floors: Record<'selectOne' | 'insertOne' | 'insertBatch' | 'updateBatch' | 'deleteBatch', Floor>;
  cells: Record<string, Record<string, CellResult>>;
}

const SIZES = {
  single: 200,
  concurrent: 2000,
  callers: 8,
  batched: 5000,
  rate: 100,
  latenessSeconds: 3,
  burst: 1000,
  pending: 1000,
  soakRate: 50,
};

describe.runIf(postgresInstalled())('npm run bench:postgres, tiny', () => {
  let out: string;
  let stdout: string;
  let results: PostgresResults;

  beforeAll(async () => {
    out = tempDir();
    ({ stdout } = await run(
      process.execPath,
      [
        join(root, 'bench/postgres/run.mjs'),
        ...['--peers', PEERS.join(',')],
        ...['--single', String(SIZES.single), '--batched', String(SIZES.batched)],
        ...['--concurrent', String(SIZES.concurrent), '--callers', String(SIZES.callers)],
        ...['--batch', '100', '--warmup', '150', '--rate', String(SIZES.rate)],
        ...['--lateness-seconds', String(SIZES.latenessSeconds), '--drain-seconds', '10'],
        ...['--burst', String(SIZES.burst), '--burst-lead', '1500'],
        ...['--pending', String(SIZES.pending)],
        ...['--soak-minutes', '0.05', '--soak-rate', String(SIZES.soakRate), '--soak-sample', '1'],
        ...['--out', out],
      ],
      { cwd: root, timeout: 290_000, maxBuffer: 16 * 1024 * 1024 },
    ));
    results = JSON.parse(readFileSync(join(out, 'postgres-peers.json'), 'utf8')) as PostgresResults;
  }, 300_000);

  const cell = (key: string, peer: string) => {
    const result = results.cells[key][peer];
    expect(result.error, `${key} ${peer}`).toBeUndefined();
    expect(result.skipped, `${key} ${peer}`).toBeUndefined();
    expect(result.errors).toEqual([]);
    return result;
  };

  const expectCpu = (cpu: Cpu) => {
    expect(cpu.nodeMs).toBeGreaterThan(0);
    // PostgreSQL's CPU is read from /proc: Linux only.
    if (process.platform === 'linux') expect(cpu.postgresMsPerMessage).toBeGreaterThan(0);
  };

  const expectAllOnTime = (result: CellResult, n: number) => {
    expect(result.delivered).toBe(n);
    expect(result.drained).toBe(true);
    expect(result.lateness?.count).toBe(n);
    expect(result.lateness?.early).toBe(0);
    expect(result.lateness?.p50Ms).toBeGreaterThanOrEqual(0);
    expect(result.lateness?.p99Ms).toBeGreaterThanOrEqual(result.lateness?.p50Ms ?? 0);
    expect(result.lateness?.maxMs).toBeGreaterThanOrEqual(result.lateness?.p99Ms ?? 0);
  };

  it('records the run, every peer and every cell', () => {
    expect(results.schema).toBe('tickwheel-bench-postgres-peers/1');
    expect(results.meta.node).toBe(process.versions.node);
    expect(Object.keys(results.meta.peers)).toEqual(PEERS);
    expect(Object.keys(results.cells)).toEqual([
      'schedule-single',
      'schedule-concurrent',
      'schedule-batched',
      'lateness (low-latency)',
      'lateness (default)',
      'burst',
      'pending',
      'soak',
    ]);
  });

  it('measures what the PostgreSQL does at best, once, and sets the targets beside it', () => {
    const { selectOne, insertOne, insertBatch, updateBatch, deleteBatch } = results.floors;
    for (const floor of [selectOne, insertOne, insertBatch, updateBatch, deleteBatch]) {
      expect(floor.perSecond).toBeGreaterThan(0);
      if (process.platform === 'linux') expect(floor.postgresUsPerRow).toBeGreaterThan(0);
    }
    // A statement of 1,000 rows does more rows a second than one awaited call a row.
    expect(insertBatch.perSecond).toBeGreaterThan(insertOne.perSecond);
    expect(stdout).toContain('## What this PostgreSQL does at best');
  });

  it('schedules every message, one at a time, from many callers at once and in batches', () => {
    for (const peer of PEERS) {
      expect(cell('schedule-concurrent', peer).callers).toBe(SIZES.callers);
      for (const [key, n] of [
        ['schedule-single', SIZES.single],
        ['schedule-concurrent', SIZES.concurrent],
        ['schedule-batched', SIZES.batched],
      ] as const) {
        const result = cell(key, peer);
        expect(result.n).toBe(n);
        expect(result.warmup).toBe(150);
        expect(result.pendingAfter).toBe(n);
        expect(result.perSecond).toBeGreaterThan(0);
        expectCpu(result.cpu);
      }
    }
  });

  it('delivers every message of the steady rate, none early, in both polling settings', () => {
    for (const peer of PEERS) {
      for (const mode of ['low-latency', 'default']) {
        const result = cell(`lateness (${mode})`, peer);
        expect(result.mode).toBe(mode);
        expect(result.scheduled).toBe(SIZES.rate * SIZES.latenessSeconds);
        expectAllOnTime(result, SIZES.rate * SIZES.latenessSeconds);
        expectCpu(result.cpu);
      }
    }
  });

  it('drains the burst, none early', () => {
    for (const peer of PEERS) {
      const result = cell('burst', peer);
      expectAllOnTime(result, SIZES.burst);
      expectCpu(result.cpu);
    }
  });

  it('counts the bytes of pending messages on disk and the RSS of the node', () => {
    for (const peer of PEERS) {
      const result = cell('pending', peer);
      expect(result.pendingAfter).toBe(SIZES.pending);
      // A row of a delayed job and its index entries: tens to thousands of bytes.
      expect(result.bytesPerMessage?.total).toBeGreaterThan(20);
      expect(result.bytesPerMessage?.total).toBeLessThan(10_000);
      expect(result.nodeRssBytes?.after).toBeGreaterThan(0);
      expectCpu(result.cpu);
    }
  });

  it('samples the tables through the soak and delivers what it scheduled', () => {
    for (const peer of PEERS) {
      const result = cell('soak', peer);
      expectAllOnTime(result, result.scheduled ?? -1);
      expect(result.scheduled).toBe(SIZES.soakRate * 3);
      expect(result.samples?.length).toBeGreaterThanOrEqual(3);
      expect(result.totalBytes?.max).toBeGreaterThanOrEqual(result.totalBytes?.last ?? 0);
      expect(result.totalBytes?.first).toBeGreaterThan(0);
    }
  });

  it('prints and writes the report, with tickwheel against the targets', () => {
    const markdown = readFileSync(join(out, 'postgres-peers.md'), 'utf8');
    for (const text of [stdout, markdown]) {
      expect(text).toMatch(/# PostgreSQL peers: tickwheel, pg-boss and Graphile Worker/);
      expect(text).toMatch(
        /\| tickwheel \| low-latency: concurrency 10, prefetch 500, partitions 64 \|/,
      );
      expect(text).toMatch(/## tickwheel against the issue's targets/);
      expect(text).toMatch(
        /\| pending: ≤ 150 B on disk a message \| [\d.,]+ B \| (met|\*\*missed\*\*) \|/,
      );
      if (!peersFound) continue;
      expect(text).toMatch(/\| schedule-batched: ≥ 10× pg-boss's msgs\/s \|/);
      expect(text).toMatch(
        /\| pg-boss \| low-latency: batchSize 5000, pollingIntervalSeconds 0.5 \|/,
      );
      expect(text).toMatch(
        /\| Graphile Worker \| default: concurrency 10, maxPoolSize 12, localQueueSize 500, completeJobBatchDelay 250 \|/,
      );
    }
  });
});

describe('bench:postgres options', () => {
  type Parsed = { cells: string[]; peers: string[]; cellOptions: Record<string, unknown> };
  let parseOptions: (argv: string[]) => Parsed;

  beforeAll(async () => {
    // @ts-expect-error: a plain JavaScript module of the benches.
    ({ parseOptions } = await import('../bench/postgres/run.mjs'));
  });

  it('runs every cell but the soak by default, on every peer, at the issue’s sizes', () => {
    const options = parseOptions([]);
    expect(options.cells).toEqual([
      'floors',
      'schedule-single',
      'schedule-concurrent',
      'schedule-batched',
      'lateness',
      'burst',
      'pending',
    ]);
    expect(options.peers).toEqual(['tickwheel', 'pg-boss', 'graphile']);
    expect(options.cellOptions).toMatchObject({
      warmup: 2000,
      single: 2000,
      concurrent: 20_000,
      callers: 64,
      batched: 100_000,
      batch: 1000,
      rate: 1000,
      latenessSeconds: 30,
      burst: 100_000,
      pending: 1_000_000,
      soakMinutes: 0,
      tickwheelConcurrency: 10,
      graphileLocalQueue: 500,
      graphileCompleteBatchMs: 250,
    });
    expect(
      parseOptions(['--graphile-local-queue', 'off', '--graphile-complete-batch', 'off'])
        .cellOptions,
    ).toMatchObject({ graphileLocalQueue: 0, graphileCompleteBatchMs: -1 });
    expect(parseOptions(['--warmup', '0']).cellOptions.warmup).toBe(0);
    expect(parseOptions(['--soak-minutes', '30']).cells).toContain('soak');
    expect(() => parseOptions(['--only', 'soak'])).toThrow(/--soak-minutes/);
    expect(() => parseOptions(['--peers', 'bullmq'])).toThrow(/unknown bullmq/);
  });
});

describe("bench:postgres, tickwheel against the issue's targets", () => {
  let targetsSection: (results: unknown) => string | undefined;

  beforeAll(async () => {
    // @ts-expect-error: a plain JavaScript module of the benches.
    ({ targetsSection } = await import('../bench/postgres/targets.mjs'));
  });

  const verdictOf = (text: string, target: string) =>
    text
      .split('\n')
      .find((line) => line.startsWith(`| ${target}`))
      ?.split('|')
      .at(-2)
      ?.trim();

  it('says which targets are met and which are missed', () => {
    const text = targetsSection({
      options: { peers: ['tickwheel', 'pg-boss', 'graphile'], rate: 1000, burst: 100_000 },
      cells: {
        'schedule-concurrent': {
          tickwheel: { perSecond: 40_000 },
          'pg-boss': { perSecond: 3_500 },
          graphile: { perSecond: 14_000 },
        },
        'schedule-batched': {
          tickwheel: { perSecond: 150_000 },
          'pg-boss': { perSecond: 14_000 },
          graphile: { perSecond: 60_000 },
        },
        'lateness (low-latency)': {
          tickwheel: { drained: true, lateness: { p99Ms: 25 } },
          'pg-boss': { skipped: 'skipped: not installed' },
          graphile: { error: 'it failed' },
        },
        burst: { tickwheel: { drained: false, lateness: { p99Ms: 10 } } },
        pending: { tickwheel: { bytesPerMessage: { total: 140 } } },
        soak: {
          tickwheel: {
            drained: true,
            samples: [100, 200, 210, 500].map((totalBytes) => ({ totalBytes })),
          },
        },
      },
    });
    expect(text).toBeDefined();
    const section = text ?? '';
    expect(verdictOf(section, "schedule-concurrent: ≥ 10× pg-boss's")).toBe('met');
    expect(verdictOf(section, "schedule-concurrent: ≥ 3× Graphile Worker's")).toBe('**missed**');
    expect(verdictOf(section, "schedule-batched: ≥ 10× pg-boss's")).toBe('met');
    expect(verdictOf(section, "schedule-batched: ≥ 3× Graphile Worker's")).toBe('**missed**');
    expect(verdictOf(section, 'lateness p99 ≤ 20 ms')).toBe('**missed**');
    expect(verdictOf(section, 'burst of 100,000')).toBe('**missed**');
    expect(verdictOf(section, 'pending: ≤ 150 B')).toBe('met');
    expect(verdictOf(section, 'soak: flat')).toBe('**missed**');
    expect(section).toMatch(/\| schedule-batched msgs\/s \| 150,000 \| 14,000 \| 10\.71× \|/);
  });

  it('has nothing to say when tickwheel ran no cell', () => {
    expect(
      targetsSection({
        options: { peers: ['pg-boss'], rate: 1000, burst: 100_000 },
        cells: { 'schedule-batched': { 'pg-boss': { perSecond: 14_000 } } },
      }),
    ).toBeUndefined();
  });
});
