/**
 * Messages due far ahead on PostgreSQL: a window's records go to a table of a level chosen by
 * how far ahead it is (segments.sql, window_seg), so that delays spread over years make a few
 * tables a level rather than one per 128 windows (which ran PostgreSQL out of lock slots:
 * "out of shared memory" on every call, nothing delivered). A window above the first level is
 * loaded, fired and listed like any other.
 */

import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled } from '../../scripts/postgres.mjs';
import { DelayQueue } from '../../src/delay-queue.js';
import { WINDOW_LEVEL_STRIDE } from '../../src/partitioned/driver.js';
import { install, schemaOf } from '../../src/postgres/install.js';
import type { ReceivedMessage } from '../../src/queue/types.js';
import { waitFor } from '../support/wait-for.js';
import { withPostgres } from './with-postgres.js';

const DAY = 86_400_000;
const YEAR = 365 * DAY;

describe.runIf(postgresInstalled())('PostgreSQL: messages due years ahead', () => {
  const server = withPostgres();

  const tableCount = async (schema: string) => {
    const { rows } = await server.pool.query(
      `SELECT count(*)::int AS n FROM pg_inherits i WHERE i.inhparent = to_regclass($1)
         OR i.inhparent = to_regclass($2)`,
      [`"${schema}".records`, `"${schema}".tombs`],
    );
    return Number(rows[0].n);
  };

  it('keeps 3,000 messages spread over 200 years in a few tables a level, and lists them in order', async () => {
    const queue = await DelayQueue.open({ postgres: server.url, queue: 'spread' });
    try {
      const now = Date.now();
      // Random delays from an hour to 200 years, with ids (every third) and without.
      let seed = 7;
      const random = () => (seed = (seed * 16_807) % 2_147_483_647) / 2_147_483_647;
      const dues: number[] = [];
      for (let batch = 0; batch < 3; batch++) {
        const messages = Array.from({ length: 1_000 }, (_, i) => {
          const deliverAt = Math.floor(now + 3_600_000 + random() * 200 * YEAR);
          dues.push(deliverAt);
          return {
            topic: 'reminders',
            payload: { n: batch * 1_000 + i },
            deliverAt,
            ...(i % 3 === 0 ? { id: `r-${batch}-${i}` } : {}),
          };
        });
        await queue.scheduleMany(messages);
      }
      // Eleven levels of at most ~9 tables each (SPAN_FANOUT 8 and one more for alignment),
      // for records and for tombs: one table per 128 windows would be thousands.
      expect(await tableCount(schemaOf('spread'))).toBeLessThanOrEqual(2 * 11 * 10);
      const listed: number[] = [];
      let cursor: string | undefined;
      do {
        const page = await queue.list({
          topic: 'reminders',
          limit: 500,
          ...(cursor ? { cursor } : {}),
        });
        for (const item of page.messages) listed.push(item.deliverAt);
        cursor = page.cursor;
      } while (cursor !== undefined);
      expect(listed).toEqual([...dues].sort((a, b) => a - b));
    } finally {
      await queue.close();
    }
  }, 120_000);

  it('delivers on time, in order, messages whose windows are above the first level', async () => {
    // Tables of one window at the first level (100 ms windows): level 0 reaches 0.8 s ahead,
    // level 1 6.4 s, level 2 51 s. The horizon loaded is ~1 s: the messages 3 s and 7 s ahead
    // go to window segments of levels 1 and 2, the one 0.4 s ahead to the near segment.
    const schema = schemaOf('levels');
    const client = await server.pool.connect();
    try {
      await install(client, 'levels', schema, schema, { WINDOW_SPAN: '1' });
    } finally {
      client.release();
    }
    const queue = await DelayQueue.open({
      postgres: server.url,
      queue: 'levels',
      windowMs: 100,
      horizonMs: 1_000,
    });
    const got: Array<{ n: number; at: number; deliverAt: number }> = [];
    const consumer = queue.consume('t', (message: ReceivedMessage) => {
      const { n } = message.payload as { n: number };
      got.push({ n, at: Date.now(), deliverAt: message.deliverAt });
    });
    try {
      const now = Date.now();
      const dues = [now + 7_000, now + 3_000, now + 3_000, now + 400];
      await queue.scheduleMany(
        dues.map((deliverAt, n) => ({ topic: 't', payload: { n }, deliverAt })),
      );
      const { rows } = await server.pool.query(
        `SELECT DISTINCT seg FROM "${schema}".records WHERE seg >= 0 ORDER BY seg`,
      );
      const levels = rows.map((row) => Math.floor(Number(row.seg) / WINDOW_LEVEL_STRIDE));
      expect(levels).toEqual(expect.arrayContaining([1, 2]));
      await waitFor(() => got.length === 4, { timeoutMs: 30_000 });
      expect(got.map((g) => g.n)).toEqual([3, 1, 2, 0]);
      for (const g of got) expect(g.at).toBeGreaterThanOrEqual(g.deliverAt);
    } finally {
      await consumer.close();
      await queue.close();
    }
  }, 60_000);
});
