/**
 * What many test files share: seeded randomness, temporary directories, closing what a test
 * opened, waiting for a condition, type errors of a file.
 */

export { seededBytes, seededInt, seededRandom } from './random.mjs';
export { bareServer } from './bare-server.js';
export { useClosing, type Closable } from './closing.js';
export { useTempDirs } from './temp-dir.js';
export { typeErrors } from './type-errors.js';
export { sleep, waitFor, type WaitForOptions } from './wait-for.js';
export { runNode, runNodeScript, type ScriptRun } from './node-script.js';
