/**
 * The chaos harness on PostgreSQL (scripts/chaos.mjs --backend postgres) in a short run, as CI
 * runs it: one PostgreSQL and three tickwheel nodes under schedule / cancel / consume load,
 * nodes and PostgreSQL itself (every server process, then crash recovery) SIGKILLed at random.
 * It must end with no violation: every acknowledged schedule delivered (or its acknowledged
 * cancel held), none early, payloads intact. Then the same with a synchronous standby behind
 * one address, PostgreSQL kills alternating between crash recovery and a failover to it. The seed is printed, so a failure can be replayed.
 */

import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
import { runHarness } from '../harness.js';

const HARNESS = fileURLToPath(new URL('../../scripts/chaos.mjs', import.meta.url));

/** A run of `kills` kills, every ~2.5 s; its summary once checked for what every run must hold. */
async function chaos(kills: number, primaryShare: number, more: string[] = []) {
  const run = await runHarness(HARNESS, [
    ...['--backend', 'postgres', '--kills', String(kills), '--interval-ms', '2500'],
    ...['--primary-share', String(primaryShare), ...more],
  ]);
  const { summary } = run;
  expect(run.status, run.output).toBe(0);
  expect(summary.violations).toBe(0);
  expect(summary.backend).toBe('postgres');
  expect(summary.kills.node + summary.kills.postgres).toBe(kills);
  expect(summary.delivered).toBeGreaterThanOrEqual(summary.scheduled - summary.cancelled);
  return summary;
}

describe.runIf(postgresInstalled())('the chaos harness on PostgreSQL, short run', () => {
  it('kills nodes and PostgreSQL at random, and finds every acknowledged message delivered', async () => {
    const summary = await chaos(8, 0.5);
    expect(summary.kills.node).toBeGreaterThan(0);
    expect(summary.kills.postgres).toBeGreaterThan(0);
    expect(summary.scheduled).toBeGreaterThan(500);
  }, 300_000);

  it('with a synchronous standby (remote_apply), fails over to it too, and loses nothing', async () => {
    const summary = await chaos(6, 0.7, ['--replica', 'sync']);
    expect(summary.replica).toBe('sync');
    expect(summary.failovers).toBeGreaterThan(0);
    expect(summary.scheduled).toBeGreaterThan(300);
  }, 300_000);
});
