import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { useTempDirs } from './support/temp-dir.js';

const tempDir = useTempDirs('bench-smoke');

// The runner in its --quick mode on tickwheel alone (CI may have no redis-server): checks that
// every workload runs and the results have their documented shape. No timing is asserted.

const root = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);

interface Lateness {
  count: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

interface MemorySample {
  rss: number;
  peakRss: number | null;
  heapUsed: number;
  arrayBuffers: number;
  heldPayloadBytes: number | null;
  payloadLimitBytes: number | null;
}

interface QueueResults {
  meta: { date: string; node: string; machine: { cpus: number } };
  options: {
    quick: boolean;
    peers: string[];
    throughputN: number;
    burstN: number;
    burstLargeN: number;
    backlogs: number[];
  };
  workloads: {
    throughput: { tickwheel: { n: number; perSecond: number; rounds: number[] }; bullmq?: unknown };
    burst: Record<
      string,
      {
        label: string;
        n: number;
        /** null: a cell with no target. */
        targetMs: number | null;
        tickwheel: { delivered: number; lateness: Lateness; concurrency: number };
      }
    >;
    pending: Array<{
      n: number;
      tickwheel: {
        fill: {
          memory: { perMessage: { rssBytes: number; heapAndBuffersBytes: number } };
          diskBytesPerMessage: number;
        };
        crash: { ackedBeforeKill: number };
        recovery: { openMs: number; live: number; lostAcknowledged: number };
      };
    }>;
    steady: { tickwheel: { scheduled: number; delivered: number; lateness: Lateness } };
    payloadMemory: {
      payloadBytes: number;
      messages: number;
      fill: Array<MemorySample & { backlogBytes: number; messages: number }>;
      recovered: MemorySample & { openMs: number; live: number };
      drained: MemorySample & { received: number; intact: number };
    };
  };
  targets: Array<{ name: string; target: string; value: string; met: boolean }>;
}

describe('npm run bench:queue -- --quick (tickwheel only)', () => {
  let out: string;
  let results: QueueResults;
  let stdout: string;

  beforeAll(async () => {
    out = tempDir();
    ({ stdout } = await run(
      process.execPath,
      [
        '--expose-gc',
        join(root, 'bench/queue/run.mjs'),
        '--quick',
        '--peers',
        'tickwheel',
        '--out',
        out,
        '--data-dir',
        out,
      ],
      { cwd: root, timeout: 170_000, maxBuffer: 16 * 1024 * 1024 },
    ));
    results = JSON.parse(readFileSync(join(out, 'queue.json'), 'utf8')) as QueueResults;
  }, 180_000);

  it('prints progress and a results table', () => {
    expect(stdout).toMatch(/throughput tickwheel round 1\/1: start/);
    expect(stdout).toMatch(/workload\s+metric\s+tickwheel\s+BullMQ/);
  });

  it('records the run', () => {
    expect(results.meta.node).toBe(process.versions.node);
    expect(results.meta.machine.cpus).toBeGreaterThan(0);
    expect(results.options).toMatchObject({ quick: true, peers: ['tickwheel'] });
  });

  it('measures durable schedule throughput', () => {
    const { tickwheel, bullmq } = results.workloads.throughput;
    expect(tickwheel.n).toBe(results.options.throughputN);
    expect(tickwheel.perSecond).toBeGreaterThan(0);
    expect(tickwheel.rounds).toEqual([tickwheel.perSecond]);
    expect(bullmq).toBeUndefined();
  });

  it('delivers every message of each burst and summarises lateness', () => {
    const { burst } = results.workloads;
    expect(Object.keys(burst).sort()).toEqual([
      'cold',
      'fromDisk',
      'instant',
      'spread',
      'spreadLarge',
    ]);
    expect(burst.spreadLarge).toMatchObject({ n: results.options.burstLargeN, targetMs: 50 });
    expect(burst.spread).toMatchObject({ n: results.options.burstN, targetMs: 20 });
    // The new user's cell: a fifth of the burst, concurrency 1, no warm-up, and no target.
    expect(burst.cold).toMatchObject({ n: results.options.burstN / 5, targetMs: null });
    expect(burst.cold.tickwheel.concurrency).toBe(1);
    expect(results.targets.some((t: { name: string }) => t.name.startsWith('first burst'))).toBe(
      false,
    );
    for (const variant of Object.values(burst)) {
      expect(variant.tickwheel.delivered).toBe(variant.n);
      expect(variant.tickwheel.lateness.count).toBe(variant.n);
      for (const key of ['p50Ms', 'p99Ms', 'maxMs'] as const) {
        expect(typeof variant.tickwheel.lateness[key]).toBe('number');
      }
    }
  });

  it('measures memory per pending message and recovers after SIGKILL without loss', () => {
    const [row] = results.workloads.pending;
    expect(row.n).toBeGreaterThan(0);
    const { fill, crash, recovery } = row.tickwheel;
    expect(typeof fill.memory.perMessage.rssBytes).toBe('number');
    expect(typeof fill.memory.perMessage.heapAndBuffersBytes).toBe('number');
    expect(fill.diskBytesPerMessage).toBeGreaterThan(0);
    expect(crash.ackedBeforeKill).toBeGreaterThanOrEqual(row.n);
    expect(recovery.live).toBeGreaterThanOrEqual(crash.ackedBeforeKill);
    expect(recovery.lostAcknowledged).toBe(0);
    expect(recovery.openMs).toBeGreaterThan(0);
  });

  it('runs the steady state and delivers what it scheduled', () => {
    const { tickwheel } = results.workloads.steady;
    expect(tickwheel.scheduled).toBeGreaterThan(0);
    expect(tickwheel.delivered).toBe(tickwheel.scheduled);
    expect(tickwheel.lateness.count).toBe(tickwheel.delivered);
  });

  it('samples RSS against a backlog of large payloads, after SIGKILL and recovery, and drained', () => {
    const { payloadBytes, messages, fill, recovered, drained } = results.workloads.payloadMemory;
    // The empty queue first, then one sample per backlog size, each once it was reached.
    expect(fill.map((sample) => sample.backlogBytes)).toEqual([0, ...results.options.backlogs]);
    expect(messages * payloadBytes).toBe(results.options.backlogs.at(-1));
    for (const sample of [...fill, recovered, drained]) {
      expect(sample.rss).toBeGreaterThan(0);
      expect(sample.heapUsed).toBeGreaterThan(0);
      expect(sample.heldPayloadBytes).toBeLessThanOrEqual(sample.payloadLimitBytes as number);
    }
    expect(recovered.live).toBe(messages);
    expect(recovered.openMs).toBeGreaterThan(0);
    expect(drained).toMatchObject({ received: messages, intact: messages, heldPayloadBytes: 0 });
    expect(stdout).toMatch(/payload-memory\s+after SIGKILL: recovery/);
  });

  it('evaluates the targets and draws the charts', () => {
    expect(results.targets.length).toBeGreaterThan(0);
    for (const target of results.targets) {
      expect(target).toEqual({
        name: expect.any(String),
        target: expect.any(String),
        value: expect.any(String),
        met: expect.any(Boolean),
        ...('note' in target ? { note: expect.any(String) } : {}),
      });
    }
    for (const chart of ['throughput', 'lateness', 'memory', 'recovery']) {
      expect(readFileSync(join(out, `queue-${chart}.svg`), 'utf8')).toMatch(/^<svg [^>]*>/);
    }
    expect(readFileSync(join(out, 'queue.md'), 'utf8')).toMatch(/\| workload \| metric \|/);
  });
});
