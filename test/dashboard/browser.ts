/**
 * What the dashboard's browser tests share: the built page, Debian's chromium with one page open
 * (playwright-core), and JSON calls to the `tickwheel serve` under test.
 */

import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ARGS } from '../../scripts/chromium.mjs';

export const hasChromium = existsSync(CHROMIUM);

const BUILT_PAGE = fileURLToPath(new URL('../../dist/dashboard/index.html', import.meta.url));

/** Builds the page when dist/ lacks it: `npm run build` builds it, a bare `tsc` does not. */
export async function builtPage(): Promise<void> {
  if (existsSync(BUILT_PAGE)) return;
  const { build } = await import('vite');
  await build({
    configFile: fileURLToPath(new URL('../../dashboard/vite.config.ts', import.meta.url)),
    logLevel: 'warn',
  });
}

/** Headless chromium with one page, 1280 px wide; its waits give up after `timeoutMs`. */
export async function launch(
  options: { height?: number; timeoutMs?: number } = {},
): Promise<{ browser: Browser; page: Page }> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: options.height ?? 1100 } });
  page.setDefaultTimeout(options.timeoutMs ?? 15_000);
  return { browser, page };
}

/**
 * A caller of the server's JSON routes, with `token` as its bearer token when given: it returns
 * the answer's body, and throws with the status and body when the server refused.
 * `url` is read at each call, since the server starts after the test file has loaded.
 */
export function jsonCalls(url: () => string, token?: string) {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of several routes
  return async (method: string, path: string, body?: unknown): Promise<any> => {
    const response = await fetch(`${url()}${path}`, {
      method,
      headers: {
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await response.json();
    if (!response.ok) {
      throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(json)}`);
    }
    return json;
  };
}

/** Opens the dashboard at `url` signed in with `token`, and waits for its topics table. */
export async function signIn(page: Page, url: string, token: string): Promise<void> {
  await page.goto(url);
  await page.evaluate(`sessionStorage.setItem('tickwheel.token', ${JSON.stringify(token)})`);
  await page.reload();
  await page.getByTestId('topics').waitFor();
}
