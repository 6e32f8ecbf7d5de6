/**
 * A data directory holds users' payloads and push targets' secrets: everything tickwheel
 * creates in it is its owner's alone, directories 0700 and files 0600, whatever the umask
 * lets through otherwise.
 */

import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('modes');

/** Every path under `dir` (itself included) with its permission bits, as `path: 0o...`. */
function modes(dir: string, root = dir): Record<string, string> {
  const found: Record<string, string> = {
    [relative(root, dir) || '.']: (statSync(dir).mode & 0o777).toString(8),
  };
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) Object.assign(found, modes(path, root));
    else found[relative(root, path)] = (statSync(path).mode & 0o777).toString(8);
  }
  return found;
}

describe('a data directory', () => {
  it.skipIf(process.platform === 'win32')(
    'is created 0700, and every file in it 0600',
    async () => {
      const parent = tempDir();
      const dir = join(parent, 'data');
      const previous = process.umask(0o022); // the usual one, which would leave files 0644
      try {
        const queue = await DelayQueue.open({ dir, checkpointIntervalMs: 10 });
        await queue.schedule({ topic: 'soon', payload: { a: 1 } });
        await queue.schedule({ topic: 'later', payload: { b: 2 }, delayMs: 86_400_000 * 30 });
        await queue.pause('soon');
        await queue.putSchedule('nightly', { topic: 'reports', everyMs: 3_600_000 });
        await queue.close(); // a checkpoint and a snapshot
      } finally {
        process.umask(previous);
      }
      const found = modes(dir);
      // The files this test means to cover are there, so a mode is checked on each.
      expect(Object.keys(found)).toEqual(
        expect.arrayContaining([
          '.',
          'LOCK',
          'format.json',
          'checkpoint.json',
          'snapshot.bin',
          'topics.json',
          'push.json',
          'schedules.log',
          'log',
          'log/0000000001.seg',
        ]),
      );
      for (const [path, mode] of Object.entries(found)) {
        const isDirectory = statSync(join(dir, path)).isDirectory();
        expect(mode, path).toBe(isDirectory ? '700' : '600');
      }
    },
  );
});
