/**
 * A topic costs memory only while it holds something: messages scheduled, ready, in flight or
 * dead, receives waiting on it, settings of its own. Once that has ended it costs nothing, so
 * topics named per order or tenant (`order-1`, `order-2`, ...) do not grow the process however
 * many there have been. The tests read the engine's private per-topic maps (and the file
 * store's topic names) to see that they really empty, and check that a topic that comes back
 * is a fresh one.
 */

import { describe, expect, it } from 'vitest';
import type { DelayQueue } from '../../src/delay-queue.js';
import { advance, fileKind, memoryKind, settle, useQueues } from './harness.js';

const openQueue = useQueues();

const TOPICS = 1_000;

function topicNames(prefix: string, n = TOPICS): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
}

interface Engine {
  near: { tallies: ReadonlyMap<string, unknown>; ready: ReadonlyMap<string, unknown> };
  waiters: { byTopic: ReadonlyMap<string, unknown> };
  topics: { settings: ReadonlyMap<string, unknown>; generations: ReadonlyMap<string, unknown> };
  store: { tables?: { topicNames: { byHash: ReadonlyMap<number, string> } } };
}

/** The sizes of the engine's per-topic maps (private), and of the file store's topic names. */
function perTopic(queue: DelayQueue) {
  const { near, waiters, topics, store } = (queue as unknown as { backend: Engine }).backend;
  return {
    tallies: near.tallies.size,
    readyLists: near.ready.size,
    waiting: waiters.byTopic.size,
    settings: topics.settings.size,
    generations: topics.generations.size,
    names: store.tables?.topicNames.byHash.size ?? 0,
  };
}

const NOTHING = {
  tallies: 0,
  readyLists: 0,
  waiting: 0,
  settings: 0,
  generations: 0,
  names: 0,
};

async function receiveOne(queue: DelayQueue, topic: string) {
  const got = await queue.receive(topic);
  expect(got).toHaveLength(1);
  return got[0];
}

describe.each([
  ['memory store', memoryKind],
  ['file store', fileKind],
])('a topic whose messages ended (%s)', (_name, makeKind) => {
  it('keeps nothing once its message was acked', async () => {
    const { queue } = await openQueue(makeKind);
    const topics = topicNames('order');
    await queue.scheduleMany(topics.map((topic) => ({ topic, payload: { topic } })));
    expect(perTopic(queue).tallies).toBe(TOPICS);
    for (const topic of topics) {
      const message = await receiveOne(queue, topic);
      expect(await queue.ack(message.receipt)).toBe(true);
    }
    await queue.settled();
    expect(perTopic(queue)).toEqual(NOTHING);
    expect((await queue.stats()).topics).toEqual({});
    expect(await queue.topicList()).toEqual({ topics: [] });
  });

  it('keeps nothing once its message was cancelled: ready, scheduled near, or far ahead', async () => {
    const { queue } = await openQueue(makeKind);
    const ready = topicNames('ready', 300);
    const near = topicNames('near', 300);
    const far = topicNames('far', 300);
    const scheduled = await queue.scheduleMany([
      ...ready.map((topic) => ({ topic, payload: 1 })),
      ...near.map((topic) => ({ topic, payload: 1, delayMs: 500 })),
      ...far.map((topic) => ({ topic, payload: 1, delayMs: 3_600_000 })),
    ]);
    expect(perTopic(queue).readyLists).toBe(ready.length);
    for (const { id } of scheduled) expect(await queue.cancel(id)).toBe(true);
    await queue.settled();
    expect(perTopic(queue)).toEqual(NOTHING);
    expect((await queue.stats()).topics).toEqual({});
  });

  it('keeps nothing once a message nacked, or whose visibility ran out, is acked on retry', async () => {
    const { clock, queue } = await openQueue(makeKind);
    const nacked = topicNames('nacked', 200);
    const expired = topicNames('expired', 200);
    await queue.scheduleMany(
      [...nacked, ...expired].map((topic) => ({
        topic,
        payload: 1,
        backoff: { type: 'fixed', delayMs: 10 },
      })),
    );
    for (const topic of nacked) {
      const message = await receiveOne(queue, topic);
      expect(await queue.nack(message.receipt, { delayMs: 0 })).toBe(true);
    }
    for (const topic of expired) await receiveOne(queue, topic);
    await queue.settled();
    for (const topic of nacked) {
      const message = await receiveOne(queue, topic);
      expect(await queue.ack(message.receipt)).toBe(true);
    }
    await advance(clock, 31_000, 1_000, queue); // the default visibility (30 s), then backoff
    for (const topic of expired) {
      const message = await receiveOne(queue, topic);
      expect(message.attempts).toBe(2);
      expect(await queue.ack(message.receipt)).toBe(true);
    }
    await queue.settled();
    expect(perTopic(queue)).toEqual(NOTHING);
  });

  it('keeps nothing when a take leaves only stale entries in its ready list', async () => {
    const { queue } = await openQueue(makeKind);
    const topics = topicNames('stale', 200);
    const scheduled = await queue.scheduleMany(
      topics.flatMap((topic) => [
        { topic, payload: 'first' },
        { topic, payload: 'second' },
      ]),
    );
    // The second of each topic leaves the ready list stale behind the first.
    for (let i = 1; i < scheduled.length; i += 2) {
      expect(await queue.cancel(scheduled[i].id)).toBe(true);
    }
    for (const topic of topics) {
      const message = await receiveOne(queue, topic);
      expect(message.payload).toBe('first');
      expect(await queue.ack(message.receipt)).toBe(true);
    }
    await queue.settled();
    expect(perTopic(queue)).toEqual(NOTHING);
  });

  it('keeps nothing once settings set on it are cleared, or once a long poll on it ended', async () => {
    const { clock, queue } = await openQueue(makeKind);
    const topics = topicNames('tenant', 100);
    for (const topic of topics) await queue.pause(topic);
    for (const topic of topics) {
      await queue.configureTopic(topic, { paused: false, rateLimit: { perSecond: 10 } });
    }
    expect(perTopic(queue)).toMatchObject({ settings: 100, generations: 100 });
    for (const topic of topics) await queue.configureTopic(topic, { rateLimit: null });
    const polls = topics.map((topic) => queue.receive(topic, { waitMs: 1_000 }));
    await settle();
    expect(perTopic(queue).waiting).toBe(100);
    await advance(clock, 1_100, 100, queue);
    for (const answer of await Promise.all(polls)) expect(answer).toEqual([]);
    expect(perTopic(queue)).toEqual(NOTHING);
  });

  it('keeps what it still holds: dead letters, settings, messages waiting on a paused topic', async () => {
    const { queue } = await openQueue(makeKind);
    await queue.schedule({ topic: 'dead-end', payload: 1, maxAttempts: 1 });
    const dying = await receiveOne(queue, 'dead-end');
    expect(await queue.nack(dying.receipt)).toBe(true);
    await queue.configureTopic('limited', { rateLimit: { perSecond: 5, burst: 5 } });
    await queue.schedule({ topic: 'limited', payload: 1 });
    const limited = await receiveOne(queue, 'limited');
    expect(await queue.ack(limited.receipt)).toBe(true);
    await queue.pause('paused');
    await queue.schedule({ topic: 'paused', payload: 1 });
    await queue.settled();
    expect((await queue.stats()).topics).toEqual({
      'dead-end': { scheduled: 0, ready: 0, inflight: 0, dead: 1 },
      paused: { scheduled: 0, ready: 1, inflight: 0, dead: 0 },
    });
    expect(await queue.topicInfo('limited')).toMatchObject({
      rateLimit: { perSecond: 5, burst: 5 },
      pending: 0,
    });
    expect(perTopic(queue)).toMatchObject({ tallies: 1, readyLists: 1, settings: 2 });
    expect(await queue.deadLetters('dead-end')).toHaveLength(1);
  });

  it('comes back as a fresh topic', async () => {
    const { queue } = await openQueue(makeKind);
    for (let round = 0; round < 3; round++) {
      const scheduled = await queue.scheduleMany([
        { topic: 'order-7', payload: `a${round}` },
        { topic: 'order-7', payload: `b${round}` },
      ]);
      expect((await queue.stats()).topics).toEqual({
        'order-7': { scheduled: 0, ready: 2, inflight: 0, dead: 0 },
      });
      const got = await queue.receive('order-7', { max: 10 });
      expect(got.map((m) => [m.id, m.payload, m.attempts])).toEqual([
        [scheduled[0].id, `a${round}`, 1],
        [scheduled[1].id, `b${round}`, 1],
      ]);
      expect((await queue.stats()).topics['order-7']).toEqual({
        scheduled: 0,
        ready: 0,
        inflight: 2,
        dead: 0,
      });
      for (const message of got) expect(await queue.ack(message.receipt)).toBe(true);
      await queue.settled();
      expect(perTopic(queue)).toEqual(NOTHING);
      expect((await queue.stats()).topics).toEqual({});
    }
  });
});
