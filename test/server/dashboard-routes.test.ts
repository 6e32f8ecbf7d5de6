/**
 * The JSON behind the web dashboard, through inject() (no browser, no sockets):
 * GET /v1/dashboard and GET /v1/messages/:id/preview.
 */

import { afterEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import type { DelayQueue } from '../../src/delay-queue.js';
import { createServer } from '../../src/server/index.js';
import { injector, openServer, type TestServer } from './harness.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const tempDir = useTempDirs('dashboard-routes');

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const TIMELINE = ['< 1 s', '1-10 s', '10-60 s', '1-60 min', '1-24 h', '> 1 day'];
const TOKEN = 'dashboard-routes-token';

const fileServers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(fileServers.splice(0).map((close) => close()));
});

/** A server on the file store in a fresh directory (fsync 'never': nothing here is a crash). */
async function openFileServer(): Promise<TestServer> {
  const dir = tempDir();
  const server = await createServer({ dir, fsync: 'never', logLevel: 'silent' });
  fileServers.push(() => server.close());
  return { server, queue: server.queue as DelayQueue, call: injector(server) };
}

const stores: Array<[string, () => Promise<TestServer>]> = [
  ['the memory store', () => openServer()],
  ['the file store', openFileServer],
];

/** Bucket label -> count, from a snapshot's timeline. */
function timeline(body: { upcoming: Array<{ label: string; count: number }> }) {
  return Object.fromEntries(body.upcoming.map((bucket) => [bucket.label, bucket.count]));
}

/** Schedules one message and puts it in the dead letters: one attempt, nacked. */
async function killOne(call: TestServer['call'], topic: string, id: string): Promise<void> {
  await call('POST', `/v1/topics/${topic}/messages`, { payload: { id }, id, maxAttempts: 1 });
  const received = await call('POST', `/v1/topics/${topic}/receive`, { waitMs: 2000 });
  expect(received.body.messages).toMatchObject([{ id }]);
  await call('POST', '/v1/nack', { receipts: [received.body.messages[0].receipt] });
  expect((await call('GET', `/v1/messages/${id}`)).body.status).toBe('dead');
}

describe('GET /v1/dashboard', () => {
  it('answers one snapshot with every part the page draws', async () => {
    const { call } = await openServer();
    const before = Date.now();
    const res = await call('GET', '/v1/dashboard');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toContain('application/json');
    const body = res.body;
    expect(Object.keys(body).sort()).toEqual(
      [
        'cluster',
        'counters',
        'latenessMs',
        'now',
        'otherTopics',
        'topicCount',
        'topics',
        'totals',
        'upcoming',
        'uptimeMs',
        'version',
        'wheel',
      ].sort(),
    );
    // On one machine there is no cluster to show.
    expect(body.cluster).toBeNull();
    expect(body.now).toBeGreaterThanOrEqual(before);
    expect(body.now).toBeLessThanOrEqual(Date.now());
    expect(body.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(body.uptimeMs).toBeGreaterThanOrEqual(0);
    expect(body.counters).toEqual({
      scheduled: 0,
      deduplicated: 0,
      fired: 0,
      delivered: 0,
      acked: 0,
      nacked: 0,
      expired: 0,
      dead: 0,
      cancelled: 0,
      rescheduled: 0,
    });
    expect(body.topics).toEqual({});
    expect(body.totals).toMatchObject({ inMemory: 0, live: 0 });
    expect([0, null]).toContain(body.totals.dead);
    expect(body.totals.loadedUntil).toBeGreaterThanOrEqual(before);
    expect(body.latenessMs).toEqual({ p50: null, p99: null, max: null });

    // The timeline: next minute (finer), next hour, next day, beyond; contiguous edges, each
    // as labelled or, past the in-memory horizon, less than a minute before it (see
    // dashboard-timeline.test.ts).
    expect(body.upcoming.map((bucket: { label: string }) => bucket.label)).toEqual(TIMELINE);
    const nominal = [SECOND, 10 * SECOND, MINUTE, HOUR, DAY];
    for (const [i, edge] of nominal.entries()) {
      expect(body.upcoming[i].untilMs).toBeLessThanOrEqual(edge);
      expect(body.upcoming[i].untilMs).toBeGreaterThan(edge - MINUTE);
    }
    expect(body.upcoming[5].untilMs).toBeNull();
    for (const [i, bucket] of body.upcoming.entries()) {
      expect(bucket.fromMs).toBe(i === 0 ? 0 : body.upcoming[i - 1].untilMs);
      expect(bucket.count).toBe(0);
    }

    expect(body.wheel.truncated).toBe(false);
    expect(body.wheel.levels.length).toBeGreaterThan(0);
    for (const level of body.wheel.levels) {
      expect(level.slots.length).toBeGreaterThan(0);
      // The queue's wheel has 4,096 slots a level (the first level shows two blocks, 8,192):
      // drawn as 64 cells of 64 or 128 slots each.
      expect(level.slots.length).toBeLessThanOrEqual(64);
      expect(level.slotsPerCell * level.slots.length).toBe(
        level === body.wheel.levels[0] ? 8192 : 4096,
      );
      expect(level.slots.every((count: unknown) => Number.isInteger(count))).toBe(true);
      expect(level.cursor).toBeGreaterThanOrEqual(0);
      expect(level.cursor).toBeLessThan(level.slots.length);
    }
  });

  it('places messages due within the minute on the timeline and in the wheel', async () => {
    const { call, queue } = await openServer();
    const occupied = (wheel: { levels: Array<{ slots: number[] }> }) =>
      wheel.levels.flatMap((level) => level.slots).reduce((sum, count) => sum + count, 0);
    // The queue's own timers (the horizon loader) are in the wheel too.
    const before = occupied(queue.wheelSnapshot());
    await call('POST', '/v1/messages:batch', {
      messages: [
        { topic: 'a', payload: 1, delayMs: 4 * SECOND },
        { topic: 'a', payload: 2, delayMs: 25 * SECOND },
        { topic: 'b', payload: 3, delayMs: 40 * SECOND },
      ],
    });
    const { body } = await call('GET', '/v1/dashboard');
    expect(timeline(body)).toEqual({
      '< 1 s': 0,
      '1-10 s': 1,
      '10-60 s': 2,
      '1-60 min': 0,
      '1-24 h': 0,
      '> 1 day': 0,
    });
    expect(body.counters.scheduled).toBe(3);
    expect(body.totals).toMatchObject({ inMemory: 3, live: 3 });
    expect(occupied(body.wheel)).toBe(before + 3);
  });

  // Needs the engine's dueHistogram over every scheduled message, memory and disk.
  it.each(stores)(
    'on %s, places messages beyond the in-memory horizon by the hour they are due in',
    async (_store, open) => {
      const { call } = await open();
      const messages = [
        { delayMs: 30 * SECOND },
        { delayMs: 3 * HOUR },
        { delayMs: 5 * HOUR + 20 * MINUTE },
        { delayMs: 3 * DAY },
        { delayMs: 30 * DAY },
        { delayMs: 400 * DAY },
      ].map((timing, i) => ({ topic: `t${i % 2}`, payload: i, ...timing }));
      expect((await call('POST', '/v1/messages:batch', { messages })).status).toBe(201);
      const { body } = await call('GET', '/v1/dashboard');
      expect(timeline(body)).toEqual({
        '< 1 s': 0,
        '1-10 s': 0,
        '10-60 s': 1,
        '1-60 min': 0,
        '1-24 h': 2,
        '> 1 day': 3,
      });
      expect(body.totals.live).toBe(6);
    },
  );

  // Needs the engine's per-topic stats: scheduled in memory and on disk, dead from the store.
  it.each(stores)(
    "on %s, counts each topic's scheduled, ready, in-flight and dead messages",
    async (_store, open) => {
      const { call, queue } = await open();
      await call('POST', '/v1/messages:batch', {
        messages: [
          { topic: 'emails', payload: 1, delayMs: 30 * SECOND },
          { topic: 'emails', payload: 2, delayMs: 45 * SECOND },
          { topic: 'emails', payload: 3, delayMs: 2 * HOUR },
          { topic: 'emails', payload: 4, delayMs: 10 * DAY },
          { topic: 'sms', payload: 5, delayMs: 5 * SECOND },
          { topic: 'sms', payload: 6, delayMs: 3 * HOUR },
        ],
      });
      await killOne(call, 'jobs', 'doomed-1');
      await killOne(call, 'jobs', 'doomed-2');
      await killOne(call, 'sms', 'doomed-3');
      await call('POST', '/v1/topics/jobs/messages', { payload: 'now-1' });
      await call('POST', '/v1/topics/jobs/messages', { payload: 'now-2' });
      await waitFor(async () => {
        const stats = await queue.stats();
        return stats.topics.jobs.ready === 2;
      });
      const taken = await call('POST', '/v1/topics/jobs/receive', { max: 1 });
      expect(taken.body.messages).toHaveLength(1);

      const { body } = await call('GET', '/v1/dashboard');
      expect(body.counters).toMatchObject({ scheduled: 11, delivered: 4, nacked: 3, dead: 3 });
      expect(body.topics).toEqual({
        emails: { scheduled: 4, ready: 0, inflight: 0, dead: 0 },
        sms: { scheduled: 2, ready: 0, inflight: 0, dead: 1 },
        jobs: { scheduled: 0, ready: 1, inflight: 1, dead: 2 },
      });
      // Every scheduled message is on the timeline, once.
      const onTimeline = body.upcoming.reduce(
        (sum: number, bucket: { count: number }) => sum + bucket.count,
        0,
      );
      expect(onTimeline).toBe(6);
    },
  );

  it('counts the dead letters in the totals on the file store', async () => {
    const { call } = await openFileServer();
    await killOne(call, 'jobs', 'doomed');
    await call('POST', '/v1/topics/jobs/messages', { payload: 1, delayMs: MINUTE });
    const { body } = await call('GET', '/v1/dashboard');
    // Live counts every message not finished (acked or cancelled): dead letters too.
    expect(body.totals).toMatchObject({ live: 2, dead: 1 });
  });

  it('builds at most one snapshot a second, shared by every request in it', async () => {
    const { call, queue } = await openServer();
    // The snapshot's age is read from performance.now(): time moves by hand here.
    vi.useFakeTimers({ toFake: ['performance', 'Date'] });
    onTestFinished(() => void vi.useRealTimers());
    const stats = vi.spyOn(queue, 'stats');
    const first = await Promise.all(Array.from({ length: 5 }, () => call('GET', '/v1/dashboard')));
    for (const res of first) expect(res.body).toEqual(first[0].body);
    expect(stats).toHaveBeenCalledTimes(1);

    await call('POST', '/v1/topics/t/messages', { payload: 1, delayMs: 30 * SECOND });
    const cached = await call('GET', '/v1/dashboard');
    expect(cached.body).toEqual(first[0].body);
    expect(cached.body.counters.scheduled).toBe(0);
    expect(stats).toHaveBeenCalledTimes(1);

    vi.advanceTimersByTime(999);
    expect((await call('GET', '/v1/dashboard')).body).toEqual(first[0].body);
    vi.advanceTimersByTime(1);
    const fresh = await call('GET', '/v1/dashboard');
    expect(fresh.body.now).toBeGreaterThanOrEqual(first[0].body.now + 1000);
    expect(fresh.body.counters.scheduled).toBe(1);
    expect(fresh.body.topics.t).toMatchObject({ scheduled: 1 });
    expect(stats).toHaveBeenCalledTimes(2);
  });

  it('does not keep a failed snapshot: the next request tries again', async () => {
    const { call, queue } = await openServer();
    const stats = vi.spyOn(queue, 'stats').mockRejectedValueOnce(new Error('disk on fire'));
    const failed = await call('GET', '/v1/dashboard');
    expect(failed.status).toBe(500);
    expect(failed.body.error.code).toMatch(/^ERR_TICKWHEEL_/);
    const retried = await call('GET', '/v1/dashboard');
    expect(retried.status).toBe(200);
    expect(stats).toHaveBeenCalledTimes(2);
  });
});

describe('GET /v1/messages/:id/preview', () => {
  it('shows a JSON payload as JSON text', async () => {
    const { call } = await openServer();
    const payload = { order: 'A-17', total: 42, lines: [{ sku: 'x', qty: 2 }], note: null };
    await call('POST', '/v1/topics/orders/messages', { payload, id: 'o-1', delayMs: MINUTE });
    await call('POST', '/v1/topics/orders/messages', { payload: 'plain', id: 'o-2' });
    const res = await call('GET', '/v1/messages/o-1/preview');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ preview: JSON.stringify(payload), truncated: false });
    expect((await call('GET', '/v1/messages/o-2/preview')).body.preview).toBe('"plain"');
  });

  it('shows a byte payload as base64', async () => {
    const { call } = await openServer();
    const bytes = Buffer.from([0, 1, 2, 250, 251, 255, 10, 13]);
    await call('POST', '/v1/topics/bin/messages', {
      payload: bytes.toString('base64'),
      payloadEncoding: 'base64',
      id: 'bin-1',
      delayMs: MINUTE,
    });
    const res = await call('GET', '/v1/messages/bin-1/preview');
    expect(res.body).toEqual({ preview: bytes.toString('base64'), truncated: false });
  });

  it('cuts previews to 400 characters and says so', async () => {
    const { call } = await openServer();
    const long = { text: 'x'.repeat(1000) };
    const exact = 'y'.repeat(398); // 400 characters as JSON, with its quotes
    const bytes = Buffer.alloc(600, 7); // 800 characters of base64
    await call('POST', '/v1/messages:batch', {
      messages: [
        { topic: 't', payload: long, id: 'long', delayMs: MINUTE },
        { topic: 't', payload: exact, id: 'exact', delayMs: MINUTE },
        {
          topic: 't',
          payload: bytes.toString('base64'),
          payloadEncoding: 'base64',
          id: 'bytes',
          delayMs: MINUTE,
        },
      ],
    });
    const cut = await call('GET', '/v1/messages/long/preview');
    expect(cut.body).toEqual({ preview: JSON.stringify(long).slice(0, 400), truncated: true });
    const whole = await call('GET', '/v1/messages/exact/preview');
    expect(whole.body).toEqual({ preview: JSON.stringify(exact), truncated: false });
    const cutBytes = await call('GET', '/v1/messages/bytes/preview');
    expect(cutBytes.body).toEqual({
      preview: bytes.toString('base64').slice(0, 400),
      truncated: true,
    });
  });

  it.each(stores)('on %s, previews messages on disk, in flight and dead', async (_store, open) => {
    const { call } = await open();
    await call('POST', '/v1/topics/t/messages', {
      payload: { far: true },
      id: 'far',
      delayMs: DAY,
    });
    await call('POST', '/v1/topics/t/messages', { payload: { busy: true }, id: 'busy' });
    const taken = await call('POST', '/v1/topics/t/receive', { waitMs: 2000 });
    expect(taken.body.messages).toMatchObject([{ id: 'busy' }]);
    await killOne(call, 'graveyard', 'gone');
    for (const [id, preview] of [
      ['far', '{"far":true}'],
      ['busy', '{"busy":true}'],
      ['gone', '{"id":"gone"}'],
    ]) {
      const res = await call('GET', `/v1/messages/${id}/preview`);
      expect(res.status, id).toBe(200);
      expect(res.body, id).toEqual({ preview, truncated: false });
    }
  });

  it('answers 404 in the error format for unknown, acknowledged and cancelled messages', async () => {
    const { call } = await openServer();
    const unknown = await call('GET', '/v1/messages/never-scheduled/preview');
    expect(unknown.status).toBe(404);
    expect(unknown.headers['content-type']).toContain('application/json');
    expect(unknown.body).toEqual({
      error: {
        code: 'ERR_TICKWHEEL_NOT_FOUND',
        message: expect.stringContaining('never-scheduled'),
        outcome: 'none',
      },
    });

    await call('POST', '/v1/topics/t/messages', { payload: 1, id: 'acked' });
    const taken = await call('POST', '/v1/topics/t/receive', { waitMs: 2000 });
    await call('POST', '/v1/ack', { receipts: [taken.body.messages[0].receipt] });
    await call('POST', '/v1/topics/t/messages', { payload: 2, id: 'cancelled', delayMs: MINUTE });
    await call('DELETE', '/v1/messages/cancelled');
    for (const id of ['acked', 'cancelled']) {
      const res = await call('GET', `/v1/messages/${id}/preview`);
      expect(res.status, id).toBe(404);
      expect(res.body.error.code).toBe('ERR_TICKWHEEL_NOT_FOUND');
    }
  });

  it('answers 400 for ids the queue would refuse', async () => {
    const { call } = await openServer();
    for (const id of ['a%20b', 'a%2Fb', '%C3%A9t%C3%A9', 'x'.repeat(201), 'a%00']) {
      const res = await call('GET', `/v1/messages/${id}/preview`);
      expect(res.status, id).toBe(400);
      expect(res.body.error.code, id).toBe('ERR_TICKWHEEL_INVALID_REQUEST');
    }
    // Longer than any path parameter: refused before routing (414), still in the error format.
    const huge = await call('GET', `/v1/messages/${'x'.repeat(300)}/preview`);
    expect(huge.status).toBeGreaterThanOrEqual(400);
    expect(huge.status).toBeLessThan(500);
    expect(huge.body.error.code).toBe('ERR_TICKWHEEL_INVALID_REQUEST');
  });
});

describe('the dashboard routes behind a token', () => {
  it.each([['/v1/dashboard'], ['/v1/messages/m-1/preview']])(
    'GET %s: 401 without the token or with a wrong one, 200 with it',
    async (url) => {
      const { call } = await openServer({ token: TOKEN });
      await call(
        'POST',
        '/v1/topics/t/messages',
        { payload: { secret: 1 }, id: 'm-1', delayMs: MINUTE },
        { authorization: `Bearer ${TOKEN}` },
      );
      const missing = await call('GET', url);
      expect(missing.status).toBe(401);
      expect(missing.body.error.code).toBe('ERR_TICKWHEEL_UNAUTHORIZED');
      expect(missing.headers['www-authenticate']).toContain('Bearer');
      expect(missing.text).not.toContain('secret');
      const wrong = await call('GET', url, undefined, { authorization: `Bearer ${TOKEN}x` });
      expect(wrong.status).toBe(401);
      const right = await call('GET', url, undefined, { authorization: `Bearer ${TOKEN}` });
      expect(right.status).toBe(200);
    },
  );
});
