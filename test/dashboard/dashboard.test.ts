/**
 * The web dashboard in a real browser: Debian's chromium driven by playwright-core, against a
 * real `tickwheel serve` with a token. Skipped (with a message) only when /usr/bin/chromium is
 * missing; .ci/run installs it.
 *
 * docs/dashboard.png comes from scripts/dashboard-screenshot.mjs (the dashboard under load).
 */

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, CHROMIUM_ARGS } from '../../scripts/chromium.mjs';
import { startServer, type ServerProcess } from '../server/process.js';

const TOKEN = 'dashboard-test-token';
const BUILT_PAGE = fileURLToPath(new URL('../../dist/dashboard/index.html', import.meta.url));
const hasChromium = existsSync(CHROMIUM);

if (!hasChromium) {
  console.warn(
    `${CHROMIUM} is missing: the dashboard browser tests are skipped (apt-get install chromium)`,
  );
}

describe.skipIf(!hasChromium)('the web dashboard in a browser', () => {
  let server: ServerProcess;
  let browser: Browser;
  let page: Page;
  let dir: string;

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of several routes
  async function api(method: string, path: string, body?: unknown): Promise<any> {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${TOKEN}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await response.json();
    if (!response.ok)
      throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(json)}`);
    return json;
  }

  beforeAll(async () => {
    if (!existsSync(BUILT_PAGE)) {
      // `npm run build` builds the page; a bare `vitest` run after `tsc` alone builds it here.
      const { build } = await import('vite');
      await build({
        configFile: fileURLToPath(new URL('../../dashboard/vite.config.ts', import.meta.url)),
        logLevel: 'warn',
      });
    }
    dir = mkdtempSync(join(tmpdir(), 'tickwheel-dashboard-'));
    server = await startServer(['--dir', dir, '--token', TOKEN]);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 1100 } });
    page.setDefaultTimeout(15_000);
  });

  afterAll(async () => {
    await browser?.close();
    await server?.kill();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('asks for the token, keeps it in sessionStorage, and shows the topic counters', async () => {
    for (let i = 0; i < 3; i++) {
      await api('POST', '/v1/topics/emails/messages', { delayMs: 45_000, payload: { n: i } });
    }
    await api('POST', '/v1/topics/sms/messages', { delayMs: 30_000, payload: 'hello' });

    await page.goto(server.url);
    await page.getByTestId('token-form').waitFor();
    await page.fill('input[name=token]', TOKEN);
    await page.click('[data-testid=token-form] button');
    expect(await page.evaluate('sessionStorage.getItem("tickwheel.token")')).toBe(TOKEN);

    const emails = page.locator(
      '[data-testid=topics] tr[data-topic=emails] [data-field=scheduled]',
    );
    await expect.poll(() => emails.textContent(), { timeout: 15_000 }).toBe('3');
    const sms = page.locator('[data-testid=topics] tr[data-topic=sms] [data-field=scheduled]');
    await expect.poll(() => sms.textContent(), { timeout: 15_000 }).toBe('1');
    // The wheel shows occupied slots, the timeline counts them in the 10-60 s bucket.
    await expect
      .poll(() => page.locator('[data-testid=wheel] .slot[style]').count(), { timeout: 15_000 })
      .toBeGreaterThan(0);
    const nearBucket = page.locator('[data-testid=upcoming] [data-bucket="10-60 s"] .bar-count');
    await expect.poll(() => nearBucket.textContent(), { timeout: 15_000 }).toBe('4');
  });

  it('looks a message up with its payload, reschedules it and cancels it', async () => {
    const { id } = await api('POST', '/v1/topics/orders/messages', {
      delayMs: 50_000,
      payload: { order: 'A-17', total: 42 },
    });
    await page.fill('input[name=message-id]', id);
    await page.click('input[name=message-id] ~ button');
    await expect
      .poll(() => page.getByTestId('message-status').textContent(), { timeout: 15_000 })
      .toBe('scheduled');
    // The payload preview is a second request; it may land after the status.
    await expect
      .poll(() => page.getByTestId('message').textContent(), { timeout: 15_000 })
      .toContain('"order":"A-17"');

    await page.fill('input[name=delay-seconds]', '120');
    await page.getByTestId('reschedule').click();
    await expect
      .poll(() => page.getByTestId('message-note').textContent(), { timeout: 15_000 })
      .toBe('rescheduled');
    const rescheduled = await api('GET', `/v1/messages/${id}`);
    expect(rescheduled.deliverAt).toBeGreaterThan(Date.now() + 100_000);

    await page.getByTestId('cancel').click();
    await expect
      .poll(() => page.getByTestId('message-status').textContent(), { timeout: 15_000 })
      .toBe('cancelled');
    expect((await api('GET', `/v1/messages/${id}`)).status).toBe('cancelled');
  });

  it('lists the dead letters of a topic and requeues one', async () => {
    const { id } = await api('POST', '/v1/topics/billing/messages', {
      delayMs: 0,
      maxAttempts: 1,
      payload: { invoice: 9 },
    });
    const received = await api('POST', '/v1/topics/billing/receive', { max: 1, waitMs: 5000 });
    expect(received.messages[0].id).toBe(id);
    await api('POST', '/v1/nack', { receipts: [received.messages[0].receipt] });
    await expect
      .poll(async () => (await api('GET', `/v1/messages/${id}`)).status, { timeout: 15_000 })
      .toBe('dead');

    const deadCount = page.locator('[data-testid=topics] tr[data-topic=billing] [data-field=dead]');
    await expect.poll(() => deadCount.textContent(), { timeout: 15_000 }).toBe('1');

    await page.fill('input[name=dead-topic]', 'billing');
    await page.click('input[name=dead-topic] ~ button');
    const row = page.locator(`[data-testid=dead-letters] tr[data-id="${id}"]`);
    await row.waitFor();
    await row.getByTestId('requeue').click();
    await expect
      .poll(() => page.getByTestId('dead-note').textContent(), { timeout: 15_000 })
      .toBe(`requeued ${id}`);
    await expect.poll(() => row.count(), { timeout: 15_000 }).toBe(0);
    expect(['scheduled', 'ready']).toContain((await api('GET', `/v1/messages/${id}`)).status);
    await expect.poll(() => deadCount.textContent(), { timeout: 15_000 }).toBe('0');
  });

  it('keeps up with a few thousand messages across topics', async () => {
    const topics = ['emails', 'sms', 'orders', 'billing', 'webhooks'];
    for (let batch = 0; batch < 12; batch++) {
      const messages = Array.from({ length: 250 }, (_, i) => ({
        topic: topics[(batch * 250 + i) % topics.length],
        // Spread over the next minute (in the wheel), and one in ten 2-8 hours ahead (on disk).
        delayMs: i % 10 === 0 ? 3_600_000 * (2 + (i % 7)) : 2_000 + ((i * 7919) % 57_000),
        payload: { batch, i },
      }));
      await api('POST', '/v1/messages:batch', { messages });
    }
    const live = page.getByTestId('total-live').locator('.value');
    await expect
      .poll(async () => Number((await live.textContent())?.replace(/,/g, '')), { timeout: 15_000 })
      .toBeGreaterThanOrEqual(3000);
    // The messages hours ahead are beyond the in-memory horizon, and on the timeline all the same.
    const hoursAhead = page.locator('[data-testid=upcoming] [data-bucket="1-24 h"] .bar-count');
    await expect.poll(() => hoursAhead.textContent(), { timeout: 15_000 }).toBe('300');
  });
});
