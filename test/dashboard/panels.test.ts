/**
 * Smaller parts of the web dashboard, in Debian's chromium against a real `tickwheel serve`
 * (as dashboard.test.ts): the icon browsers ask for, one meaning of "live" on the whole page,
 * and a dead-letter list that says it scrolls. Skipped (with a message) only when
 * /usr/bin/chromium is missing.
 */

import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM } from '../../scripts/chromium.mjs';
import { startServer, type ServerProcess } from '../server/process.js';
import { builtPage, hasChromium, jsonCalls, launch, signIn } from './browser.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('dashboard-panels');

const TOKEN = 'dashboard-panels-token';

if (!hasChromium) {
  console.warn(`${CHROMIUM} is missing: the dashboard panel tests are skipped`);
}

describe.skipIf(!hasChromium)('the dashboard panels in a browser', () => {
  let server: ServerProcess;
  let browser: Browser;
  let page: Page;
  let dir: string;

  const api = jsonCalls(() => server.url, TOKEN);

  /** Makes `count` dead letters in `topic`: one attempt each, received and nacked. */
  async function deadLetters(topic: string, count: number): Promise<string[]> {
    const messages = Array.from({ length: count }, (_, i) => ({
      delayMs: 0,
      maxAttempts: 1,
      payload: { line: i, text: 'a payload long enough to take a line of its own' },
    }));
    const { results } = await api('POST', '/v1/messages:batch', {
      messages: messages.map((m) => ({ topic, ...m })),
    });
    const receipts: string[] = [];
    while (receipts.length < count) {
      const { messages: got } = await api('POST', `/v1/topics/${topic}/receive`, {
        max: count - receipts.length,
        waitMs: 5000,
      });
      receipts.push(...got.map((m: { receipt: string }) => m.receipt));
    }
    await api('POST', '/v1/nack', { receipts, reason: 'refused by the test' });
    // Dead once the nack is answered, as a GET of each confirms.
    const ids = (results as Array<{ id: string }>).map((r) => r.id);
    for (const id of ids) expect((await api('GET', `/v1/messages/${id}`)).status).toBe('dead');
    return ids;
  }

  async function openTopic(topic: string): Promise<void> {
    await page.fill('input[name=topic]', topic);
    await page.click('input[name=topic] ~ button');
    await expect
      .poll(() => page.getByTestId('topic-details').locator('h2').textContent(), {
        timeout: 15_000,
      })
      .toContain(topic);
  }

  beforeAll(async () => {
    await builtPage();
    dir = tempDir();
    server = await startServer(['--dir', dir, '--token', TOKEN]);
    ({ browser, page } = await launch());
    await signIn(page, server.url, TOKEN);
  });

  afterAll(async () => {
    await browser?.close();
    await server?.kill();
  });

  it('serves /favicon.ico, an icon the browser draws, without a token', async () => {
    const response = await fetch(`${server.url}/favicon.ico`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('image/x-icon');
    const bytes = Buffer.from(await response.arrayBuffer());
    // ICONDIR: reserved 0, type 1 (icon), one image.
    expect([...bytes.subarray(0, 6)]).toEqual([0, 0, 1, 0, 1, 0]);
    // A string: this runs in the page, whose DOM types the tests' tsconfig does not have.
    const size = await page.evaluate(`(async () => {
      const image = new Image();
      image.src = '/favicon.ico';
      await image.decode();
      return [image.naturalWidth, image.naturalHeight];
    })()`);
    expect(size).toEqual([32, 32]);
  });

  it('counts "live" the same in the top tile and the topic card, dead letters apart', async () => {
    await api('POST', '/v1/topics/live-a/messages', { delayMs: 3_600_000, payload: 1 });
    await api('POST', '/v1/topics/live-a/messages', { delayMs: 45_000, payload: 2 });
    await deadLetters('live-a', 1);
    await api('POST', '/v1/topics/live-b/messages', { delayMs: 90_000, payload: 3 });
    const dead = page.getByTestId('total-dead').locator('.value');
    await expect.poll(() => dead.textContent(), { timeout: 15_000 }).toBe('1');
    // 3 scheduled, 1 dead: the server's totals.live counts 4 (it includes dead letters).
    const total = page.getByTestId('total-live');
    await expect.poll(() => total.locator('.value').textContent(), { timeout: 15_000 }).toBe('3');

    await openTopic('live-a');
    const card = page.getByTestId('topic-details');
    await expect
      .poll(() => card.locator('[data-field=live] .value').textContent(), { timeout: 15_000 })
      .toBe('2');
    expect(await card.locator('[data-field=dead] .value').textContent()).toBe('1');
    // One meaning, said on both.
    const meaning = await total.getAttribute('title');
    expect(meaning).toMatch(/scheduled, ready or in flight.*dead letters not included/);
    expect(await card.locator('[data-field=live]').getAttribute('title')).toBe(meaning);
  });

  it('shows how many dead letters it lists and that the list scrolls', async () => {
    const ids = await deadLetters('overflow', 15);
    await openTopic('overflow');
    const card = page.getByTestId('topic-details');
    const count = card.getByTestId('dead-count');
    await expect
      .poll(() => count.textContent(), { timeout: 15_000 })
      .toBe('showing 15 of 15 dead letters · the list scrolls');
    const list = card.locator('.dead-list');
    const box = await list.evaluate((element) => ({
      scrollHeight: element.scrollHeight,
      clientHeight: element.clientHeight,
      overflowY: element.computedStyleMap().get('overflow-y')?.toString(),
    }));
    expect(box.overflowY).toBe('auto');
    expect(box.scrollHeight).toBeGreaterThan(box.clientHeight);
    const more = card.getByTestId('dead-more');
    expect(await more.textContent()).toMatch(/^↓ \d+ more below: scroll the list$/);
    expect(await card.locator('.dead-scroll.more').count()).toBe(1);
    // The shadow along the bottom edge is drawn.
    const shadow = await page.evaluate(
      `getComputedStyle(document.querySelector('.dead-scroll'), '::after').backgroundImage`,
    );
    expect(shadow).toContain('linear-gradient');

    // Scrolled to its end, nothing is left below: no shadow, no line, the count stays.
    await list.evaluate((element) => element.scrollTo({ top: element.scrollHeight }));
    await expect.poll(() => more.count(), { timeout: 15_000 }).toBe(0);
    expect(await card.locator('.dead-scroll.more').count()).toBe(0);
    expect(await count.textContent()).toBe('showing 15 of 15 dead letters');
    expect(await card.locator(`[data-id="${ids[14]}"]`).isVisible()).toBe(true);
  });
});
