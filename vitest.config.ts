import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
    // Checks the invariants of src/assert.ts's debugAssert, off in production (one branch).
    env: { TICKWHEEL_DEBUG: '1' },
    // Memory tests call gc() to measure what is retained.
    pool: 'forks',
    poolOptions: { forks: { execArgv: ['--expose-gc'] } },
  },
});
