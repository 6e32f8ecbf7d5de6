import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { useTempDirs } from './support/temp-dir.js';

const tempDir = useTempDirs('bench-sustained-smoke');

// The sustained-delivery bench (bench/queue/sustained.mjs) made tiny: one step of one second at
// 1,000 deliveries a second, tickwheel embedded only, so that its code cannot rot. Checks the
// shape of the results and what holds on any machine (every message delivered once, none
// early, CPU counted); no timings, and whether the step held is not asserted.

const root = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);

interface Step {
  rate: number;
  seconds: number;
  scheduled: number;
  scheduledPerSecond: number;
  producerLagMaxMs: number;
  scheduleFailures: number;
  delivered: number;
  notDelivered: number;
  duplicates: number;
  deliveredPerSecond: number;
  lateness: {
    count: number;
    early: number;
    p50Ms: number;
    p99Ms: number;
    maxMs: number;
  };
  cpu: {
    processSeconds: number;
    serverSeconds: number | null;
    processUsPerMessage: number;
    serverUsPerMessage: number | null;
    totalUsPerMessage: number;
    messagesPerServerCpuSecond: number;
    processPercentOfCore: number;
    serverPercentOfCore: number | null;
  };
  wallMs: number;
  loadAverage: number[];
  held: boolean;
  reasons: string[];
}

interface SustainedResults {
  schema: string;
  meta: { date: string; node: string; machine: { cpus: number }; loadAverage: { end: number } };
  options: { peers: string[]; rates: number[]; seconds: number; boundMs: number; leadMs: number };
  peers: Record<
    string,
    {
      steps: Step[];
      highestHeldPerSecond: number | null;
      brokeAt: { rate: number; reasons: string[] } | null;
    }
  >;
  versusBullmq: Record<string, unknown>;
  targets: Array<{ name: string; wanted: string; measured: string; met: boolean }>;
}

describe('npm run bench:sustained, one tiny step', () => {
  let out: string;
  let stdout: string;
  let results: SustainedResults;

  beforeAll(async () => {
    out = tempDir();
    ({ stdout } = await run(
      process.execPath,
      [
        join(root, 'bench/queue/sustained.mjs'),
        '--rates',
        '1k',
        '--seconds',
        '1',
        '--warmup',
        '500',
        '--peers',
        'tickwheel',
        '--out',
        out,
        '--data-dir',
        out,
      ],
      { cwd: root, timeout: 240_000, maxBuffer: 16 * 1024 * 1024 },
    ));
    results = JSON.parse(readFileSync(join(out, 'sustained.json'), 'utf8')) as SustainedResults;
  }, 250_000);

  it('records the run and its options', () => {
    expect(results.schema).toBe('tickwheel-bench-sustained/1');
    expect(results.meta.node).toBe(process.versions.node);
    expect(results.meta.machine.cpus).toBeGreaterThan(0);
    expect(typeof results.meta.loadAverage.end).toBe('number');
    expect(results.options).toMatchObject({
      peers: ['tickwheel'],
      rates: [1000],
      seconds: 1,
      boundMs: 10,
      leadMs: 1000,
    });
    expect(Object.keys(results.peers)).toEqual(['tickwheel']);
  });

  it('delivers every message of the step once, none early', () => {
    const [step, ...more] = results.peers.tickwheel.steps;
    expect(more).toEqual([]);
    expect(step).toMatchObject({
      rate: 1000,
      seconds: 1,
      scheduled: 1000,
      scheduleFailures: 0,
      delivered: 1000,
      notDelivered: 0,
      duplicates: 0,
    });
    expect(step.scheduledPerSecond).toBeGreaterThan(0);
    expect(step.producerLagMaxMs).toBeGreaterThanOrEqual(0);
    expect(step.deliveredPerSecond).toBeGreaterThan(0);
    expect(step.lateness.count).toBe(1000);
    expect(step.lateness.early).toBe(0);
    expect(step.lateness.p50Ms).toBeGreaterThanOrEqual(0);
    expect(step.lateness.p99Ms).toBeGreaterThanOrEqual(step.lateness.p50Ms);
    expect(step.lateness.maxMs).toBeGreaterThanOrEqual(step.lateness.p99Ms);
    expect(step.wallMs).toBeGreaterThan(0);
    expect(step.loadAverage).toHaveLength(2);
  });

  it('counts the CPU of the step: embedded, the process is the server', () => {
    const { cpu } = results.peers.tickwheel.steps[0];
    expect(cpu.processSeconds).toBeGreaterThan(0);
    expect(cpu.processUsPerMessage).toBeGreaterThan(0);
    expect(cpu.processPercentOfCore).toBeGreaterThan(0);
    expect(cpu.serverSeconds).toBeNull();
    expect(cpu.serverUsPerMessage).toBeNull();
    expect(cpu.serverPercentOfCore).toBeNull();
    expect(cpu.totalUsPerMessage).toBe(cpu.processUsPerMessage);
    // Messages per CPU-second of the process, which holds the queue (processSeconds is rounded
    // to the millisecond in the JSON).
    const expected = 1000 / cpu.processSeconds;
    expect(Math.abs(cpu.messagesPerServerCpuSecond - expected)).toBeLessThan(expected * 0.02);
  });

  it('judges the step and derives the highest rate held from it', () => {
    const cell = results.peers.tickwheel;
    const [step] = cell.steps;
    expect(step.held).toBe(step.reasons.length === 0);
    expect(cell.highestHeldPerSecond).toBe(step.held ? 1000 : null);
    expect(cell.brokeAt).toEqual(step.held ? null : { rate: 1000, reasons: step.reasons });
    // No BullMQ in this run: nothing to compare with.
    expect(results.versusBullmq).toEqual({});
    expect(results.targets.map((target) => target.name)).toEqual([
      'embedded deliveries/s with p99 <= 10 ms',
    ]);
    expect(results.targets[0].met).toBe(false);
  });

  it('prints and writes the tables', () => {
    const markdown = readFileSync(join(out, 'sustained.md'), 'utf8');
    for (const text of [stdout, markdown]) {
      expect(text).toMatch(/## Highest rate held with p99 <= 10 ms/);
      expect(text).toMatch(/\| peer \| target\/s \| delivered\/s \| p50 \| p99 \| max \|/);
      expect(text).toMatch(/\| tickwheel embedded \| 1,000 \| [\d,]+ \| /);
    }
  });
});

describe('bench:sustained options', () => {
  type Parsed = { resultsBase: string; rates: number[]; peers: string[] };
  let parseOptions: (argv: string[]) => Parsed;

  beforeAll(async () => {
    // @ts-expect-error: a plain JavaScript module of the benches.
    ({ parseOptions } = await import('../bench/queue/sustained.mjs'));
  });

  it('steps through rising rates, every peer by default', () => {
    const options = parseOptions([]);
    expect(options.rates[0]).toBe(1000);
    expect(options.rates.every((rate, i) => i === 0 || rate > options.rates[i - 1])).toBe(true);
    expect(options.peers).toEqual(['tickwheel', 'tickwheel-http', 'bullmq']);
    expect(() => parseOptions(['--rates', '20k,10k'])).toThrow(/must rise/);
  });

  it('writes sustained.* for a full run, or where --out says; other runs sustained-custom.*', () => {
    expect(parseOptions([]).resultsBase).toBe('sustained');
    expect(parseOptions(['--keep-going', '--data-dir', '/tmp']).resultsBase).toBe('sustained');
    expect(parseOptions(['--rates', '10k,20k']).resultsBase).toBe('sustained-custom');
    expect(parseOptions(['--peers', 'tickwheel']).resultsBase).toBe('sustained-custom');
    expect(parseOptions(['--peers', 'tickwheel', '--out', '/tmp/x']).resultsBase).toBe('sustained');
  });
});
