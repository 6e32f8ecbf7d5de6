import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { useTempDirs } from './support/temp-dir.js';

const tempDir = useTempDirs('bench-floors-smoke');

// bench/floors.mjs with N = 2,000 and one round, so that its code cannot rot. Only the shape of
// the results and how the targets are derived from them are checked: no timings.

const root = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);

interface Target {
  id: string;
  budgetNs: number;
  floorNs: number;
  headroomNs: number;
  belowFloor: boolean;
}

interface Floors {
  schema: string;
  options: { n: number; rounds: number };
  results: {
    clock: Record<string, { ns: number }>;
    node: { scheduleNs: number; scheduleColdNs: number; cancelNs: number };
    fillGrowing: { firstNs: number; againNs: number };
    fillPreallocated: { firstNs: number; againNs: number };
    json: { ns: number; bytes: number };
    handOver: { ns: number; burst: number };
    chain: { chainNs: number; vectorNs: number };
  };
  targets: Target[];
}

describe('npm run bench:floors -- --n 2000 --rounds 1', () => {
  let out: string;
  let floors: Floors;
  let stdout: string;

  beforeAll(async () => {
    out = tempDir();
    ({ stdout } = await run(
      process.execPath,
      [join(root, 'bench/floors.mjs'), '--n', '2000', '--rounds', '1', '--out', out],
      { cwd: root, timeout: 240_000 },
    ));
    floors = JSON.parse(readFileSync(join(out, 'floors.json'), 'utf8')) as Floors;
  }, 250_000);

  it('measures every cost as a positive number of ns', () => {
    expect(floors.schema).toBe('tickwheel-bench-floors/1');
    expect(floors.options).toMatchObject({ n: 2000, rounds: 1 });
    const { clock, node, fillGrowing, fillPreallocated, json, handOver, chain } = floors.results;
    expect(Object.keys(clock)).toEqual([
      'performance.now()',
      'Date.now()',
      'process.hrtime.bigint()',
      'empty loop',
    ]);
    const costs = [
      ...Object.values(clock).map((c) => c.ns),
      node.scheduleNs,
      node.scheduleColdNs,
      node.cancelNs,
      fillGrowing.firstNs,
      fillGrowing.againNs,
      fillPreallocated.firstNs,
      fillPreallocated.againNs,
      json.ns,
      handOver.ns,
      chain.chainNs,
      chain.vectorNs,
    ];
    for (const cost of costs) expect(cost).toBeGreaterThan(0);
    expect(json.bytes).toBeGreaterThan(20);
    // A burst of 100k, or n when that is smaller.
    expect(handOver.burst).toBe(2000);
  });

  it('derives each budget from the targets and Node figures of the same run', () => {
    const { clock, node, fillGrowing, handOver, chain } = floors.results;
    // One reading is shared by a batch of up to BIND_BATCH (256) starts.
    const clockNs =
      Math.min(clock['performance.now()'].ns, clock['process.hrtime.bigint()'].ns) / 256;
    const byId = Object.fromEntries(floors.targets.map((t) => [t.id, t]));
    expect(Object.keys(byId)).toEqual([
      'lean-schedule-warm',
      'closure-schedule-warm',
      'schedule-cold',
      'storm',
      'queue-same-ms',
    ]);
    expect(byId['lean-schedule-warm']).toMatchObject({
      budgetNs: node.scheduleNs / 20,
      floorNs: clockNs,
    });
    expect(byId['closure-schedule-warm']).toMatchObject({
      budgetNs: node.scheduleNs / 15,
      floorNs: clockNs,
    });
    expect(byId['schedule-cold']).toMatchObject({
      budgetNs: node.scheduleColdNs / 10,
      floorNs: clockNs + fillGrowing.firstNs,
    });
    expect(byId['storm']).toMatchObject({ budgetNs: 100, floorNs: chain.chainNs });
    // Payloads of a dense burst are parsed ahead: handing them over is the floor.
    expect(byId['queue-same-ms']).toMatchObject({ budgetNs: 200, floorNs: handOver.ns });
    for (const t of floors.targets) {
      expect(t.headroomNs).toBeCloseTo(t.budgetNs - t.floorNs, 9);
      expect(t.belowFloor).toBe(t.budgetNs < t.floorNs);
    }
  });

  it('writes the same figures as a table', () => {
    const md = readFileSync(join(out, 'floors.md'), 'utf8');
    expect(stdout).toBe(md);
    expect(md).toMatch(
      /\| target \| budget, ns per operation \| floor \| floor, ns \| under the floor \|/,
    );
    expect(md.match(/^\| (lean|closure|expiry|queue)/gm)).toHaveLength(5);
  });

  it('refuses a bad option with a message and exit code 1', async () => {
    const failed = run(process.execPath, [join(root, 'bench/floors.mjs'), '--n', '0'], {
      cwd: root,
      timeout: 10_000,
    });
    await expect(failed).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/--n takes a whole number of at least 1, got 0/),
    });
  });
});
