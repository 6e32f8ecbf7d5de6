/**
 * Temporary directories that remove themselves. One made inside a test goes when the test
 * has finished (after its afterEach hooks, which close what uses it); one made in a beforeAll
 * or at collection goes after the file's last test.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, onTestFinished } from 'vitest';

function remove(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Call once at the top of a test file (before other hooks, so that its removal runs after
 * them); returns the function that makes a directory named `tickwheel-<name>-XXXXXX`.
 */
export function useTempDirs(name: string): (label?: string) => string {
  const lasting: string[] = [];
  afterAll(() => {
    for (const dir of lasting.splice(0)) remove(dir);
  });
  return (label = name) => {
    const dir = mkdtempSync(join(tmpdir(), `tickwheel-${label}-`));
    try {
      onTestFinished(() => remove(dir));
    } catch {
      // Not inside a test: kept for the whole file.
      lasting.push(dir);
    }
    return dir;
  };
}
