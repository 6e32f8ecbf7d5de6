/**
 * The chaos harness (scripts/chaos.mjs, `npm run chaos`) in a short run, as CI runs it: a
 * 3 + 3 Valkey Cluster and three tickwheel nodes under schedule / cancel / consume load, with
 * tickwheel nodes and Valkey primaries SIGKILLed at random. It must end with no violation: every
 * acknowledged schedule delivered (or its acknowledged cancel held), none early, payloads
 * intact. The seed is random per run and printed, so that a failure can be replayed.
 */

import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed } from '../../scripts/valkey.mjs';
import { runHarness } from '../harness.js';

const HARNESS = fileURLToPath(new URL('../../scripts/chaos.mjs', import.meta.url));

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
