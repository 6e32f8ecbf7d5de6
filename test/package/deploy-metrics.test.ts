/**
 * deploy/grafana/tickwheel.json and deploy/prometheus/alerts.yml name only metrics that exist:
 * a panel or an alert over a misspelt or renamed series shows nothing and never fires, and
 * nobody notices until it should have. A real `tickwheel serve` on a data directory moves
 * messages through every step (schedule, receive, ack, nack to the dead letters) and its
 * /metrics is the reference. The cluster's series exist only on a server over Valkey/Redis:
 * here they are checked against the names src/server/metrics.ts registers, and against a real
 * server over Valkey in test/cluster/deploy-metrics.test.ts.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  dashboardExprs,
  metricNames,
  missingNames,
  readRepoFile,
  ruleExprs,
} from '../support/deploy-exprs.js';
import { startServer, type ServerProcess } from '../server/process.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const tempDir = useTempDirs('deploy-metrics');

describe('metricNames', () => {
  it('finds the selected metrics, not functions, labels, strings or keywords', () => {
    expect(
      metricNames(
        'histogram_quantile(0.99, sum by (le, route) (rate(a_bucket{route=~"x_y", le!="1"}[$__rate_interval])))' +
          ' / on (instance) group_left (node) b_total and c offset 5m > bool 1 unless bogus_metric',
      ).sort(),
    ).toEqual(['a_bucket', 'b_total', 'bogus_metric', 'c']);
  });
});

describe('deploy/ names only metrics that /metrics has', () => {
  let server: ServerProcess;
  let scrape: string;

  beforeAll(async () => {
    server = await startServer(['--dir', tempDir()]);
    const post = async (path: string, body: unknown) => {
      const response = await fetch(`${server.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(response.status, path).toBeLessThan(300);
      return (await response.json()) as Record<string, unknown>;
    };
    for (let i = 0; i < 3; i++) {
      await post('/v1/topics/emails/messages', { payload: { i }, maxAttempts: 1 });
    }
    const receipts: string[] = [];
    await waitFor(async () => {
      const { messages } = (await post('/v1/topics/emails/receive', { max: 3, waitMs: 1000 })) as {
        messages: Array<{ receipt: string }>;
      };
      receipts.push(...messages.map((m) => m.receipt));
      return receipts.length === 3;
    });
    await post('/v1/ack', { receipts: receipts.slice(0, 2) });
    await post('/v1/nack', { receipts: receipts.slice(2), reason: 'failed on purpose' });
    scrape = await waitFor(async () => {
      const text = await (await fetch(`${server.url}/metrics`)).text();
      // The flow has reached the counters: the nacked message is dead, all three delivered.
      return /^tickwheel_messages_dead_total [1-9]/m.test(text) &&
        /^tickwheel_delivery_lateness_seconds_count [1-9]/m.test(text)
        ? text
        : undefined;
    });
  });

  afterAll(async () => {
    await server?.kill();
  });

  const dashboard = dashboardExprs();
  const rules = ruleExprs();
  // The cluster's series, registered only on a server over Valkey/Redis.
  const cluster = new Set(
    [...readRepoFile('src/server/metrics.ts').matchAll(/'(tickwheel_cluster_\w+)'/g)].map(
      (match) => match[1],
    ),
  );
  // `up` is Prometheus's own series for every scrape target.
  const known = (name: string) => name === 'up' || cluster.has(name);

  it('reads the expressions of both files', () => {
    expect(dashboard.length).toBeGreaterThan(20);
    expect(rules.length).toBeGreaterThan(5);
    expect(cluster.size).toBeGreaterThan(0);
    const named = new Set([...dashboard, ...rules].flatMap(metricNames));
    for (const name of [
      'tickwheel_messages_delivered_total',
      'tickwheel_delivery_lateness_seconds_bucket',
      'tickwheel_messages',
      'tickwheel_cluster_partitions',
    ]) {
      expect(named).toContain(name);
    }
  });

  it('deploy/grafana/tickwheel.json', () => {
    expect(missingNames(dashboard, scrape, known)).toEqual([]);
  });

  it('deploy/prometheus/alerts.yml', () => {
    expect(missingNames(rules, scrape, known)).toEqual([]);
  });

  it("each alert's runbook_url is a heading of docs/operations.md", () => {
    const anchors = new Set(
      [...readRepoFile('docs/operations.md').matchAll(/^#+ (.+)$/gm)].map((match) =>
        match[1]
          .toLowerCase()
          .replace(/[^\w\- ]/g, '')
          .replace(/ /g, '-'),
      ),
    );
    const urls = [
      ...readRepoFile('deploy/prometheus/alerts.yml').matchAll(/runbook_url: '([^']*)'/g),
    ].map((match) => match[1]);
    expect(urls.length).toBe(
      [...readRepoFile('deploy/prometheus/alerts.yml').matchAll(/- alert:/g)].length,
    );
    expect(
      urls.filter((url) => {
        const [page, anchor] = url.split('#');
        return !page.endsWith('/docs/operations.md') || !anchors.has(anchor);
      }),
    ).toEqual([]);
  });
});
