import { configDefaults, defineConfig } from 'vitest/config';

/**
 * The suite in projects, so that a change is tested by what covers it:
 * `npx vitest run --project unit` needs no build and no server; the other projects build the
 * stale parts of dist/ first (test/support/built-package.ts) and skip what needs a program
 * this machine lacks (valkey-server, redis-server, PostgreSQL, Chromium).
 */

/** Tests that start Valkey or Redis servers (the cluster's pure parts are unit tests). */
const valkey = [
  'test/cluster/!(counts-reads|fired-ahead|ownership-model|record|rendezvous|slot).test.ts',
  'test/conformance/**/*.test.ts',
  'test/patterns/lease-redis.test.ts',
  'test/idempotent/redis.test.ts',
];
const postgres = [
  'test/idempotent/postgres.test.ts',
  'test/idempotent/client.test.ts',
  'test/idempotent/crash.test.ts',
  'test/idempotent/lost-connection.test.ts',
  // Run dist/ as users run it: `tickwheel serve --postgres` processes, the chaos harness.
  'test/postgres/serve.test.ts',
  'test/postgres/chaos.test.ts',
];
const browser = ['test/dashboard/**/*.test.ts'];
const bench = ['test/bench-*.test.ts', 'test/server/bench-http.test.ts'];
/** The file store and its crash tests (which run dist/ in the processes they kill). */
const store = ['test/store/**/*.test.ts', 'test/crash/**/*.test.ts'];
/** The packed tarball, and tests that run dist/ as users run it: `node` processes, the CLI. */
const built = [
  'test/package/**/*.test.ts',
  'test/cli/**/*.test.ts',
  'test/assert.test.ts',
  'test/examples.test.ts',
  'test/readme.test.ts',
  'test/clock/system-clock.test.ts',
  'test/clock/system-clock-unref.test.ts',
  'test/timer/late-binding.test.ts',
  'test/timer/node-compat.test.ts',
  'test/timer/sleep-liveness.test.ts',
  'test/queue/close-in-handler.test.ts',
  'test/queue/decode-ahead.test.ts',
  'test/queue/liveness.test.ts',
  'test/queue/many.test.ts',
  'test/server/connections.test.ts',
  'test/server/crash.test.ts',
  'test/server/e2e.test.ts',
  'test/server/io-errors.test.ts',
  'test/server/list.test.ts',
  'test/server/logs.test.ts',
  'test/server/origin.test.ts',
  'test/server/push-allow.test.ts',
  'test/server/push-kill.test.ts',
  'test/server/startup.test.ts',
];
const buildFirst = ['test/support/built-package.ts'];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
    // Checks the invariants of src/assert.ts's debugAssert, off in production (one branch).
    env: { TICKWHEEL_DEBUG: '1' },
    // Two test files at a time even on two cores (Vitest's default there is one): most of the
    // long files wait on processes and servers they started, not on the CPU.
    maxWorkers: 2,
    // Memory tests call gc() to measure what is retained.
    pool: 'forks',
    poolOptions: { forks: { execArgv: ['--expose-gc'] } },
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/**/*.test.ts'],
          exclude: [
            ...configDefaults.exclude,
            ...valkey,
            ...postgres,
            ...browser,
            ...bench,
            ...store,
            ...built,
          ],
        },
      },
      { extends: true, test: { name: 'store', include: store, globalSetup: buildFirst } },
      { extends: true, test: { name: 'valkey', include: valkey, globalSetup: buildFirst } },
      { extends: true, test: { name: 'postgres', include: postgres, globalSetup: buildFirst } },
      { extends: true, test: { name: 'browser', include: browser, globalSetup: buildFirst } },
      { extends: true, test: { name: 'package', include: built, globalSetup: buildFirst } },
      { extends: true, test: { name: 'bench', include: bench, globalSetup: buildFirst } },
    ],
  },
});
