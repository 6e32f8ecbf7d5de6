#!/usr/bin/env node
/**
 * Takes docs/dashboard.png: the web dashboard of a real `tickwheel serve` under load.
 *
 *   npm run build
 *   node scripts/dashboard-screenshot.mjs [--out docs/dashboard.png] [--seconds 20]
 *
 * Starts dist/cli/main.js serve on a fresh temporary directory and a free port, schedules a few
 * thousand messages across five topics (most due within the next minute, some minutes, hours
 * and days ahead), and runs a consumer per topic with the client SDK (dist/client) that acks
 * most messages and fails a few: those have maxAttempts 2, so they end in the dead letters.
 * `webhooks` has a slow consumer, so messages wait there as ready. A steady trickle of new
 * schedules keeps deliveries flowing while the dashboard is open in headless chromium
 * (playwright-core driving /usr/bin/chromium), so the rate and lateness charts have `--seconds`
 * of history when the screenshot is taken. Then everything is shut down and the directory
 * removed.
 *
 * Exit status: 0 with the screenshot written, 1 otherwise.
 */

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import process from 'node:process';
import { clearInterval, clearTimeout, setInterval, setTimeout } from 'node:timers';
import { setTimeout as sleep } from 'node:timers/promises';
import { URL, fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { seededRandom } from '../test/support/random.mjs';
import { CHROMIUM, CHROMIUM_ARGS } from './chromium.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(ROOT, 'dist/cli/main.js');
const CLIENT = join(ROOT, 'dist/client/index.js');
const PAGE = join(ROOT, 'dist/dashboard/index.html');
const VIEWPORT = { width: 1280, height: 1000 };

/** Topics with their share of the traffic. */
const TOPICS = [
  ['emails', 0.35],
  ['orders', 0.25],
  ['webhooks', 0.2],
  ['sms', 0.12],
  ['billing', 0.08],
];
const SEED_MESSAGES = 3000;
/** Share of messages whose handler fails: with maxAttempts 2 they end as dead letters. */
const FAILING = 0.04;
/** New schedules per second during the run, spread over the topics. */
const TRICKLE_PER_SECOND = 150;

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const { values: options } = parseArgs({
  options: {
    out: { type: 'string', default: join(ROOT, 'docs/dashboard.png') },
    seconds: { type: 'string', default: '20' },
  },
});
const out = resolve(options.out);
const seconds = Number(options.seconds);
if (!Number.isFinite(seconds) || seconds < 1) {
  console.error(`--seconds must be a number of seconds, at least 1; got ${options.seconds}`);
  process.exit(1);
}

for (const [path, what] of [
  [CLI, 'the CLI'],
  [CLIENT, 'the client SDK'],
  [PAGE, 'the dashboard'],
]) {
  if (!existsSync(path)) {
    console.error(`${relative(ROOT, path)} is missing: run \`npm run build\` first (${what})`);
    process.exit(1);
  }
}
if (!existsSync(CHROMIUM)) {
  console.error(`${CHROMIUM} is missing (apt-get install chromium)`);
  process.exit(1);
}

const { TickwheelClient } = await import(CLIENT);
const { chromium } = await import('playwright-core');

// The same picture on every run.
const random = seededRandom(7700);
const between = (low, high) => low + random() * (high - low);

function pickTopic() {
  let roll = random();
  for (const [topic, share] of TOPICS) {
    roll -= share;
    if (roll < 0) return topic;
  }
  return TOPICS[0][0];
}

/** Seed messages: most due within the minute, some minutes, hours and days ahead. */
function seedDelay() {
  const roll = random();
  if (roll < 0.6) return between(SECOND, MINUTE);
  if (roll < 0.72) return between(2 * MINUTE, 55 * MINUTE);
  if (roll < 0.9) return between(HOUR, 23 * HOUR);
  return between(DAY, 14 * DAY);
}

/** The trickle: mostly due within half a minute, so it is delivered during the run. */
function trickleDelay() {
  return random() < 0.9 ? between(200, 30 * SECOND) : seedDelay();
}

function message(n, delayMs) {
  const topic = pickTopic();
  const fail = random() < FAILING;
  return {
    topic,
    payload: { n, topic, fail, note: fail ? 'the handler throws: dead after 2 attempts' : 'ok' },
    delayMs: Math.round(delayMs),
    ...(fail ? { maxAttempts: 2, backoff: { type: 'fixed', delayMs: 500 } } : {}),
  };
}

/** Starts `tickwheel serve --port 0` and resolves with its URL once it is listening. */
function startServer(dir) {
  const child = spawn(process.execPath, [CLI, 'serve', '--dir', dir, '--port', '0'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise((resolveExit) => child.on('exit', resolveExit));
  const url = new Promise((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 15_000);
    const onData = (chunk) => {
      output += chunk;
      const match = /tickwheel listening on (http:\/\/[^\s"]+)/.exec(output);
      if (match === null) return;
      clearTimeout(timer);
      resolveUrl(match[1]);
    };
    child.stdout.setEncoding('utf8').on('data', onData);
    child.stderr.setEncoding('utf8').on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code}) before listening:\n${output}`));
    });
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  return { url, stop };
}

const dir = mkdtempSync(join(tmpdir(), 'tickwheel-screenshot-'));
const server = startServer(dir);
let client;
let browser; // a persistent context: the browser with its one profile
let trickle;
let failed = false;
try {
  // Chromium first: its start-up takes the CPU, and deliveries running meanwhile would be late.
  // A fresh profile in the temporary directory: nothing from another run, removed at the end.
  browser = await chromium.launchPersistentContext(join(dir, 'chromium-profile'), {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: VIEWPORT,
  });
  const page = browser.pages()[0] ?? (await browser.newPage());
  page.setDefaultTimeout(15_000);

  const url = await server.url;
  console.log(`tickwheel serve on ${url} (${dir})`);
  client = new TickwheelClient({ url });

  let n = 0;
  for (let sent = 0; sent < SEED_MESSAGES; sent += 500) {
    await client.scheduleMany(Array.from({ length: 500 }, () => message(n++, seedDelay())));
  }
  console.log(`scheduled ${SEED_MESSAGES} messages across ${TOPICS.length} topics`);

  let handled = 0;
  let failures = 0;
  /** Errors other than the planned handler failures (receive, ack): reported at the end. */
  const transportErrors = [];
  /** Dead letters made so far, by topic: a failing message dies on its second attempt. */
  const deadByTopic = new Map();
  for (const [topic] of TOPICS) {
    const slow = topic === 'webhooks';
    client.consume(
      topic,
      async (received) => {
        handled++;
        await sleep(slow ? between(80, 160) : between(1, 15));
        if (!received.payload.fail) return;
        failures++;
        if (received.attempts >= 2) deadByTopic.set(topic, (deadByTopic.get(topic) ?? 0) + 1);
        throw new Error(`message ${received.payload.n} fails on purpose`);
      },
      {
        concurrency: slow ? 2 : 16,
        waitMs: 2000,
        onError: (err, context) => {
          if (context.id === undefined) transportErrors.push(err);
        },
      },
    );
  }

  trickle = setInterval(() => {
    const count = Math.round((TRICKLE_PER_SECOND / 5) * between(0.6, 1.4));
    const batch = Array.from({ length: count }, () => message(n++, trickleDelay()));
    client.scheduleMany(batch).catch(() => {});
  }, 200);

  await page.goto(url);
  await page.locator('[data-testid=topics] tr[data-topic]').first().waitFor();
  console.log(`dashboard open; letting ${seconds} s of traffic go by`);
  await sleep(seconds * SECOND);

  if (handled === 0) {
    throw new Error(
      `the consumers received nothing in ${seconds} s` +
        (transportErrors.length > 0 ? `; first error: ${transportErrors[0].stack}` : ''),
    );
  }

  // Open a topic and one of its dead letters too: the topic with the fewest dead letters (a
  // short list keeps the page short), and its first dead letter, with its payload preview.
  const [deadTopic] = [...deadByTopic].sort((a, b) => a[1] - b[1])[0] ?? [];
  if (deadTopic !== undefined) {
    await page.click(`[data-testid=topics] tr[data-topic="${deadTopic}"] td:first-child`);
    const row = page.locator('[data-testid=dead-letters] li[data-id]').first();
    await row.locator('.preview').waitFor();
    await row.locator('button.link').click();
    await page.getByTestId('message-status').waitFor();
  }
  // One more poll after the clicks, so the counters and charts are fresh.
  await sleep(1600);
  await page.screenshot({ path: out, fullPage: true });
  console.log(
    `wrote ${relative(process.cwd(), out)}: ${n} messages scheduled, ${handled} deliveries ` +
      `(${failures} failed on purpose), ${transportErrors.length} consumer errors`,
  );
} catch (err) {
  failed = true;
  console.error(err);
} finally {
  clearInterval(trickle);
  await browser?.close().catch(() => {});
  await client?.close().catch(() => {});
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
