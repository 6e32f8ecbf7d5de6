/**
 * The build under test: dist/ of this checkout, or the one in TICKWHEEL_BENCH_DIST (a dist
 * directory: another build to compare, or a build of one commit while the working tree
 * changes), as in the queue benchmark. Child processes inherit the variable, so every process
 * of a run loads the same build.
 */

import { join } from 'node:path';
import { fileURLToPath, pathToFileURL, URL } from 'node:url';

export const DIST =
  process.env.TICKWHEEL_BENCH_DIST ?? fileURLToPath(new URL('../../dist/', import.meta.url));

/** Imports `path` (such as 'client/index.js') from the build under test. */
export async function importDist(path) {
  try {
    return await import(pathToFileURL(join(DIST, path)).href);
  } catch (err) {
    throw new Error(`cannot load ${join(DIST, path)}; run npm run build first (${err.message})`);
  }
}
