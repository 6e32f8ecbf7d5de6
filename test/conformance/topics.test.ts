/**
 * Bounded views of many topics, one specification run on every backend (backends.ts):
 * topicList() a page at a time by name (topics with messages and topics with settings only,
 * each once), and stats() naming the topics with the most messages and summing the rest.
 */

import { afterEach, describe, expect, it } from 'vitest';
import type { Queue } from '../../src/queue/api.js';
import type { TopicInfo } from '../../src/queue/topics.js';
import { backends, closeAll, codeOf, useBackends } from './backends.js';

useBackends();

/** Every page of topicList(), in order. */
async function allPages(queue: Queue, limit: number): Promise<TopicInfo[][]> {
  const pages: TopicInfo[][] = [];
  let cursor: string | undefined;
  do {
    const page = await queue.topicList({ limit, ...(cursor === undefined ? {} : { cursor }) });
    pages.push(page.topics);
    cursor = page.cursor;
    expect(pages.length).toBeLessThan(100);
  } while (cursor !== undefined);
  return pages;
}

describe.each(backends)('topic pages and stats on $name', (backend) => {
  afterEach(closeAll);

  it('lists topics a page at a time by name, each once, with settings-only topics', async () => {
    const queue = await backend.open();
    const far = Date.now() + 3_600_000;
    // t-3 both has messages and settings; t-8 has settings only.
    for (const [i, n] of [2, 1, 3, 1, 2, 1, 1].entries()) {
      for (let k = 0; k < n; k++) {
        await queue.schedule({ topic: `t-${i}`, id: `m-${i}-${k}`, payload: k, deliverAt: far });
      }
    }
    await queue.pause('t-3');
    await queue.pause('t-8');

    const pages = await allPages(queue, 3);
    expect(pages.map((page) => page.map((t) => t.topic))).toEqual([
      ['t-0', 't-1', 't-2'],
      ['t-3', 't-4', 't-5'],
      ['t-6', 't-8'],
    ]);
    const byName = new Map(pages.flat().map((t) => [t.topic, t]));
    expect(byName.get('t-2')).toMatchObject({ pending: 3, paused: false });
    expect(byName.get('t-3')).toMatchObject({ pending: 1, paused: true });
    expect(byName.get('t-8')).toMatchObject({ pending: 0, paused: true });
    // One topic read alone says what the page says.
    for (const topic of byName.values()) expect(await queue.topicInfo(topic.topic)).toEqual(topic);

    // A page that ends exactly at the last topic carries no cursor.
    expect((await queue.topicList({ limit: 8 })).cursor).toBeUndefined();
    expect((await queue.topicList({ limit: 7 })).cursor).toBe('t-6');
    // After the last name: an empty last page.
    expect(await queue.topicList({ cursor: 't-8' })).toEqual({ topics: [] });
    expect(await codeOf(() => queue.topicList({ limit: 0 }))).toBe('ERR_TICKWHEEL_INVALID_OPTION');
    expect(await codeOf(() => queue.topicList({ limit: 1001 }))).toBe(
      'ERR_TICKWHEEL_INVALID_OPTION',
    );
    await queue.resume('t-3');
    await queue.resume('t-8');
  });

  it('stats() names the topics with the most messages and sums the others', async () => {
    const queue = await backend.open();
    const far = Date.now() + 3_600_000;
    const sizes = { big: 4, mid: 3, small: 1, tiny: 1, other: 2 };
    for (const [topic, n] of Object.entries(sizes)) {
      for (let k = 0; k < n; k++) {
        await queue.schedule({ topic, id: `${topic}-${k}`, payload: k, deliverAt: far });
      }
    }
    const stats = await queue.stats({ topics: 2 });
    expect(Object.keys(stats.topics).sort()).toEqual(['big', 'mid']);
    expect(stats.topics.big).toMatchObject({ scheduled: 4, ready: 0, inflight: 0, dead: 0 });
    expect(stats.topicCount).toBe(5);
    expect(stats.otherTopics).toEqual({ scheduled: 4, ready: 0, inflight: 0, dead: 0 });

    const none = await queue.stats({ topics: 0 });
    expect(none.topics).toEqual({});
    expect(none.otherTopics.scheduled).toBe(11);
    expect(Object.keys((await queue.stats()).topics)).toHaveLength(5);
    expect(await codeOf(() => queue.stats({ topics: 1001 }))).toBe('ERR_TICKWHEEL_INVALID_OPTION');
    expect(await codeOf(() => queue.stats({ topics: -1 }))).toBe('ERR_TICKWHEEL_INVALID_OPTION');
  });
});
