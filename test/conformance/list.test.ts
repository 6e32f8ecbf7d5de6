/**
 * list(): browsing a topic's pending messages, one specification run on every backend
 * (backends.ts): due-time order, equal due times, statuses, paging by cursor while messages
 * are scheduled and cancelled between pages, from/until, limit, and bad inputs refused with a
 * code. Messages due far ahead sit beyond every backend's in-memory horizon (on disk in the
 * file store's schedule index, in window segments on Valkey), those due now within it.
 */

import { afterEach, describe, expect, it } from 'vitest';
import type { Queue } from '../../src/queue/api.js';
import type { ListOptions, MessageInfo, ReceivedMessage } from '../../src/queue/types.js';
import { waitFor } from '../support/wait-for.js';
import { backends, closeAll, codeOf, useBackends } from './backends.js';

useBackends();

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Every page of a listing, in order; `between` runs after each page but the last. */
async function listAll(
  queue: Queue,
  options: ListOptions,
  between?: (page: number) => Promise<void>,
): Promise<{ messages: MessageInfo[]; pages: number }> {
  const messages: MessageInfo[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await queue.list({ ...options, ...(cursor === undefined ? {} : { cursor }) });
    pages++;
    expect(page.messages.length).toBeLessThanOrEqual(options.limit ?? 100);
    messages.push(...page.messages);
    cursor = page.cursor;
    if (cursor !== undefined) await between?.(pages);
    expect(pages).toBeLessThan(10_000);
  } while (cursor !== undefined);
  return { messages, pages };
}

const ids = (messages: MessageInfo[]) => messages.map((message) => message.id);

describe.each(backends)('list() on $name', (backend) => {
  afterEach(closeAll);

  it('lists pending messages of one topic in due-time order, near and far', async () => {
    const queue = await backend.open();
    const now = Date.now();
    const dues = [5 * DAY, 2 * HOUR, 30 * DAY, 90_000, 3 * DAY, 400 * DAY, 45_000];
    for (const [i, due] of dues.entries()) {
      await queue.schedule({ topic: 'mail', id: `m-${i}`, payload: i, deliverAt: now + due });
      await queue.schedule({ topic: 'other', id: `o-${i}`, payload: i, deliverAt: now + due });
    }
    const { messages } = await listAll(queue, { topic: 'mail' });
    const expected = dues
      .map((due, i) => ({ id: `m-${i}`, deliverAt: now + due }))
      .sort((a, b) => a.deliverAt - b.deliverAt);
    expect(messages).toEqual(
      expected.map(({ id, deliverAt }) => ({
        id,
        topic: 'mail',
        status: 'scheduled',
        deliverAt,
        attempts: 0,
      })),
    );
    expect(await queue.list({ topic: 'nothing-here' })).toEqual({ messages: [] });
  });

  it('lists equal due times in scheduling order (here also the order of their ids)', async () => {
    const queue = await backend.open();
    const at = Date.now() + 2 * DAY;
    for (let i = 0; i < 12; i++) {
      await queue.schedule({
        topic: 'tie',
        id: `t-${String(i).padStart(2, '0')}`,
        payload: i,
        deliverAt: at,
      });
    }
    await queue.schedule({ topic: 'tie', id: 'early', payload: 0, deliverAt: at - 1 });
    const { messages, pages } = await listAll(queue, { topic: 'tie', limit: 5 });
    expect(pages).toBe(3);
    expect(ids(messages)).toEqual([
      'early',
      ...Array.from({ length: 12 }, (_, i) => `t-${String(i).padStart(2, '0')}`),
    ]);
  });

  it('shows ready and in-flight messages with their status; dead, acked and cancelled ones not', async () => {
    const queue = await backend.open();
    const now = Date.now();
    await queue.schedule({ topic: 'jobs', id: 'due-a', payload: 1, deliverAt: now - 10 });
    await queue.schedule({ topic: 'jobs', id: 'due-b', payload: 2, deliverAt: now - 5 });
    await queue.schedule({ topic: 'jobs', id: 'later', payload: 3, deliverAt: now + DAY });
    await queue.schedule({ topic: 'jobs', id: 'gone', payload: 4, deliverAt: now + DAY });
    await queue.schedule({ topic: 'doomed', id: 'dies', payload: 5, maxAttempts: 1 });
    await queue.cancel('gone');
    const [dying] = await queue.receive('doomed', { max: 1, waitMs: 5_000 });
    await queue.nack(dying.receipt);
    await waitFor(async () => (await queue.get('dies'))?.status === 'dead');
    expect(await queue.list({ topic: 'doomed' })).toEqual({ messages: [] });
    const [taken] = await queue.receive('jobs', { max: 1, waitMs: 5_000 });
    const other = taken.id === 'due-a' ? 'due-b' : 'due-a';
    await waitFor(async () => (await queue.get(other))?.status === 'ready');
    const status = (id: string) => (id === taken.id ? 'inflight' : 'ready');
    const { messages } = await listAll(queue, { topic: 'jobs' });
    expect(messages.map(({ id, status }) => [id, status])).toEqual([
      ['due-a', status('due-a')],
      ['due-b', status('due-b')],
      ['later', 'scheduled'],
    ]);
    await queue.ack(taken.receipt);
    expect(ids((await listAll(queue, { topic: 'jobs' })).messages)).toEqual([other, 'later']);
  });

  it('gives the lastError of a message whose delivery failed, and each message as get() gives it', async () => {
    const queue = await backend.open();
    const now = Date.now();
    for (const id of ['declined', 'plain', 'soon']) {
      await queue.schedule({ topic: 'retry', id, payload: id });
    }
    await queue.schedule({ topic: 'retry', id: 'buried', payload: 0, maxAttempts: 1 });
    await queue.schedule({ topic: 'retry', id: 'fresh', payload: 0, deliverAt: now + 2 * DAY });
    const got: ReceivedMessage[] = [];
    while (got.length < 4) got.push(...(await queue.receive('retry', { max: 4, waitMs: 5_000 })));
    const receipt = (id: string) => got.find((message) => message.id === id)!.receipt;
    await queue.nack(receipt('declined'), { delayMs: DAY, reason: 'card declined' });
    await queue.nack(receipt('plain'), { delayMs: DAY + HOUR });
    await queue.nack(receipt('soon'), { delayMs: 0, reason: 'try again' });
    await queue.nack(receipt('buried'), { reason: 'gave up' });
    await waitFor(async () => (await queue.get('buried'))?.status === 'dead');
    expect(await queue.requeue('buried', { delayMs: 3 * DAY })).toBe(true);
    await waitFor(async () => (await queue.get('soon'))?.status === 'ready');

    const { messages } = await listAll(queue, { topic: 'retry' });
    expect(
      messages.map(({ id, status, attempts, lastError }) => ({ id, status, attempts, lastError })),
    ).toEqual([
      { id: 'soon', status: 'ready', attempts: 1, lastError: 'try again' },
      { id: 'declined', status: 'scheduled', attempts: 1, lastError: 'card declined' },
      { id: 'plain', status: 'scheduled', attempts: 1, lastError: 'nacked' },
      { id: 'fresh', status: 'scheduled', attempts: 0, lastError: undefined },
      // Requeued dead letters keep the reason they died of.
      { id: 'buried', status: 'scheduled', attempts: 0, lastError: 'gave up' },
    ]);
    for (const message of messages) expect(await queue.get(message.id)).toEqual(message);
  });

  it('pages continue exactly after the last message when messages change in between', async () => {
    const queue = await backend.open();
    const now = Date.now();
    const due = (i: number) => now + DAY + i * 60_000;
    for (let i = 0; i < 40; i++) {
      await queue.schedule({ topic: 'p', id: `k-${i}`, payload: i, deliverAt: due(i) });
    }
    const { messages } = await listAll(queue, { topic: 'p', limit: 7 }, async (page) => {
      if (page === 1) {
        // Before the cursor: not listed. After it: listed in its place.
        await queue.schedule({ topic: 'p', id: 'new-early', payload: 0, deliverAt: due(1) + 1 });
        await queue.schedule({ topic: 'p', id: 'new-late', payload: 0, deliverAt: due(30) + 1 });
        await queue.cancel('k-20');
        // The last message of the page itself goes: the next page still starts after it.
        await queue.cancel('k-6');
      }
      if (page === 3) await queue.reschedule('k-35', { deliverAt: due(0) });
    });
    const expected = Array.from({ length: 40 }, (_, i) => `k-${i}`).filter(
      (id) => id !== 'k-20' && id !== 'k-35',
    );
    expected.splice(expected.indexOf('k-30') + 1, 0, 'new-late');
    expect(ids(messages)).toEqual(expected);
    expect(new Set(ids(messages)).size).toBe(messages.length);
  });

  it('takes from (inclusive) and until (exclusive), and a limit from 1 to 1000, default 100', async () => {
    const queue = await backend.open();
    const base = Date.now() + 3 * DAY;
    await queue.scheduleMany(
      Array.from({ length: 130 }, (_, i) => ({
        topic: 'r',
        id: `r-${String(i).padStart(3, '0')}`,
        payload: i,
        deliverAt: base + i * 1_000,
      })),
    );
    const first = await queue.list({ topic: 'r' });
    expect(first.messages).toHaveLength(100);
    expect(first.cursor).toEqual(expect.any(String));
    const rest = await queue.list({ topic: 'r', cursor: first.cursor });
    expect(ids(rest.messages)).toEqual(
      Array.from({ length: 30 }, (_, i) => `r-${String(100 + i).padStart(3, '0')}`),
    );
    expect(rest.cursor).toBeUndefined();
    const range = await listAll(queue, {
      topic: 'r',
      from: base + 10_000,
      until: base + 20_000,
      limit: 3,
    });
    expect(ids(range.messages)).toEqual(
      Array.from({ length: 10 }, (_, i) => `r-${String(10 + i).padStart(3, '0')}`),
    );
    const one = await queue.list({ topic: 'r', limit: 1, from: base + 129_000 });
    expect(ids(one.messages)).toEqual(['r-129']);
    expect(
      (await queue.list({ topic: 'r', from: base + 5_000, until: base + 5_000 })).messages,
    ).toEqual([]);
  });

  it('pages through to a rare topic among many messages of others', async () => {
    const queue = await backend.open();
    const base = Date.now() + DAY;
    // More than one page examines on every bounded backend: 8,192 records (the file store's
    // default listScanRecords, and a partition's on Valkey/Redis, with 4 partitions).
    const bulk = 40_000;
    for (let sent = 0; sent < bulk; sent += 2_000) {
      await queue.scheduleMany(
        Array.from({ length: 2_000 }, (_, i) => ({
          topic: 'bulk',
          payload: null,
          deliverAt: base + (((sent + i) * 7_919) % 600_000),
        })),
      );
    }
    const rare = [599_999, 3, 300_000].map((offset, i) => ({
      topic: 'rare',
      id: `rare-${i}`,
      payload: i,
      deliverAt: base + offset,
    }));
    for (const message of rare) await queue.schedule(message);
    const { messages, pages } = await listAll(queue, { topic: 'rare', limit: 3 });
    expect(ids(messages)).toEqual(['rare-1', 'rare-2', 'rare-0']);
    // One page would hold all three: a bounded backend's first page stopped early, with fewer
    // messages and a cursor.
    expect(pages > 1).toBe(backend.name !== 'memory');
    const first = await queue.list({ topic: 'bulk', limit: 1_000 });
    expect(first.messages).toHaveLength(1_000);
  });

  it('refuses bad inputs with a code', async () => {
    const queue = await backend.open();
    await queue.schedule({ topic: 'a', id: 'x', payload: 1, delayMs: DAY });
    await queue.schedule({ topic: 'a', id: 'y', payload: 1, delayMs: DAY + 1 });
    const page = await queue.list({ topic: 'a', limit: 1 });
    expect(page.cursor).toEqual(expect.any(String));
    const any = queue as unknown as { list(options: unknown): Promise<unknown> };
    const OPTION = 'ERR_TICKWHEEL_INVALID_OPTION';
    const foreign = Buffer.from('{"v":1,"t":"a","d":"soon","s":0,"i":"x"}').toString('base64url');
    const cases: Array<[unknown, string]> = [
      [undefined, OPTION],
      ['a', OPTION],
      [{}, 'ERR_TICKWHEEL_INVALID_TOPIC'],
      [{ topic: 'no spaces' }, 'ERR_TICKWHEEL_INVALID_TOPIC'],
      [{ topic: 'a', limit: 0 }, OPTION],
      [{ topic: 'a', limit: 1001 }, OPTION],
      [{ topic: 'a', limit: 2.5 }, OPTION],
      [{ topic: 'a', limit: '10' }, OPTION],
      [{ topic: 'a', from: Number.NaN }, OPTION],
      [{ topic: 'a', from: -1 }, OPTION],
      [{ topic: 'a', until: 'tomorrow' }, OPTION],
      [{ topic: 'a', from: 2_000, until: 1_000 }, OPTION],
      [{ topic: 'a', after: page.cursor }, OPTION],
      [{ topic: 'a', cursor: '' }, OPTION],
      [{ topic: 'a', cursor: 42 }, OPTION],
      [{ topic: 'a', cursor: 'not a cursor!' }, OPTION],
      [{ topic: 'a', cursor: 'bm90IGpzb24' }, OPTION],
      [{ topic: 'a', cursor: foreign }, OPTION],
      [{ topic: 'a', cursor: 'x'.repeat(5_000) }, OPTION],
      [{ topic: 'b', cursor: page.cursor }, OPTION],
      [{ topic: 'a', cursor: page.cursor }, 'ok'],
    ];
    for (const [options, code] of cases) {
      expect([options, await codeOf(() => any.list(options))]).toEqual([options, code]);
    }
    const other = await codeOf(() => any.list({ topic: 'b', cursor: page.cursor }));
    expect(other).toBe(OPTION);
    await expect(any.list({ topic: 'b', cursor: page.cursor })).rejects.toThrow(/topic "a"/);
  });
});
