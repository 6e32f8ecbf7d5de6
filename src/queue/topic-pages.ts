/**
 * Bounded views of every topic: stats() names the topics with the most live messages and sums
 * the rest; topicList() answers a page of names in order. Either costs one pass over the topics
 * and memory for the page only (a heap of at most `limit`), however many topics there are.
 */

import { DEFAULT_STATS_TOPICS, DEFAULT_TOPIC_PAGE, MAX_TOPIC_PAGE } from '../protocol/limits.js';
import type { StatsOptions, TopicListOptions, TopicStateCounts } from '../protocol/model.js';
import {
  checkKnownOptions,
  checkOption,
  checkOptionsObject,
  describe,
  invalidOption,
} from '../validate.js';

/** A cursor is a topic's name: 128 characters at most. */
const MAX_CURSOR_CHARS = 128;

export interface TopicSummary {
  /** The `limit` topics with the most live messages (dead ones included; ties by name), by name. */
  topics: Record<string, TopicStateCounts>;
  /** Topics with live messages, named in `topics` or not. */
  topicCount: number;
  /** The sum of the topics not named in `topics`. */
  otherTopics: TopicStateCounts;
}

export function checkStatsOptions(options: StatsOptions): number {
  checkOptionsObject(options, 'stats options', '{ topics: 10 }');
  checkKnownOptions(options, ['topics'], 'stats()');
  const { topics } = options;
  return topics === undefined
    ? DEFAULT_STATS_TOPICS
    : checkOption(topics, 'topics', 0, MAX_TOPIC_PAGE, true);
}

export function checkTopicListOptions(options: TopicListOptions): {
  limit: number;
  cursor: string | undefined;
} {
  checkOptionsObject(options, 'topicList options', '{ limit: 100 }');
  checkKnownOptions(options, ['limit', 'cursor'], 'topicList()');
  const { limit, cursor } = options;
  if (cursor !== undefined && (typeof cursor !== 'string' || cursor.length > MAX_CURSOR_CHARS)) {
    throw invalidOption(`cursor must be the cursor of a previous page, got ${describe(cursor)}`);
  }
  return {
    limit:
      limit === undefined
        ? DEFAULT_TOPIC_PAGE
        : checkOption(limit, 'limit', 1, MAX_TOPIC_PAGE, true),
    cursor,
  };
}

const liveOf = (c: TopicStateCounts) => c.scheduled + c.ready + c.inflight + c.dead;

/**
 * The `limit` largest topics of `all`, and what the others add up to. An entry of `all` is
 * copied if kept, so a reader may reuse one entry for every topic.
 */
export function largestTopics(
  all: Iterable<readonly [string, TopicStateCounts]>,
  limit: number,
): TopicSummary {
  // Worst kept on top: fewer messages, then the later name.
  type Item = [topic: string, counts: TopicStateCounts, live: number];
  const kept = new BoundedHeap<Item>(
    limit,
    (a, b) => a[2] < b[2] || (a[2] === b[2] && a[0] > b[0]),
  );
  const otherTopics: TopicStateCounts = { scheduled: 0, ready: 0, inflight: 0, dead: 0 };
  // Asks the heap about each topic with no array made for one it would not keep.
  const probe: Item = ['', otherTopics, 0];
  let topicCount = 0;
  const addOther = (c: TopicStateCounts) => {
    otherTopics.scheduled += c.scheduled;
    otherTopics.ready += c.ready;
    otherTopics.inflight += c.inflight;
    otherTopics.dead += c.dead;
  };
  for (const [topic, counts] of all) {
    const live = liveOf(counts);
    if (live === 0) continue;
    topicCount++;
    probe[0] = topic;
    probe[1] = counts;
    probe[2] = live;
    if (!kept.takes(probe)) {
      addOther(counts);
      continue;
    }
    const dropped = kept.offer([topic, { ...counts }, live]);
    if (dropped !== undefined) addOther(dropped[1]);
  }
  // No prototype: a topic may be named 'constructor' or 'valueOf'.
  const topics: Record<string, TopicStateCounts> = Object.create(null);
  for (const [topic, counts] of kept.drain().sort(([a], [b]) => (a < b ? -1 : 1))) {
    topics[topic] = counts;
  }
  return { topics, topicCount, otherTopics };
}

/**
 * The first `limit` of `names` (each given once) after `cursor` (none: from the first), in
 * code-unit order, and whether any follow.
 */
export function namesPage(
  names: Iterable<string>,
  limit: number,
  cursor: string | undefined,
): { names: string[]; more: boolean } {
  const kept = new BoundedHeap<string>(limit + 1, (a, b) => a > b);
  for (const name of names) {
    if (cursor === undefined || name > cursor) kept.offer(name);
  }
  const page = kept.drain().reverse();
  const more = page.length > limit;
  return { names: more ? page.slice(0, limit) : page, more };
}

/** At most `capacity` items, the worst (by `worse`) on top to be pushed out by a better one. */
class BoundedHeap<T> {
  private readonly items: T[] = [];

  constructor(
    private readonly capacity: number,
    private readonly worse: (a: T, b: T) => boolean,
  ) {}

  /** Whether offer(item) would keep it. */
  takes(item: T): boolean {
    return (
      this.items.length < this.capacity ||
      (this.items.length > 0 && this.worse(this.items[0], item))
    );
  }

  /** Keeps `item` if there is room or it beats the worst; answers the item left out, if any. */
  offer(item: T): T | undefined {
    const { items } = this;
    if (items.length < this.capacity) {
      items.push(item);
      this.up(items.length - 1);
      return undefined;
    }
    if (items.length === 0 || !this.worse(items[0], item)) return item;
    const out = items[0];
    items[0] = item;
    this.down(0);
    return out;
  }

  /** Every item kept, worst first; the heap is empty after. */
  drain(): T[] {
    const out: T[] = [];
    while (this.items.length > 0) {
      const last = this.items.pop() as T;
      if (this.items.length === 0) {
        out.push(last);
        break;
      }
      out.push(this.items[0]);
      this.items[0] = last;
      this.down(0);
    }
    return out;
  }

  private up(i: number): void {
    const { items } = this;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.worse(items[i], items[parent])) return;
      [items[i], items[parent]] = [items[parent], items[i]];
      i = parent;
    }
  }

  private down(i: number): void {
    const { items } = this;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= items.length) return;
      const right = left + 1;
      const child = right < items.length && this.worse(items[right], items[left]) ? right : left;
      if (!this.worse(items[child], items[i])) return;
      [items[i], items[child]] = [items[child], items[i]];
      i = child;
    }
  }
}
