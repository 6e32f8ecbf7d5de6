/**
 * The dashboard's schedules card in a real browser (Debian's chromium, playwright-core): against
 * a `tickwheel serve` with a data directory it lists, creates and deletes recurring schedules;
 * against one on Valkey it shows the schedules any node of the queue made, and deletes them.
 */

import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type ServerProcess } from '../server/process.js';
import { builtPage, hasChromium, launch } from './browser.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startServer as startValkey } from '../../scripts/valkey.mjs';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('dashboard-schedules');

describe.skipIf(!hasChromium)('the schedules card of a server with a data directory', () => {
  let server: ServerProcess;
  let browser: Browser;
  let page: Page;
  let dir: string;

  /** A call to the server; `status` and the JSON body as they came. */
  async function call(
    method: string,
    path: string,
    body?: unknown,
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of several routes
  ): Promise<{ status: number; json: any }> {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, json: await response.json() };
  }

  const card = () => page.getByTestId('schedules');
  const row = (name: string) => card().locator(`tr[data-schedule="${name}"]`);

  /** Fills the form and submits it; `every` in seconds, else `cron`. */
  async function submit(fields: {
    name: string;
    topic: string;
    cron?: string;
    timezone?: string;
    every?: string;
    payload?: string;
  }): Promise<void> {
    const form = page.getByTestId('schedule-form');
    await form.locator('input[name=schedule-name]').fill(fields.name);
    await form.locator('input[name=schedule-topic]').fill(fields.topic);
    if (fields.every !== undefined) {
      await form.locator('select[name=schedule-recurrence]').selectOption('every');
      await form.locator('input[name=schedule-every]').fill(fields.every);
    } else {
      await form.locator('select[name=schedule-recurrence]').selectOption('cron');
      await form.locator('input[name=schedule-cron]').fill(fields.cron ?? '');
      await form.locator('input[name=schedule-timezone]').fill(fields.timezone ?? '');
    }
    await form.locator('textarea[name=schedule-payload]').fill(fields.payload ?? '');
    await form.getByTestId('schedule-save').click();
  }

  beforeAll(async () => {
    await builtPage();
    dir = tempDir();
    server = await startServer(['--dir', dir]);
    ({ browser, page } = await launch());
    await page.goto(server.url);
    await card().getByTestId('schedules-table').waitFor();
  });

  afterAll(async () => {
    await browser?.close();
    await server?.kill();
  });

  it('creates a cron schedule through the form and lists it with its next time in its zone', async () => {
    expect(await card().textContent()).toContain('no recurring schedules yet');
    await submit({
      name: 'nightly-report',
      topic: 'reports',
      cron: '0 12 * * *',
      timezone: 'Asia/Tokyo',
      payload: '{"report": "sales"}',
    });
    await expect
      .poll(() => card().getByTestId('schedules-note').textContent(), { timeout: 15_000 })
      .toBe('created nightly-report');

    const { status, json: schedule } = await call('GET', '/v1/schedules/nightly-report');
    expect(status).toBe(200);
    expect(schedule).toMatchObject({
      topic: 'reports',
      cron: '0 12 * * *',
      timezone: 'Asia/Tokyo',
      payload: { report: 'sales' },
    });
    // Noon in Tokyo is 03:00 UTC, in the next day.
    expect(new Date(schedule.nextAt).getUTCHours()).toBe(3);
    expect(schedule.nextAt).toBeGreaterThan(Date.now());
    expect(schedule.nextAt).toBeLessThanOrEqual(Date.now() + 86_400_000);

    const next = row('nightly-report').locator('[data-field=next]');
    expect(Number(await next.getAttribute('data-at'))).toBe(schedule.nextAt);
    const tokyoDate = new Date(schedule.nextAt + 9 * 3_600_000).toISOString().slice(0, 10);
    expect(await next.textContent()).toContain(`${tokyoDate} 12:00:00 Asia/Tokyo`);
    expect(await next.textContent()).toMatch(/^in \d+ (s|min|h)/);
    const when = await row('nightly-report').locator('[data-field=when]').textContent();
    expect(when).toBe('0 12 * * *Asia/Tokyo');
    expect(await row('nightly-report').locator('[data-field=policy]').textContent()).toBe(
      'catch up latest · overlap allow',
    );
    expect(await row('nightly-report').locator('[data-field=created]').textContent()).toBe(
      String(schedule.created),
    );
  });

  it('creates an interval schedule given in seconds', async () => {
    await submit({ name: 'heartbeat', topic: 'pings', every: '90', payload: '' });
    await row('heartbeat').waitFor();
    const { json: schedule } = await call('GET', '/v1/schedules/heartbeat');
    expect(schedule.everyMs).toBe(90_000);
    expect(schedule.cron).toBeNull();
    expect(schedule.payload).toBeNull();
    expect(await row('heartbeat').locator('[data-field=when]').textContent()).toBe('every 90 s');
    expect(
      Number(await row('heartbeat').locator('[data-field=next]').getAttribute('data-at')),
    ).toBe(schedule.nextAt);
    // Sorted by name, as the server lists them.
    const names = await card()
      .locator('tr[data-schedule]')
      .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-schedule')));
    expect(names).toEqual(['heartbeat', 'nightly-report']);
  });

  it("shows the server's message for a bad cron expression, and creates nothing", async () => {
    const bad = { topic: 'reports', cron: '99 * * * *' };
    const refused = await call('PUT', '/v1/schedules/bad-cron', bad);
    expect(refused.status).toBe(400);
    const message: string = refused.json.error.message;
    expect(message).toMatch(/minute/);

    await submit({ name: 'bad-cron', topic: bad.topic, cron: bad.cron });
    const note = page.getByTestId('schedule-form-note');
    await expect
      .poll(() => note.textContent(), { timeout: 15_000 })
      .toBe(`Could not create bad-cron: ${message}`);
    expect((await call('GET', '/v1/schedules/bad-cron')).status).toBe(404);
    expect(await row('bad-cron').count()).toBe(0);

    // A payload that is not JSON is refused on the page.
    await submit({ name: 'bad-payload', topic: 'reports', cron: '0 * * * *', payload: '{nope' });
    await expect
      .poll(() => note.textContent(), { timeout: 15_000 })
      .toMatch(/^The payload is not JSON: /);
    expect((await call('GET', '/v1/schedules/bad-payload')).status).toBe(404);
  });

  it('lists a schedule made elsewhere at its next poll, and deletes one after asking', async () => {
    const made = await call('PUT', '/v1/schedules/old-export', {
      topic: 'exports',
      everyMs: 3_600_000,
    });
    expect(made.status).toBe(200);
    // The card polls every 10 s.
    await row('old-export').waitFor({ timeout: 25_000 });
    expect(await row('old-export').locator('[data-field=when]').textContent()).toBe('every 1 h');

    // Keeping it leaves it.
    await row('old-export').getByTestId('schedule-delete').click();
    const confirm = card().getByTestId('confirm-delete');
    await confirm.waitFor();
    expect(await confirm.textContent()).toContain('old-export');
    await confirm.getByTestId('confirm-no').click();
    await expect.poll(() => confirm.count(), { timeout: 15_000 }).toBe(0);
    expect((await call('GET', '/v1/schedules/old-export')).status).toBe(200);

    await row('old-export').getByTestId('schedule-delete').click();
    await confirm.getByTestId('confirm-yes').click();
    await expect
      .poll(() => card().getByTestId('schedules-note').textContent(), { timeout: 15_000 })
      .toBe('deleted old-export');
    await expect.poll(() => row('old-export').count(), { timeout: 15_000 }).toBe(0);
    const { json } = await call('GET', '/v1/schedules');
    const names = json.schedules.map((s: { name: string }) => s.name);
    expect(names).not.toContain('old-export');
    // Only that one.
    expect(names).toEqual(['heartbeat', 'nightly-report']);
  });
});

describe.runIf(hasChromium && installed('valkey-server'))(
  'the schedules card of a server on Valkey',
  () => {
    let valkey: { url: string; stop(): Promise<void> };
    let server: ServerProcess;
    let browser: Browser;
    let page: Page;

    beforeAll(async () => {
      await builtPage();
      valkey = await startValkey();
      server = await startServer(
        [
          '--redis',
          valkey.url,
          '--queue',
          'card-schedules',
          '--partitions',
          '2',
          '--durability',
          'async',
        ],
        { timeoutMs: 30_000 },
      );
      ({ browser, page } = await launch());
    }, 90_000);

    afterAll(async () => {
      await browser?.close();
      await server?.kill();
      await valkey?.stop();
    });

    it("lists the queue's schedules, made through any node, and deletes one", async () => {
      const made = await fetch(`${server.url}/v1/schedules/cluster-beat`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ topic: 'beats', everyMs: 3_600_000 }),
      });
      expect(made.status).toBe(200);
      await page.goto(server.url);
      const card = page.getByTestId('schedules');
      const row = card.locator('tr[data-schedule="cluster-beat"]');
      await row.waitFor({ timeout: 25_000 });
      expect(await row.locator('[data-field=when]').textContent()).toBe('every 1 h');
      expect(await page.getByTestId('schedules-unavailable').count()).toBe(0);
      await row.getByTestId('schedule-delete').click();
      await card.getByTestId('confirm-delete').getByTestId('confirm-yes').click();
      await expect.poll(() => row.count(), { timeout: 15_000 }).toBe(0);
      const listed = (await (await fetch(`${server.url}/v1/schedules`)).json()) as {
        schedules: unknown[];
      };
      expect(listed.schedules).toEqual([]);
    });
  },
);
