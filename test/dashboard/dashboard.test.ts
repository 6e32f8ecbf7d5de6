/**
 * The web dashboard in a real browser: Debian's chromium driven by playwright-core, against a
 * real `tickwheel serve` with a token. Skipped (with a message) only when /usr/bin/chromium is
 * missing; .ci/run installs it.
 *
 * docs/dashboard.png comes from scripts/dashboard-screenshot.mjs (the dashboard under load).
 */

import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM } from '../../scripts/chromium.mjs';
import { startServer, type ServerProcess } from '../server/process.js';
import { builtPage, hasChromium, jsonCalls, launch, signIn } from './browser.js';
import { verifyPush } from '../../src/protocol/push-signature.js';
import { startReceiver } from '../queue/push-receiver.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('dashboard');

const TOKEN = 'dashboard-test-token';

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

  const api = jsonCalls(() => server.url, TOKEN);

  /**
   * Each test after the first starts signed in, whatever the first did: a failure there must
   * not take the others down with it.
   */
  async function signedIn(): Promise<void> {
    if ((await page.getByTestId('topics').count()) > 0) return;
    await signIn(page, server.url, TOKEN);
  }

  beforeAll(async () => {
    await builtPage();
    dir = tempDir();
    server = await startServer(['--dir', dir, '--token', TOKEN, '--push-allow', '127.0.0.1']);
    ({ browser, page } = await launch());
  });

  afterAll(async () => {
    await browser?.close();
    await server?.kill();
  });

  it('says a wrong token is wrong and asks again; the right one is kept in sessionStorage', async () => {
    await page.goto(server.url);
    const form = page.getByTestId('token-form');
    await form.waitFor();
    await page.fill('input[name=token]', 'not-the-token');
    await page.click('[data-testid=token-form] button');
    await expect
      .poll(() => page.getByTestId('token-error').textContent(), { timeout: 15_000 })
      .toMatch(/not accepted/);
    // Asked again: the form is there, empty, and the wrong token is not kept.
    expect(await form.isVisible()).toBe(true);
    expect(await page.inputValue('input[name=token]')).toBe('');
    expect(await page.evaluate('sessionStorage.getItem("tickwheel.token")')).toBeNull();
    expect(await page.locator('header').textContent()).not.toContain('connecting');

    await page.fill('input[name=token]', TOKEN);
    await page.click('[data-testid=token-form] button');
    await page.getByTestId('topics').waitFor();
    expect(await page.evaluate('sessionStorage.getItem("tickwheel.token")')).toBe(TOKEN);
    await expect.poll(() => form.count(), { timeout: 15_000 }).toBe(0);
  });

  it('draws the charts of a fresh server over the last minute, with an empty-state note', async () => {
    await signedIn();
    for (const name of ['rates', 'lateness']) {
      const chart = page.getByTestId(`chart-${name}`);
      // Two polls: the axis has one point, then two.
      await expect
        .poll(() => chart.getAttribute('data-points'), { timeout: 15_000 })
        .toMatch(/^[2-9]|\d\d/);
      const from = Number(await chart.getAttribute('data-x-from'));
      const to = Number(await chart.getAttribute('data-x-to'));
      const now = Date.now();
      expect(to).toBeGreaterThan(now - 60_000);
      expect(to).toBeLessThan(now + 60_000);
      expect(to - from).toBeGreaterThanOrEqual(30_000);
      expect(to - from).toBeLessThanOrEqual(15 * 60_000);
      const labels = (await chart.getAttribute('data-x-labels')) ?? '';
      expect(labels).not.toBe('');
      // The axis of an empty chart used to span years (2027-2029) around the only point.
      expect(labels).not.toMatch(/\b(19|20)\d\d\b/);
    }
    expect(await page.getByTestId('chart-lateness').locator('.chart-empty').textContent()).toMatch(
      /no deliveries yet/,
    );
  });

  it('shows the topic counters; clicking a topic shows its details', async () => {
    await signedIn();
    for (let i = 0; i < 3; i++) {
      await api('POST', '/v1/topics/emails/messages', { delayMs: 45_000, payload: { n: i } });
    }
    await api('POST', '/v1/topics/sms/messages', { delayMs: 30_000, payload: 'hello' });

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
    // The charts have data now: no empty-state note on the rates.
    await expect
      .poll(() => page.getByTestId('chart-rates').locator('.chart-empty').count(), {
        timeout: 15_000,
      })
      .toBe(0);

    await page.click('[data-testid=topics] tr[data-topic=emails] td:first-child');
    const details = page.getByTestId('topic-details');
    await details.waitFor();
    expect(await details.locator('h2').textContent()).toContain('emails');
    await expect
      .poll(() => details.locator('[data-field=scheduled] .value').textContent(), {
        timeout: 15_000,
      })
      .toBe('3');
    expect(await details.locator('[data-field=dead] .value').textContent()).toBe('0');
    await expect
      .poll(() => details.getByTestId('dead-letters').textContent(), { timeout: 15_000 })
      .toContain('no dead letters');

    await page.click('[data-testid=topics] tr[data-topic=sms] td:first-child');
    await expect
      .poll(() => details.locator('h2').textContent(), { timeout: 15_000 })
      .toContain('sms');
    await expect
      .poll(() => details.locator('[data-field=scheduled] .value').textContent(), {
        timeout: 15_000,
      })
      .toBe('1');
  });

  it('refuses a bad topic name on the page with a plain message, and opens a good one', async () => {
    await signedIn();
    await page.fill('input[name=topic]', 'bad topic!');
    await page.click('input[name=topic] ~ button');
    const note = page.getByTestId('topic-note');
    await expect
      .poll(() => note.textContent(), { timeout: 15_000 })
      .toBe(
        "A topic name is 1-128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit.",
      );
    await page.fill('input[name=topic]', 'emails');
    await page.click('input[name=topic] ~ button');
    await expect.poll(() => note.count(), { timeout: 15_000 }).toBe(0);
    await expect
      .poll(() => page.getByTestId('topic-details').locator('h2').textContent(), {
        timeout: 15_000,
      })
      .toContain('emails');
  });

  it('shows server errors by their message, and refuses a bad message id on the page', async () => {
    await signedIn();
    await page.fill('input[name=message-id]', 'no-such-message');
    await page.click('input[name=message-id] ~ button');
    const note = page.getByTestId('message-note');
    await expect
      .poll(() => note.textContent(), { timeout: 15_000 })
      .toBe('no message with id no-such-message');
    await page.fill('input[name=message-id]', 'a b');
    await page.click('input[name=message-id] ~ button');
    await expect
      .poll(() => note.textContent(), { timeout: 15_000 })
      .toBe("A message id is 1-200 letters, digits, '.', '_', ':', '@' or '-'.");
  });

  it('looks a message up with its payload, reschedules it, and cancels it after asking', async () => {
    await signedIn();
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

    // Cancel asks first; keeping the message leaves it scheduled.
    await page.getByTestId('cancel').click();
    const confirm = page.getByTestId('confirm-cancel');
    await confirm.waitFor();
    expect(await confirm.textContent()).toContain(id);
    await confirm.getByTestId('confirm-no').click();
    await expect.poll(() => confirm.count(), { timeout: 15_000 }).toBe(0);
    expect((await api('GET', `/v1/messages/${id}`)).status).toBe('scheduled');
    expect(await page.getByTestId('message-status').textContent()).toBe('scheduled');

    await page.getByTestId('cancel').click();
    await confirm.getByTestId('confirm-yes').click();
    await expect
      .poll(() => page.getByTestId('message-status').textContent(), { timeout: 15_000 })
      .toBe('cancelled');
    expect((await api('GET', `/v1/messages/${id}`)).status).toBe('cancelled');
    // Nothing applies to a cancelled message any more.
    expect(await page.getByTestId('cancel').count()).toBe(0);
    expect(await page.getByTestId('reschedule').count()).toBe(0);
    expect(await confirm.count()).toBe(0);
    expect(await page.getByTestId('message-note').textContent()).toBe('cancelled');
  });

  it('lists the dead letters of a topic with their payloads, and requeues one', async () => {
    await signedIn();
    const { id } = await api('POST', '/v1/topics/billing/messages', {
      delayMs: 0,
      maxAttempts: 1,
      payload: { invoice: 9 },
    });
    const received = await api('POST', '/v1/topics/billing/receive', { max: 1, waitMs: 5000 });
    expect(received.messages[0].id).toBe(id);
    await api('POST', '/v1/nack', {
      receipts: [received.messages[0].receipt],
      reason: 'card declined by the bank',
    });
    await expect
      .poll(async () => (await api('GET', `/v1/messages/${id}`)).status, { timeout: 15_000 })
      .toBe('dead');

    const deadCount = page.locator('[data-testid=topics] tr[data-topic=billing] [data-field=dead]');
    await expect.poll(() => deadCount.textContent(), { timeout: 15_000 }).toBe('1');

    // A dead letter can be cancelled or requeued, not rescheduled.
    await page.fill('input[name=message-id]', id);
    await page.click('input[name=message-id] ~ button');
    await expect
      .poll(() => page.getByTestId('message-status').textContent(), { timeout: 15_000 })
      .toBe('dead');
    expect(await page.getByTestId('reschedule').count()).toBe(0);
    expect(await page.getByTestId('cancel').count()).toBe(1);
    expect(await page.locator('[data-testid=message] .reason-text').textContent()).toBe(
      'card declined by the bank',
    );

    await page.click('[data-testid=topics] tr[data-topic=billing] td:first-child');
    const row = page.locator(`[data-testid=dead-letters] [data-id="${id}"]`);
    await row.waitFor();
    await expect
      .poll(() => row.locator('.preview').textContent(), { timeout: 15_000 })
      .toBe('{"invoice":9}');
    expect(await row.locator('.reason').textContent()).toBe('reason: card declined by the bank');
    await row.getByTestId('requeue').click();
    await expect
      .poll(() => page.getByTestId('dead-note').textContent(), { timeout: 15_000 })
      .toBe(`requeued ${id}`);
    await expect.poll(() => row.count(), { timeout: 15_000 }).toBe(0);
    expect(['scheduled', 'ready']).toContain((await api('GET', `/v1/messages/${id}`)).status);
    await expect.poll(() => deadCount.textContent(), { timeout: 15_000 }).toBe('0');
  });

  it('pauses and resumes a topic, and sets and removes its rate limit', async () => {
    await signedIn();
    await api('POST', '/v1/topics/reports/messages', { payload: { n: 1 } });
    await page.fill('input[name=topic]', 'reports');
    await page.click('input[name=topic] ~ button');
    const settings = page.getByTestId('topic-settings');
    const state = settings.getByTestId('topic-state');
    await expect.poll(() => state.textContent(), { timeout: 15_000 }).toBe('delivering');
    await settings.getByTestId('pause').click();
    await expect.poll(() => state.textContent(), { timeout: 15_000 }).toBe('paused');
    // The server agrees, and delivers nothing of the topic.
    expect((await api('GET', '/v1/topics/reports')).paused).toBe(true);
    expect((await api('POST', '/v1/topics/reports/receive', { max: 1 })).messages).toEqual([]);

    await settings.getByTestId('rate-input').fill('fast');
    await settings.getByTestId('set-rate').click();
    await expect
      .poll(() => settings.getByTestId('settings-note').textContent(), { timeout: 15_000 })
      .toBe('give deliveries per second, a number above 0');
    await settings.getByTestId('rate-input').fill('2.5');
    await settings.getByTestId('set-rate').click();
    await expect
      .poll(() => settings.getByTestId('rate-limit').textContent(), { timeout: 15_000 })
      .toBe('at most 2.5 a second (bursts of 3)');
    expect((await api('GET', '/v1/topics/reports')).rateLimit).toEqual({
      perSecond: 2.5,
      burst: 3,
    });
    // A burst of its own; a burst that is not a whole number of deliveries is refused here.
    await settings.getByTestId('burst-input').fill('1.5');
    await settings.getByTestId('set-rate').click();
    await expect
      .poll(() => settings.getByTestId('settings-note').textContent(), { timeout: 15_000 })
      .toBe('give the burst as a whole number of deliveries, at least 1, or leave it empty');
    await settings.getByTestId('burst-input').fill('40');
    await settings.getByTestId('set-rate').click();
    await expect
      .poll(() => settings.getByTestId('rate-limit').textContent(), { timeout: 15_000 })
      .toBe('at most 2.5 a second (bursts of 40)');
    expect((await api('GET', '/v1/topics/reports')).rateLimit).toEqual({
      perSecond: 2.5,
      burst: 40,
    });
    await settings.getByTestId('remove-rate').click();
    await expect
      .poll(() => settings.getByTestId('rate-limit').textContent(), { timeout: 15_000 })
      .toBe('no rate limit');
    await settings.getByTestId('resume').click();
    await expect.poll(() => state.textContent(), { timeout: 15_000 }).toBe('delivering');
    const received = await api('POST', '/v1/topics/reports/receive', { max: 1, waitMs: 5_000 });
    expect(received.messages.map((m: { payload: unknown }) => m.payload)).toEqual([{ n: 1 }]);
  });

  it("sets a topic's push target, shows it without its secret, and removes it", async () => {
    const receiver = await startReceiver(() => ({ status: 204 }));
    try {
      await signedIn();
      await page.fill('input[name=topic]', 'hooks');
      await page.click('input[name=topic] ~ button');
      const settings = page.getByTestId('topic-settings');
      const target = settings.getByTestId('push-target');
      await expect
        .poll(() => target.textContent(), { timeout: 15_000 })
        .toBe('not pushed: consumers receive its messages');
      // A secret that is too short: the server's error shows, nothing is set.
      await settings.getByTestId('push-url').fill(`${receiver.url}/in`);
      await settings.getByTestId('push-secret').fill('short');
      await settings.getByTestId('set-push').click();
      await expect
        .poll(() => settings.getByTestId('settings-note').textContent(), { timeout: 15_000 })
        .toMatch(/^Could not push hooks to .*secret/);
      expect((await api('GET', '/v1/topics/hooks')).push).toBeNull();
      const secret = 'dashboard-push-secret-0123456789';
      await settings.getByTestId('push-secret').fill(secret);
      await settings.getByTestId('set-push').click();
      await expect
        .poll(() => target.textContent(), { timeout: 15_000 })
        .toBe(`pushed: POST ${receiver.url}/in, 10 at once, timeout 10,000 ms`);
      // The secret left the form and is nowhere on the page.
      expect(await settings.getByTestId('push-secret').inputValue()).toBe('');
      expect(await page.content()).not.toContain(secret);
      // The server pushes the topic's messages to the receiver, signed with that secret.
      const { id } = await api('POST', '/v1/topics/hooks/messages', { payload: { n: 1 } });
      await receiver.waitFor(1, 15_000);
      expect(verifyPush(receiver.requests[0], { secret })).toMatchObject({ id, topic: 'hooks' });
      await settings.getByTestId('remove-push').click();
      await expect
        .poll(() => target.textContent(), { timeout: 15_000 })
        .toBe('not pushed: consumers receive its messages');
      expect((await api('GET', '/v1/topics/hooks')).push).toBeNull();
    } finally {
      await receiver.close();
    }
  });

  it('keeps up with a few thousand messages across topics', async () => {
    await signedIn();
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

  it('shows the 100 largest topics and sums the others in one row', async () => {
    await signedIn();
    const messages = Array.from({ length: 130 }, (_, i) => ({
      topic: `tenant-${i}`,
      delayMs: 3_600_000,
      payload: i,
    }));
    await api('POST', '/v1/messages:batch', { messages });
    const others = page.getByTestId('other-topics');
    // The page and the server agree once the page has drawn a snapshot after the batch.
    await expect
      .poll(
        async () => {
          const { topics, topicCount } = (await api('GET', '/v1/dashboard')) as {
            topics: object;
            topicCount: number;
          };
          const shown = await page.locator('[data-testid=topics] tr[data-topic]').count();
          const text =
            (await others.count()) > 0 ? await others.locator('td').first().textContent() : '';
          return {
            shown,
            named: Object.keys(topics).length,
            text,
            expected: `${topicCount - 100} more topics`,
          };
        },
        { timeout: 15_000 },
      )
      .toEqual({
        shown: 100,
        named: 100,
        text: expect.stringMatching(/^[3-9]\d more topics$/),
        expected: expect.any(String),
      });
    const last = await others.locator('td').first().textContent();
    const { topicCount } = (await api('GET', '/v1/dashboard')) as { topicCount: number };
    expect(last).toBe(`${topicCount - 100} more topics`);
  });

  it('says the server is unreachable while it is down, and recovers when it is back', async () => {
    const otherDir = tempDir('dashboard-restart');
    const other = await browser.newPage();
    let second: ServerProcess | undefined;
    let first: ServerProcess | undefined;
    try {
      first = await startServer(['--dir', otherDir]);
      const port = new URL(first.url).port;
      await other.goto(first.url);
      await other.getByTestId('topics').waitFor();
      expect(await other.locator('header').textContent()).toMatch(/up \d+ s/);

      await first.kill();
      const banner = other.getByTestId('connection-error');
      await expect
        .poll(() => banner.textContent(), { timeout: 15_000 })
        .toMatch(/cannot reach the tickwheel server/i);
      expect(await other.locator('header').textContent()).toMatch(/unreachable/);

      second = await startServer(['--dir', otherDir, '--port', port]);
      await fetch(`${second.url}/v1/topics/after-restart/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ delayMs: 60_000, payload: 1 }),
      });
      await expect.poll(() => banner.count(), { timeout: 20_000 }).toBe(0);
      await other.locator('[data-testid=topics] tr[data-topic=after-restart]').waitFor();
      expect(await other.locator('header').textContent()).not.toMatch(/unreachable/);
    } finally {
      await other.close();
      await first?.kill();
      await second?.kill();
    }
  });
});
