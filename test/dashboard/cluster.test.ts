/**
 * The dashboard of a server that is a node of a queue on Valkey, in a real browser (Debian's
 * chromium, playwright-core): the cluster card lists the nodes and the partitions each owns,
 * and follows a node that leaves. Two `tickwheel serve --redis` processes over a Valkey primary
 * with a replica, all started here.
 */

import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type ServerProcess } from '../server/process.js';
import { builtPage, hasChromium, launch } from './browser.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startReplicated } from '../../scripts/valkey.mjs';

const PARTITIONS = 8;

describe.runIf(hasChromium && installed('valkey-server'))(
  'the dashboard of a cluster node, in a browser',
  () => {
    let valkey: { primary: { url: string }; stop(): Promise<void> };
    const servers: ServerProcess[] = [];
    let browser: Browser;
    let page: Page;

    const serve = async (node: string) => {
      const server = await startServer(
        [
          '--redis',
          valkey.primary.url,
          '--queue',
          'seen',
          '--partitions',
          String(PARTITIONS),
          '--node-id',
          node,
        ],
        { timeoutMs: 30_000 },
      );
      servers.push(server);
      return server;
    };

    /** The cluster card's rows: node name → partitions owned, as the page shows them. */
    async function rows(): Promise<Record<string, number>> {
      const out: Record<string, number> = {};
      for (const row of await page.locator('[data-testid=cluster-nodes-table] tbody tr').all()) {
        const node = await row.getAttribute('data-node');
        const count = await row.locator('[data-field=partitions]').textContent();
        if (node !== null) out[node] = Number(count);
      }
      return out;
    }

    beforeAll(async () => {
      await builtPage();
      valkey = await startReplicated({ replicas: 1 });
      await serve('web-1');
      await serve('web-2');
      ({ browser, page } = await launch({ height: 1400, timeoutMs: 20_000 }));
    }, 90_000);

    afterAll(async () => {
      await browser?.close();
      for (const server of servers) await server.kill();
      await valkey?.stop();
    });

    it('lists both nodes with the partitions each owns, this server marked', async () => {
      await page.goto(servers[0].url);
      await page.getByTestId('cluster').waitFor();
      await expect
        .poll(
          async () => {
            const r = await rows();
            return (
              (r['web-1'] ?? 0) > 0 &&
              (r['web-2'] ?? 0) > 0 &&
              r['web-1'] + r['web-2'] === PARTITIONS
            );
          },
          { timeout: 30_000 },
        )
        .toBe(true);
      expect(await page.getByTestId('cluster-nodes').locator('.value').textContent()).toBe('2');
      expect(await page.locator('[data-node=web-1]').textContent()).toContain('(this server)');
      expect(await page.locator('[data-node=web-2]').textContent()).not.toContain('(this server)');
    }, 60_000);

    it('shows the partitions of a node that was killed moving to the one left', async () => {
      await servers[1].kill();
      await expect.poll(async () => (await rows())['web-1'], { timeout: 30_000 }).toBe(PARTITIONS);
      await expect
        .poll(() => page.getByTestId('cluster-nodes').locator('.value').textContent(), {
          timeout: 30_000,
        })
        .toBe('1');
    }, 60_000);
  },
);
