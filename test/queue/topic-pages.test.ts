import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { TopicStateCounts } from '../../src/protocol/model.js';
import {
  checkStatsOptions,
  checkTopicListOptions,
  largestTopics,
  namesPage,
} from '../../src/queue/topic-pages.js';

const counts = fc.record({
  scheduled: fc.nat(5),
  ready: fc.nat(3),
  inflight: fc.nat(3),
  dead: fc.nat(2),
});
const live = (c: TopicStateCounts) => c.scheduled + c.ready + c.inflight + c.dead;
/** Short names from a small alphabet: many ties of counts, names sharing prefixes. */
const name = fc.stringMatching(/^[a-c0-2]{1,4}$/);
const topics = fc.uniqueArray(fc.tuple(name, counts), {
  selector: ([topic]) => topic,
  maxLength: 60,
});

describe('largestTopics (against sorting everything)', () => {
  it('names the limit largest, ties by name, and sums the rest', () => {
    fc.assert(
      fc.property(topics, fc.nat(70), (all, limit) => {
        const got = largestTopics(all, limit);
        const model = all
          .filter(([, c]) => live(c) > 0)
          .sort(([a, x], [b, y]) => live(y) - live(x) || (a < b ? -1 : a > b ? 1 : 0));
        const named = model.slice(0, limit);
        const others = model.slice(limit);
        // A record's order is not the heap's (integer-like keys come first): compared by name.
        const byName = (a: [string, unknown], b: [string, unknown]) => (a[0] < b[0] ? -1 : 1);
        expect(Object.entries(got.topics).sort(byName)).toEqual(
          named.map(([t, c]): [string, unknown] => [t, c]).sort(byName),
        );
        expect(got.topicCount).toBe(model.length);
        const sum = (state: keyof TopicStateCounts) => others.reduce((n, [, c]) => n + c[state], 0);
        expect(got.otherTopics).toEqual({
          scheduled: sum('scheduled'),
          ready: sum('ready'),
          inflight: sum('inflight'),
          dead: sum('dead'),
        });
      }),
      { numRuns: 300 },
    );
  });

  it('keeps a topic named like an Object method as any other', () => {
    const one = { scheduled: 1, ready: 0, inflight: 0, dead: 0 };
    const got = largestTopics(
      [
        ['constructor', one],
        ['__proto__', one],
      ],
      5,
    );
    expect(Object.keys(got.topics).sort()).toEqual(['__proto__', 'constructor']);
  });
});

describe('namesPage (against sorting everything)', () => {
  it('pages through every name once, in order, whatever the page size', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(name, { maxLength: 80 }),
        fc.integer({ min: 1, max: 20 }),
        (names, limit) => {
          const seen: string[] = [];
          let cursor: string | undefined;
          for (let pages = 0; ; pages++) {
            expect(pages).toBeLessThanOrEqual(names.length + 1);
            const page = namesPage(names, limit, cursor);
            expect(page.names.length).toBeLessThanOrEqual(limit);
            seen.push(...page.names);
            if (!page.more) break;
            expect(page.names.length).toBe(limit);
            cursor = page.names[limit - 1];
          }
          expect(seen).toEqual([...names].sort());
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('their options', () => {
  it('refuses counts out of range with a coded error', () => {
    expect(checkStatsOptions({})).toBe(100);
    expect(checkStatsOptions({ topics: 0 })).toBe(0);
    for (const topics of [-1, 1001, 2.5, NaN, '3']) {
      expect(() => checkStatsOptions({ topics } as never)).toThrow(
        expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
      );
    }
    expect(() => checkStatsOptions({ top: 3 } as never)).toThrow(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
    );
    expect(checkTopicListOptions({})).toEqual({ limit: 100, cursor: undefined });
    for (const options of [
      { limit: 0 },
      { limit: 1001 },
      { cursor: 5 },
      { cursor: 'x'.repeat(129) },
    ]) {
      expect(() => checkTopicListOptions(options as never)).toThrow(
        expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_OPTION' }),
      );
    }
  });
});
