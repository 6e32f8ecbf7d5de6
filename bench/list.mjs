/**
 * The cost of list() at many pending messages (docs/storage.md, "Browsing what is scheduled").
 * Fills a file store with `--count` messages due 1 to 1 + `--days` days ahead (scheduleMany
 * batches of 10,000; one in 10,000 is of a rare topic), closes it, opens it again (a fresh
 * process's view: recovery from the snapshot close wrote), then times:
 *
 *   - the first page of the common topic;
 *   - a page from a cursor deep in (the cursor of a page started halfway through the days);
 *   - the first page of the rare topic, and the pages it takes to find `--limit` of its messages
 *     (up to 30 pages);
 *
 * and prints the process's RSS after each step, as markdown. Run against dist/:
 *
 *   npm run build && node --expose-gc bench/list.mjs --count 10000000 --days 30
 */

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { DelayQueue } from '../dist/delay-queue.js';

const { values } = parseArgs({
  options: {
    count: { type: 'string', default: '10000000' },
    days: { type: 'string', default: '30' },
    limit: { type: 'string', default: '100' },
    dir: { type: 'string' },
  },
});
const count = Number(values.count);
const days = Number(values.days);
const limit = Number(values.limit);
const DAY = 86_400_000;
const BATCH = 10_000;
const RARE_EVERY = 10_000;
/** Pages of the rare topic read at most (each examines up to listScanRecords records). */
const MAX_RARE_PAGES = 30;

const mb = (bytes) => `${(bytes / 1024 / 1024).toFixed(0)} MB`;
const rss = () => {
  globalThis.gc?.();
  return process.memoryUsage().rss;
};
const rows = [];
const note = (step, ms, extra = '') => {
  const line = { step, ms: ms.toFixed(1), rss: mb(rss()), extra };
  rows.push(line);
  process.stderr.write(`${step}: ${line.ms} ms, rss ${line.rss} ${extra}\n`);
};

async function timed(step, work, extra) {
  const start = performance.now();
  const result = await work();
  note(step, performance.now() - start, extra?.(result) ?? '');
  return result;
}

const dir = values.dir ?? (await mkdtemp(join(tmpdir(), 'tickwheel-list-bench-')));
const start = Date.now();
let queue = await DelayQueue.open({ dir });
await timed(
  'fill',
  async () => {
    for (let sent = 0; sent < count;) {
      const n = Math.min(BATCH, count - sent);
      const batch = new Array(n);
      for (let i = 0; i < n; i++) {
        const k = sent + i;
        batch[i] = {
          topic: k % RARE_EVERY === 0 ? 'rare' : 'common',
          payload: { k },
          // Spread evenly over the days, in an order unlike the due order.
          deliverAt: Math.floor(
            start + DAY + ((k * 2_654_435_761) % count) * ((days * DAY) / count),
          ),
        };
      }
      await queue.scheduleMany(batch);
      sent += n;
      if (sent % 1_000_000 === 0) process.stderr.write(`  ${sent} scheduled\n`);
    }
  },
  () => `${count} messages over ${days} days`,
);
await timed('close (writes a snapshot)', () => queue.close());
queue = await timed('open again (recovery)', () => DelayQueue.open({ dir }));
const stats = await queue.stats();
note('pending', 0, `${stats.store?.live} live, ${stats.store?.indexFiles} index files`);

const first = await timed(
  'first page of the common topic',
  () => queue.list({ topic: 'common', limit }),
  (page) => `${page.messages.length} messages`,
);
await timed(
  'next page (from its cursor)',
  () => queue.list({ topic: 'common', limit, cursor: first.cursor }),
  (page) => `${page.messages.length} messages`,
);
const middle = await timed(
  'page from halfway through the days',
  () => queue.list({ topic: 'common', limit, from: start + DAY + (days * DAY) / 2 }),
  (page) => `${page.messages.length} messages`,
);
await timed(
  'page from a cursor deep in',
  () => queue.list({ topic: 'common', limit, cursor: middle.cursor }),
  (page) => `${page.messages.length} messages`,
);
await timed(
  'first page of the rare topic',
  () => queue.list({ topic: 'rare', limit }),
  (page) =>
    `${page.messages.length} messages, cursor ${page.cursor === undefined ? 'absent' : 'given'}`,
);
await timed(
  `pages of the rare topic until ${limit} messages (at most ${MAX_RARE_PAGES} pages)`,
  async () => {
    let found = 0;
    let pages = 0;
    let cursor;
    do {
      const page = await queue.list({ topic: 'rare', limit, ...(cursor ? { cursor } : {}) });
      found += page.messages.length;
      cursor = page.cursor;
      pages++;
    } while (found < limit && cursor !== undefined && pages < MAX_RARE_PAGES);
    return { found, pages };
  },
  ({ found, pages }) => `${found} messages in ${pages} pages`,
);
await queue.close();
if (values.dir === undefined) await rm(dir, { recursive: true, force: true });

console.log(`| step | ms | process RSS after | notes |`);
console.log(`| ---- | --: | --: | ----- |`);
for (const { step, ms, rss: after, extra } of rows)
  console.log(`| ${step} | ${ms} | ${after} | ${extra} |`);
