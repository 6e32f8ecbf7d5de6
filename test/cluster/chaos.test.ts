/**
 * The chaos harness (scripts/chaos.mjs, `npm run chaos`) in a short run, as CI runs it: a
 * 3 + 3 Valkey Cluster and three tickwheel nodes under schedule / cancel / consume load, with
 * tickwheel nodes and Valkey primaries SIGKILLed at random. It must end with no violation: every
 * acknowledged schedule delivered (or its acknowledged cancel held), none early, payloads
 * intact. The seed is random per run and printed, so that a failure can be replayed.
 */

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed } from '../../scripts/valkey.mjs';
import { runHarness } from '../harness.js';

const HARNESS = fileURLToPath(new URL('../../scripts/chaos.mjs', import.meta.url));

describe('the chaos harness, asked for help', () => {
  it('prints its usage and exits 0, running nothing', () => {
    const run = spawnSync(process.execPath, [HARNESS, '--help'], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(
      /^usage: node scripts\/chaos\.mjs \[--backend valkey\|postgres\] \[--kills 200\]/,
    );
    expect(run.stdout).toMatch(/--durability replicated\|fsynced\|async/);
    expect(run.stdout).not.toMatch(/chaos: seed/);
  });

  it('says what is wrong with a bad flag, with the usage, and exits 2', () => {
    const run = spawnSync(process.execPath, [HARNESS, '--kils', '3'], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/^chaos: unknown option --kils\nusage:/);
  });
});

describe.runIf(installed('valkey-server'))('the chaos harness, short run', () => {
  it('kills nodes and primaries at random, and finds every acknowledged message delivered', async () => {
    const run = await runHarness(HARNESS, [
      '--kills',
      '8',
      '--interval-ms',
      '2500',
      '--primary-share',
      '0.5',
    ]);
    const { summary } = run;
    expect(run.status, run.output).toBe(0);
    expect(summary.violations).toBe(0);
    expect(summary.kills.node + summary.kills.primary).toBe(8);
    // Both kinds happen in a short run too (a primary kill waits for synced replicas, so
    // fewer of them than asked for may come; at least one must).
    expect(summary.kills.node).toBeGreaterThan(0);
    expect(summary.kills.primary).toBeGreaterThan(0);
    expect(summary.scheduled).toBeGreaterThan(500);
    expect(summary.delivered).toBeGreaterThanOrEqual(summary.scheduled - summary.cancelled);
  }, 300_000);
});
