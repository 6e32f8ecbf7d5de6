/**
 * The cluster's series that deploy/grafana/tickwheel.json and deploy/prometheus/alerts.yml name
 * exist in /metrics of a real `tickwheel serve --redis` over Valkey (they are registered only
 * there; the other series are checked on the embedded store in
 * test/package/deploy-metrics.test.ts).
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type ServerProcess } from '../server/process.js';
import { dashboardExprs, metricNames, missingNames, ruleExprs } from '../support/deploy-exprs.js';
import { waitFor } from '../support/wait-for.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startServer as startValkey } from '../../scripts/valkey.mjs';

describe.runIf(installed('valkey-server'))('deploy/ over a server on Valkey', () => {
  let valkey: { url: string; stop(): Promise<void> };
  let server: ServerProcess;
  let scrape: string;

  beforeAll(async () => {
    valkey = await startValkey();
    server = await startServer(['--redis', valkey.url, '--queue', 'deploy', '--partitions', '4'], {
      timeoutMs: 30_000,
    });
    scrape = await waitFor(
      async () => {
        const text = await (await fetch(`${server.url}/metrics`)).text();
        // The node holds every partition's lease: the cluster's series are there.
        return /^tickwheel_cluster_partitions_owned 4$/m.test(text) ? text : undefined;
      },
      { timeoutMs: 20_000 },
    );
  }, 60_000);

  afterAll(async () => {
    await server?.kill();
    await valkey?.stop();
  });

  const exprs = [...dashboardExprs(), ...ruleExprs()].filter((expr) =>
    metricNames(expr).some((name) => name.startsWith('tickwheel_cluster_')),
  );

  it('names tickwheel_cluster_* series that /metrics has', () => {
    expect(exprs.length).toBeGreaterThan(3);
    const missing = missingNames(exprs, scrape).filter((line) =>
      line.startsWith('tickwheel_cluster_'),
    );
    expect(missing).toEqual([]);
  });
});
