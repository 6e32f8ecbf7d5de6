/**
 * A hash of a script's code, its blank and comment-only lines left out (`--` starts a comment in
 * Lua and SQL alike): the tests that hold a store's code to its version compare it.
 */

import { createHash } from 'node:crypto';

export function codeHash(source: string): string {
  const code = source
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('--'));
  return createHash('sha256').update(code.join('\n')).digest('hex').slice(0, 16);
}
