/** What many test files share: seeded randomness, temporary directories, waiting for a condition. */

export { seededBytes, seededInt, seededRandom } from './random.mjs';
export { useTempDirs } from './temp-dir.js';
export { sleep, waitFor, type WaitForOptions } from './wait-for.js';
