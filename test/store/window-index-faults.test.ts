/**
 * The schedule index tells its writes' outcome once per change: a failing fsync is not "healed"
 * by a write that succeeds after it, only by an fsync that does.
 */

import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { WindowIndex } from '../../src/store/file/window-index.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('index-faults');

const scratch = tempDir();

it('stays failing while an fsync fails, though writes succeed, and heals with the fsync', async () => {
  const dir = join(scratch, 'index');
  const told: string[] = [];
  const index = await WindowIndex.open(dir, 1000, (err) =>
    told.push(err === undefined ? 'ok' : ((err as NodeJS.ErrnoException).code ?? 'error')),
  );
  index.advance(0);
  index.append(500, 1, 1, 1);
  await index.flush();
  const [name] = readdirSync(dir);
  // The written file replaced by a directory: its fsync (open r+) fails with EISDIR.
  rmSync(join(dir, name));
  mkdirSync(join(dir, name));
  await expect(index.sync()).rejects.toMatchObject({ code: 'EISDIR' });
  index.append(1500, 2, 2, 2);
  await index.flush(); // a write that works: not a heal while the fsync still fails
  expect(told.at(-1)).toBe('EISDIR');
  rmSync(join(dir, name), { recursive: true });
  await index.sync();
  index.close();
  expect(told.filter((outcome, i) => outcome !== told[i - 1])).toEqual(['ok', 'EISDIR', 'ok']);
});
