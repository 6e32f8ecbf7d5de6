import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/** The README's examples run against the built package, so they cannot rot. */
const root = fileURLToPath(new URL('..', import.meta.url));
const blocks = [
  ...readFileSync(join(root, 'README.md'), 'utf8').matchAll(/```js\n([\s\S]*?)```/g),
].map((match) => match[1]);
const dir = mkdtempSync(join(tmpdir(), 'tickwheel-readme-'));
mkdirSync(join(dir, 'node_modules'));
symlinkSync(root, join(dir, 'node_modules', 'tickwheel'), 'dir');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function runExample(code: string): string {
  const file = join(dir, `example-${Math.random().toString(36).slice(2)}.mjs`);
  writeFileSync(file, code);
  return execFileSync(process.execPath, [file], { encoding: 'utf8', timeout: 20_000, cwd: dir });
}

describe('README examples', () => {
  it('the first example prints two heartbeats, the stats, then the idle timeout', () => {
    const out = runExample(blocks[0]);
    expect(out).toMatch(
      /^heartbeat\nheartbeat\n\{[\s\S]*pending: 1,[\s\S]*fired: 3,[\s\S]*\}\nconn-7 idle, closing\n$/,
    );
  });

  it('the delay queue example schedules, shows the status, and consumes the message', () => {
    const example = blocks.find((code) => code.includes('DelayQueue.open'));
    const out = runExample(example!);
    expect(out).toMatch(/status: 'scheduled'/);
    expect(out).toMatch(/send \{ to: 'ada@example.com' \}/);
  });

  it('the ManualClock example fires at virtual time 250', () => {
    const example = blocks.find((code) => code.includes('ManualClock'));
    expect(runExample(example!)).toBe('fired at 250\n');
  });
});
