/**
 * The idempotent-consumer crash harness (scripts/idempotent-crash.mjs) in a short run, as CI runs
 * it: a consumer process moving money in PostgreSQL per message is SIGKILLed before its effect,
 * inside its transaction, after the commit but before the ack, and at random times, for well
 * over a hundred cycles. PostgreSQL store: every transfer applied exactly once, money balanced.
 * Redis store: every transfer applied at least once, repeats counted and reported. With the
 * queue in the same PostgreSQL, the transfers scheduled in the transactions that record them by a
 * producer that is killed too, and PostgreSQL itself killed: every committed transfer exactly
 * once, no rolled-back one ever.
 */

import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed } from '../../scripts/valkey.mjs';
import { runHarness } from '../harness.js';

const HARNESS = fileURLToPath(new URL('../../scripts/idempotent-crash.mjs', import.meta.url));
const harness = (store: string, messages: number, more: string[] = []) =>
  runHarness(HARNESS, ['--store', store, '--messages', String(messages), ...more]);

describe.runIf(postgresInstalled())('idempotent consumers killed at every point', () => {
  it('PostgreSQL store: every transfer exactly once, the money balanced', async () => {
    const { status, output, summary } = await harness('postgres', 400);
    expect(summary.violations, output).toEqual([]);
    expect(status).toBe(0);
    expect(summary.cycles).toBeGreaterThanOrEqual(100);
    expect(summary.applied).toBe(400);
    expect(summary.repeated).toBe(0);
    for (const point of ['before-effect', 'inside-effect', 'after-commit', 'random']) {
      expect(summary.kills[point], point).toBeGreaterThan(0);
    }
  }, 600_000);

  it('queue on PostgreSQL, producer and PostgreSQL killed too: committed transfers once, rolled-back never', async () => {
    const { status, output, summary } = await harness('postgres', 120, [
      '--queue',
      'postgres',
      '--postgres-kills',
      '4',
    ]);
    expect(summary.violations, output).toEqual([]);
    expect(status).toBe(0);
    expect(summary.applied).toBe(120);
    expect(summary.unexpected).toBe(0);
    expect(summary.repeated).toBe(0);
    expect(summary.kills.postgres).toBe(4);
    expect(summary.kills.producer).toBeGreaterThan(0);
    for (const point of ['before-effect', 'inside-effect', 'after-commit', 'random']) {
      expect(summary.kills[point], point).toBeGreaterThan(0);
    }
  }, 600_000);

  it.runIf(installed('valkey-server') || installed('redis-server'))(
    'Redis store: every transfer at least once, the repeats counted',
    async () => {
      const { status, output, summary } = await harness('redis', 100);
      expect(summary.violations, output).toEqual([]);
      expect(status).toBe(0);
      expect(summary.applied).toBe(100);
      // Repeats come only from kills between the effect and the done mark (or random ones).
      expect(summary.repeats).toBeLessThanOrEqual(
        (summary.kills['after-effect'] + summary.kills.random) * 2,
      );
    },
    600_000,
  );
});
