/**
 * Topic controls on the embedded queue (src/queue/topics.ts): pause and resume, rate limits,
 * their durability in the data directory, and bad settings refused with named errors. Time is a
 * ManualClock, so "waits for the next token" is checked exactly, without timing assertions.
 */

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { DelayQueue } from '../../src/delay-queue.js';
import { LocalBuckets, TopicGate } from '../../src/queue/topics.js';
import { advance, fileKind, memoryKind, settle, useQueues } from './harness.js';

const openQueue = useQueues();

async function scheduleNow(queue: DelayQueue, topic: string, n: number): Promise<void> {
  await queue.scheduleMany(
    Array.from({ length: n }, (_, i) => ({ topic, payload: i, id: `${topic}-${i}` })),
  );
}

describe.each([
  ['memory store', memoryKind],
  ['file store', fileKind],
])('topic controls on the %s', (_name, makeKind) => {
  it('a paused topic delivers nothing, still takes schedules, and delivers once resumed', async () => {
    const { queue } = await openQueue(makeKind);
    await scheduleNow(queue, 'jobs', 2);
    const paused = await queue.pause('jobs');
    expect(paused).toMatchObject({ topic: 'jobs', paused: true, rateLimit: null, pending: 2 });
    await scheduleNow(queue, 'more', 1);
    await queue.schedule({ topic: 'jobs', payload: 'late', id: 'jobs-late' });
    expect(await queue.receive('jobs', { max: 10 })).toEqual([]);
    // Other topics are not affected.
    expect(await queue.receive('more', { max: 10 })).toHaveLength(1);
    expect((await queue.topicInfo('jobs')).pending).toBe(3);
    await queue.resume('jobs');
    const got = await queue.receive('jobs', { max: 10 });
    expect(got.map((m) => m.id)).toEqual(['jobs-0', 'jobs-1', 'jobs-late']);
  });

  it('consume() on a paused topic delivers nothing until it is resumed, then everything', async () => {
    const { clock, queue } = await openQueue(makeKind);
    await queue.pause('jobs');
    await scheduleNow(queue, 'jobs', 3);
    const got: string[] = [];
    const consumer = queue.consume('jobs', (m) => void got.push(m.id), { concurrency: 2 });
    await advance(clock, 300, 100, queue);
    // A message made ready later is not handed over either.
    await queue.schedule({ topic: 'jobs', payload: 'late', id: 'jobs-late', delayMs: 50 });
    await advance(clock, 300, 100, queue);
    expect(got).toEqual([]);
    await queue.resume('jobs');
    for (let i = 0; i < 20 && got.length < 4; i++) await advance(clock, 100, 50, queue);
    await consumer.close();
    expect(got).toEqual(['jobs-0', 'jobs-1', 'jobs-2', 'jobs-late']);
  });

  it('deliveries in flight when paused are still acked and nacked', async () => {
    const { queue } = await openQueue(makeKind);
    await scheduleNow(queue, 'jobs', 2);
    const [a, b] = await queue.receive('jobs', { max: 2 });
    await queue.pause('jobs');
    expect(await queue.ack(a.receipt)).toBe(true);
    expect(await queue.nack(b.receipt, { delayMs: 0 })).toBe(true);
    expect(await queue.receive('jobs')).toEqual([]);
    await queue.resume('jobs');
    expect((await queue.receive('jobs')).map((m) => [m.id, m.attempts])).toEqual([['jobs-1', 2]]);
  });

  it('a long poll on a paused topic waits, and takes the message once resumed', async () => {
    const { clock, queue } = await openQueue(makeKind);
    await queue.pause('jobs');
    await scheduleNow(queue, 'jobs', 1);
    let answer: unknown;
    const polling = queue.receive('jobs', { waitMs: 5_000 }).then((got) => (answer = got));
    await advance(clock, 1_000, 100, queue);
    expect(answer).toBeUndefined();
    await queue.resume('jobs');
    await settle();
    expect(answer).toMatchObject([{ id: 'jobs-0' }]);
    await polling;
  });

  it('a long poll under way when its topic is paused hands out nothing that becomes ready', async () => {
    const { clock, queue } = await openQueue(makeKind);
    let answer: unknown;
    const polling = queue.receive('jobs', { waitMs: 5_000 }).then((got) => (answer = got));
    await settle();
    await queue.pause('jobs');
    await queue.schedule({ topic: 'jobs', payload: 1, id: 'due-soon', delayMs: 500 });
    await advance(clock, 1_000, 100, queue);
    expect(answer).toBeUndefined();
    await advance(clock, 4_100, 100, queue);
    expect(answer).toEqual([]);
    await polling;
    expect((await queue.topicInfo('jobs')).pending).toBe(1);
  });

  it('a rate limit hands out whole tokens and waits for the next one', async () => {
    const { clock, queue } = await openQueue(makeKind);
    await scheduleNow(queue, 'jobs', 10);
    const info = await queue.configureTopic('jobs', { rateLimit: { perSecond: 4, burst: 2 } });
    expect(info.rateLimit).toEqual({ perSecond: 4, burst: 2 });
    expect(await queue.receive('jobs', { max: 10 })).toHaveLength(2);
    expect(await queue.receive('jobs', { max: 10 })).toHaveLength(0);
    await advance(clock, 200, 100, queue);
    expect(await queue.receive('jobs', { max: 10 })).toHaveLength(0); // 0.8 of a token
    await advance(clock, 50, 50, queue);
    expect(await queue.receive('jobs', { max: 10 })).toHaveLength(1);
    // A long poll waits out the next token (250 ms at 4 a second), not its whole wait.
    let answer: unknown[] | undefined;
    const polling = queue
      .receive('jobs', { max: 10, waitMs: 10_000 })
      .then((got) => (answer = got));
    await advance(clock, 200, 50, queue);
    expect(answer).toBeUndefined();
    await advance(clock, 100, 50, queue);
    expect(answer).toHaveLength(1);
    await polling;
    // Tokens saved up stop at the burst.
    await advance(clock, 10_000, 1_000, queue);
    expect(await queue.receive('jobs', { max: 10 })).toHaveLength(2);
    // Removing the limit delivers the rest at once.
    await queue.configureTopic('jobs', { rateLimit: null });
    expect(await queue.receive('jobs', { max: 10 })).toHaveLength(4);
  });

  it('tokens taken for messages that were not there are given back', async () => {
    const { queue } = await openQueue(makeKind);
    await queue.configureTopic('jobs', { rateLimit: { perSecond: 1, burst: 3 } });
    await scheduleNow(queue, 'jobs', 1);
    expect(await queue.receive('jobs', { max: 3 })).toHaveLength(1);
    await scheduleNow(queue, 'other', 0);
    await queue.scheduleMany([
      { topic: 'jobs', payload: 1, id: 'b1' },
      { topic: 'jobs', payload: 2, id: 'b2' },
      { topic: 'jobs', payload: 3, id: 'b3' },
    ]);
    // Two tokens left (one used above; the other two given back).
    expect(await queue.receive('jobs', { max: 3 })).toHaveLength(2);
  });

  it('consume() delivers no faster than the limit', async () => {
    const { clock, queue } = await openQueue(makeKind);
    await queue.configureTopic('jobs', { rateLimit: { perSecond: 2, burst: 1 } });
    await scheduleNow(queue, 'jobs', 5);
    const times: number[] = [];
    const consumer = queue.consume('jobs', () => void times.push(clock.now()), {
      concurrency: 5,
    });
    await settle();
    for (let i = 0; i < 30 && times.length < 5; i++) await advance(clock, 100, 50, queue);
    await consumer.close();
    expect(times).toHaveLength(5);
    for (let i = 1; i < times.length; i++)
      expect(times[i] - times[i - 1]).toBeGreaterThanOrEqual(500);
  });

  it('lists topics with messages or settings, with their counts', async () => {
    const { queue } = await openQueue(makeKind);
    await scheduleNow(queue, 'b', 2);
    await queue.pause('c');
    await queue.configureTopic('a', { rateLimit: { perSecond: 100 } });
    expect((await queue.topicList()).topics).toEqual([
      {
        topic: 'a',
        paused: false,
        rateLimit: { perSecond: 100, burst: 100 },
        push: null,
        pending: 0,
        dead: 0,
      },
      { topic: 'b', paused: false, rateLimit: null, push: null, pending: 2, dead: 0 },
      { topic: 'c', paused: true, rateLimit: null, push: null, pending: 0, dead: 0 },
    ]);
    // Back to the defaults, a topic without messages is not listed.
    await queue.resume('c');
    expect((await queue.topicList()).topics.map((t) => t.topic)).toEqual(['a', 'b']);
    expect(await queue.topicInfo('never-used')).toEqual({
      topic: 'never-used',
      paused: false,
      rateLimit: null,
      push: null,
      pending: 0,
      dead: 0,
    });
  });

  it('refuses bad settings with named errors and changes nothing', async () => {
    const { queue } = await openQueue(makeKind);
    const bad: unknown[] = [
      { paused: 'yes' },
      { pasued: true },
      { rateLimit: { perSecond: 0 } },
      { rateLimit: { perSecond: -1 } },
      { rateLimit: { perSecond: 2_000_000 } },
      { rateLimit: { perSecond: 5, burst: 1.5 } },
      { rateLimit: { perSecond: 5, burst: 0 } },
      { rateLimit: { perSecond: 5, extra: 1 } },
      { rateLimit: 5 },
      null,
      [],
    ];
    for (const update of bad) {
      await expect(
        queue.configureTopic('jobs', update as never),
        JSON.stringify(update),
      ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
    }
    await expect(queue.pause('bad topic!')).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_TOPIC',
    });
    expect(await queue.topicInfo('jobs')).toMatchObject({ paused: false, rateLimit: null });
  });
});

describe('the gate under close, idle long polls and limit changes', () => {
  it('a receive waiting in the gate ends empty when the queue closes, holding nothing', async () => {
    const { queue } = await openQueue(memoryKind);
    await queue.pause('jobs');
    await queue.configureTopic('slow', { rateLimit: { perSecond: 0.001, burst: 1 } });
    await scheduleNow(queue, 'slow', 2);
    expect(await queue.receive('slow')).toHaveLength(1);
    const paused = queue.receive('jobs', { waitMs: 30_000 });
    const noTokens = queue.receive('slow', { waitMs: 30_000 });
    await settle();
    await queue.close();
    expect(await paused).toEqual([]);
    expect(await noTokens).toEqual([]);
    // No keep-alive left: a plain script would end here.
    expect(
      (queue as unknown as { backend: { waiters: { held: number } } }).backend.waiters.held,
    ).toBe(0);
  });

  it('idle long polls hold no tokens: a burst of 1 delivers 1, however many polls waited', async () => {
    const { clock, queue } = await openQueue(memoryKind);
    await queue.configureTopic('jobs', { rateLimit: { perSecond: 1, burst: 1 } });
    const got: number[] = [];
    const polls = Array.from({ length: 5 }, () =>
      queue.receive('jobs', { max: 10, waitMs: 20_000 }).then((m) => got.push(m.length)),
    );
    await advance(clock, 10_000, 1_000, queue);
    await scheduleNow(queue, 'jobs', 5);
    await settle();
    expect(got.reduce((a, b) => a + b, 0)).toBe(1);
    await advance(clock, 999, 333, queue);
    expect(got.reduce((a, b) => a + b, 0)).toBe(1);
    await advance(clock, 1, 1, queue);
    expect(got.reduce((a, b) => a + b, 0)).toBe(2);
    await advance(clock, 20_000, 1_000, queue);
    await Promise.all(polls);
  });

  it('a changed limit keeps what was saved up; refunds of the old limit are dropped', () => {
    let now = 0;
    const buckets = new LocalBuckets(() => now);
    const old = { perSecond: 100, burst: 100 };
    const next = { perSecond: 1, burst: 1 };
    expect(buckets.take('t', old, 100).granted).toBe(100);
    expect(buckets.take('t', next, 5).granted).toBe(0); // empty stays empty
    buckets.refund('t', old, 5); // taken under the old limit: dropped
    expect(buckets.take('t', next, 5).granted).toBe(0);
    now += 1_000;
    expect(buckets.take('t', next, 5).granted).toBe(1);
  });
});

describe('topics with settings of their own', () => {
  it('are at most TopicGate.maxWithSettings: one more is refused until one is back at the defaults', async () => {
    expect(TopicGate.maxWithSettings).toBe(10_000);
    TopicGate.maxWithSettings = 20;
    onTestFinished(() => void (TopicGate.maxWithSettings = 10_000));
    const { queue } = await openQueue(memoryKind);
    for (let i = 0; i < 20; i++) await queue.pause(`t${i}`);
    await expect(queue.pause('one-more')).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_CONFLICT',
      message: expect.stringMatching(
        /^20 topics have settings of their own .*put one back/,
      ) as string,
    });
    expect((await queue.topicInfo('one-more')).paused).toBe(false);
    // A topic that has settings may still change them.
    await queue.configureTopic('t0', { rateLimit: { perSecond: 5 } });
    await queue.resume('t1');
    await queue.pause('one-more');
    expect((await queue.topicInfo('one-more')).paused).toBe(true);
    expect((await queue.topicList()).topics.length).toBe(20);
  });
});

describe('topic settings survive a restart (file store)', () => {
  it('a paused, rate-limited topic is still so after reopening', async () => {
    const { kind, clock, queue: first } = await openQueue(fileKind);
    let queue = first;
    await queue.pause('jobs');
    await queue.configureTopic('slow', { rateLimit: { perSecond: 1, burst: 1 } });
    await scheduleNow(queue, 'jobs', 1);
    await scheduleNow(queue, 'slow', 3);
    await queue.close();
    queue = await kind.open(clock);
    try {
      expect(await queue.receive('jobs')).toEqual([]);
      expect(await queue.receive('slow', { max: 3 })).toHaveLength(1);
      expect(await queue.topicInfo('jobs')).toMatchObject({ paused: true, pending: 1 });
      expect(await queue.topicInfo('slow')).toMatchObject({
        rateLimit: { perSecond: 1, burst: 1 },
      });
    } finally {
      await queue.close();
    }
  });

  it('a damaged topics.json is refused at open, not read as "nothing paused"', async () => {
    const { kind, clock, queue } = await openQueue(fileKind);
    await queue.pause('jobs');
    const dir = (queue as unknown as { backend: { store: { dir: string } } }).backend.store.dir;
    await queue.close();
    const file = join(dir, 'topics.json');
    const text = readFileSync(file, 'utf8');
    expect(JSON.parse(text).topics.jobs.paused).toBe(true);
    for (const damaged of [
      text.slice(0, text.length / 2),
      text.replace('true', '"maybe"'),
      '{"version":1}',
      '{"version":7,"topics":{}}',
      '{"version":1,"topics":{"jobs":{}}}',
      '{"version":1,"topics":{"jobs":{"pasued":true,"rateLimit":null}}}',
      '{"version":1,"topics":{"bad topic":{"paused":true,"rateLimit":null}}}',
      '{"version":1,"topics":{"jobs":"paused"}}',
    ]) {
      writeFileSync(file, damaged);
      await expect(kind.open(clock)).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_CORRUPT' });
    }
    // The error says what to do; deleting or fixing the file lets it open again.
    writeFileSync(file, text);
    await (await kind.open(clock)).close();
  });
});

describe('LocalBuckets against a reference token bucket', () => {
  it('grants exactly what a bucket refilled continuously holds, in whole tokens', () => {
    fc.assert(
      fc.property(
        fc.record({
          perSecond: fc.double({ min: 0.001, max: 1_000, noNaN: true }),
          burst: fc.integer({ min: 1, max: 50 }),
        }),
        fc.array(
          fc.record({
            dt: fc.integer({ min: 0, max: 5_000 }),
            want: fc.integer({ min: 1, max: 60 }),
            refund: fc.integer({ min: 0, max: 60 }),
          }),
          { maxLength: 60 },
        ),
        (limit, steps) => {
          let now = 0;
          const buckets = new LocalBuckets(() => now);
          let level = limit.burst;
          let last = 0;
          for (const { dt, want, refund } of steps) {
            now += dt;
            level = Math.min(limit.burst, level + ((now - last) * limit.perSecond) / 1000);
            last = now;
            const { granted, retryInMs } = buckets.take('t', limit, want);
            expect(granted).toBe(Math.min(want, Math.floor(level)));
            level -= granted;
            if (granted === 0) {
              // The next token is there after retryInMs, not before.
              expect(level + ((retryInMs - 1) * limit.perSecond) / 1000).toBeLessThan(1);
              expect(level + (retryInMs * limit.perSecond) / 1000).toBeGreaterThanOrEqual(1 - 1e-9);
            }
            const back = Math.min(refund, granted);
            buckets.refund('t', limit, back);
            level = Math.min(limit.burst, level + back);
          }
        },
      ),
    );
  });
});
