/**
 * The topic card's upcoming messages in a real browser (Debian's chromium, playwright-core),
 * against a real `tickwheel serve` with a data directory: the table lists a topic's pending
 * messages by due time a page at a time, and its cancel and reschedule change what the server
 * holds.
 */

import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type ServerProcess } from '../server/process.js';
import { builtPage, hasChromium, jsonCalls, launch } from './browser.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('dashboard-upcoming');

/** Messages of the topic: more than one page of the table (20). */
const COUNT = 25;
const MINUTE = 60_000;

const idOf = (i: number) => `u${String(i).padStart(2, '0')}`;

describe.skipIf(!hasChromium)("a topic's upcoming messages in the dashboard", () => {
  let server: ServerProcess;
  let browser: Browser;
  let page: Page;
  /** Due times a day ahead, a minute apart: nothing is delivered while the test runs. */
  const base = Date.now() + 86_400_000;

  const call = jsonCalls(() => server.url);

  const table = () => page.getByTestId('upcoming-messages');
  const shownIds = () =>
    table()
      .locator('tbody tr')
      .evaluateAll((rows) => rows.map((row) => row.getAttribute('data-id')));

  beforeAll(async () => {
    await builtPage();
    server = await startServer(['--dir', tempDir()]);
    // Scheduled from the last due to the first: the table orders by due time.
    for (let i = COUNT - 1; i >= 0; i--) {
      await call('POST', '/v1/topics/upcoming/messages', {
        id: idOf(i),
        payload: { i },
        deliverAt: base + i * MINUTE,
      });
    }
    ({ browser, page } = await launch());
    await page.goto(server.url);
    await page.click('[data-testid=topics] tr[data-topic=upcoming] td:first-child');
    await table().locator('tbody tr').first().waitFor();
  });

  afterAll(async () => {
    await browser?.close();
    await server?.kill();
  });

  it('lists the pending messages by due time, a page at a time', async () => {
    await expect.poll(shownIds).toEqual(Array.from({ length: 20 }, (_, i) => idOf(i)));
    const first = table().locator(`tr[data-id=${idOf(0)}]`);
    expect(await first.locator('[data-field=due]').getAttribute('data-deliver-at')).toBe(
      String(base),
    );
    expect(await first.textContent()).toContain('scheduled');

    await table().getByTestId('upcoming-next').click();
    await expect.poll(shownIds).toEqual([20, 21, 22, 23, 24].map(idOf));
    expect(await table().getByTestId('upcoming-page').textContent()).toContain('page 2');
    expect(await table().getByTestId('upcoming-next').count()).toBe(0);

    await table().getByTestId('upcoming-first').click();
    await expect.poll(shownIds).toEqual(Array.from({ length: 20 }, (_, i) => idOf(i)));
  });

  it('cancels a message: it leaves the table, and the server has it cancelled', async () => {
    const row = table().locator(`tr[data-id=${idOf(3)}]`);
    await row.getByTestId('upcoming-cancel').click();
    await row.getByTestId('upcoming-confirm-cancel').click();
    await expect
      .poll(() => table().getByTestId('upcoming-note').textContent())
      .toBe(`cancelled ${idOf(3)}`);
    await expect.poll(async () => (await shownIds()).includes(idOf(3))).toBe(false);
    expect((await call('GET', `/v1/messages/${idOf(3)}`)).status).toBe('cancelled');
    // The page fills up from the next one.
    expect((await shownIds()).at(-1)).toBe(idOf(20));
  });

  it('reschedules a message: it moves to its new place, and the server has the new due time', async () => {
    const before = Date.now();
    await table().locator('input[name=upcoming-delay-seconds]').fill('172800');
    await table()
      .locator(`tr[data-id=${idOf(1)}]`)
      .getByTestId('upcoming-reschedule')
      .click();
    await expect
      .poll(() => table().getByTestId('upcoming-note').textContent())
      .toBe(`rescheduled ${idOf(1)} to 172800 s from now`);
    const info = await call('GET', `/v1/messages/${idOf(1)}`);
    expect(info.status).toBe('scheduled');
    expect(info.deliverAt).toBeGreaterThanOrEqual(before + 172_800_000);
    // Two days ahead, it is now the last of the topic's messages: off the first page...
    await expect.poll(async () => (await shownIds()).includes(idOf(1))).toBe(false);
    // ...and at the end of the second, with the due time the server stored.
    await table().getByTestId('upcoming-next').click();
    await expect.poll(async () => (await shownIds()).at(-1)).toBe(idOf(1));
    const due = table().locator(`tr[data-id=${idOf(1)}] [data-field=due]`);
    expect(Number(await due.getAttribute('data-deliver-at'))).toBe(info.deliverAt);
  });

  it('reads the page again when messages are scheduled elsewhere (at most every 5 s)', async () => {
    await table().getByTestId('upcoming-first').click();
    await expect.poll(async () => (await shownIds())[0]).toBe(idOf(0));
    // Three more: the topic's live count becomes one it never had in this test.
    for (const [i, id] of ['u-a', 'u-b', 'u-c'].entries()) {
      await call('POST', '/v1/topics/upcoming/messages', {
        id,
        payload: {},
        deliverAt: base - (3 - i) * MINUTE,
      });
    }
    // A later snapshot changes the live count; the page follows within the throttle.
    await expect
      .poll(async () => (await shownIds()).slice(0, 4), { timeout: 20_000 })
      .toEqual(['u-a', 'u-b', 'u-c', idOf(0)]);
  });
});
