import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

// bench/queue/rounds.mjs with small bursts, so that its code cannot rot: the shape of its
// output and that every burst was delivered whole and none early; no timings. It runs dist/, as
// the benches do: `npm run build` first (CI builds before it tests).

const root = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);

describe.each(['consume', 'receive', 'receive-only'])(
  'node bench/queue/rounds.mjs 500 2 10 %s',
  (mode) => {
    it('prints one line a burst and the medians, every message delivered', async () => {
      const { stdout } = await run(
        process.execPath,
        ['--expose-gc', 'bench/queue/rounds.mjs', '500', '2', '10', mode],
        { cwd: root, timeout: 60_000 },
      );
      const lines = stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, number | null>);
      expect(lines).toHaveLength(3);
      for (const [i, round] of lines.slice(0, 2).entries()) {
        expect(round.round).toBe(i + 1);
        // Scheduled before due, and lateness never negative (never early), in order.
        expect(round.marginMs).toBeGreaterThan(0);
        expect(round.early).toBe(0);
        expect(round.p0).toBeGreaterThanOrEqual(0);
        expect(round.p50).toBeGreaterThanOrEqual(round.p0 as number);
        expect(round.p99).toBeGreaterThanOrEqual(round.p50 as number);
        expect(round.max).toBeGreaterThanOrEqual(round.p99 as number);
      }
      expect(lines[2]).toEqual({
        n: 500,
        concurrency: 10,
        mode,
        firstP99: lines[0].p99,
        laterP99Median: lines[1].p99,
      });
    }, 70_000);
  },
);

describe('node bench/queue/rounds.mjs with an unknown mode', () => {
  it('fails with a message that names the modes', async () => {
    await expect(
      run(process.execPath, ['bench/queue/rounds.mjs', '500', '2', '10', 'push'], {
        cwd: root,
        timeout: 60_000,
      }),
    ).rejects.toThrow(/mode must be consume, receive or receive-only, got push/);
  }, 70_000);
});
