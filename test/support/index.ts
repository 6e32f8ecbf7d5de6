/**
 * What many test files share: seeded randomness, temporary directories, waiting for a
 * condition, type errors of a file.
 */

export { seededBytes, seededInt, seededRandom } from './random.mjs';
export { useTempDirs } from './temp-dir.js';
export { typeErrors } from './type-errors.js';
export { sleep, waitFor, type WaitForOptions } from './wait-for.js';
