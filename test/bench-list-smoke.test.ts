import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { useTempDirs } from './support/temp-dir.js';

const tempDir = useTempDirs('bench-list-smoke');

// The list() benchmark (bench/list.mjs) on 30,000 messages, so that its code cannot rot. Only
// the shape of its table and what holds on any machine are checked: no timings.

const root = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);

it('fills a store, reopens it and times the pages', async () => {
  const dir = tempDir();
  const { stdout } = await run(
    process.execPath,
    ['--expose-gc', 'bench/list.mjs', '--count', '30000', '--days', '2', '--dir', dir],
    { cwd: root },
  );
  const rows = new Map(
    stdout
      .split('\n')
      .filter((line) => line.startsWith('| ') && !line.startsWith('| step'))
      .map((line) => line.split('|').map((cell) => cell.trim()))
      .map((cells) => [cells[1], cells[4]]),
  );
  expect(rows.get('pending')).toMatch(/^30000 live, \d+ index files$/);
  expect(rows.get('first page of the common topic')).toBe('100 messages');
  expect(rows.get('page from a cursor deep in')).toBe('100 messages');
  expect(rows.get('first page of the rare topic')).toMatch(/^\d+ messages, cursor (given|absent)$/);
});
